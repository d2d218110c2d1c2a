"""A day of recording in the compact format, written fast with the real writer: size, CPU, seeking, decoding.

The machine is the benchmark's (``waves.py``): 8 H100-like GPUs with 8 processes each, every figure
moving (sine waves with periods of 7-60 s; GPU 2 stalls 4 s in every 8, GPU 5 bursts 1.5 s every
10 s), one of the 64 processes replaced every 5 s by a new one with a new command line, four jobs
whose membership follows, advice raised and cleared, a 64-core host whose every core moves. Values
carry the precision their sources give (NVML: whole percents and degrees, milliwatts, millijoules,
bytes, KB/s; psutil: CPU percent to 0.1, bytes; process ages to 0.01 s; the kernel's load average in 1/2048).
Snapshots are built with the model classes and fed to :class:`CompactWriter` with timestamps 1 s apart
(1 Hz), as fast as it takes them.

Measured: bytes for the day (a real full day unless ``--hours`` is smaller: then extrapolated and
said so), CPU per snapshot of ``write`` (``time.process_time``), opening the day file and seeking
(``CompactRecording``: open, span, advice events and the first snapshot of ``read_from``), decoding
the whole day (``read_recording``), and JSON lines and ``.jsonl.gz`` for the first hour of the same
data as a size ratio. An extra row writes constant data (nothing moves). Prints the figures and writes
``benchmarks/RESULTS-recording.md``.

    python benchmarks/recording_day.py            # a full day, about 10 minutes on 2 cores
    python benchmarks/recording_day.py --hours 1  # a quick look (extrapolated)
"""

from __future__ import annotations

import argparse
import gzip
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scenario import REPO  # noqa: E402  (puts tests/ on sys.path too)
from waves import BURST_GPU, GPU_COUNT, PER_GPU, PROCESS_COUNT, SQUARE_GPU, util_gpu, wave  # noqa: E402

sys.path.insert(0, str(REPO))
from gpusight.recordings.compact import CompactRecording, CompactWriter  # noqa: E402
from gpusight.recordings.formats import RecordingProblem  # noqa: E402
from gpusight.recordings.opening import read_recording  # noqa: E402
from gpusight.snapshot.model import (  # noqa: E402
    Advice,
    DeviceSample,
    DriverInfo,
    ErrorNote,
    GpuProcessType,
    HostSample,
    JobSample,
    ProcessSample,
    Severity,
    Snapshot,
    SourceKind,
    WorkloadKind,
)
from gpusight.snapshot.serialize import snapshot_to_json  # noqa: E402

START = 1_767_225_600.0
"""Snapshot time of the first snapshot (2026-01-01 00:00 UTC)."""

DAY_S = 86_400
"""Snapshots in a day at 1 Hz."""

GIB = 1 << 30
MIB = 1 << 20
CORES = 64
CHURN_S = 5
"""Seconds between two process replacements."""

TARGET_MB_PER_DAY = 50.0
TARGET_CPU_MS = 5.0
TARGET_SEEK_S = 1.0


class Machine:
    """The simulated machine: builds the snapshot at each second, moving or constant."""

    def __init__(self, moving: bool, hopper: bool = False) -> None:
        self.moving = moving
        self.hopper = hopper
        """Also GPM, NVLink and gpusight.torch figures (a Hopper machine with a watched trainer)."""
        self.slots = [self._process_identity(slot, 0) for slot in range(PROCESS_COUNT)]
        self.energy_mj = [1_000_000_000 + gpu * 7_777_777 for gpu in range(GPU_COUNT)]
        self.driver = DriverInfo("550.90.07", "12.4", "12.550.90.07")

    @staticmethod
    def _process_identity(slot: int, generation: int) -> tuple[int, str, str, float]:
        pid = 100_000 + slot * 997 + generation * 65_537 % 4_000_000
        run = f"{slot:02d}-{generation:05d}"
        cmdline = (f"/opt/conda/envs/train/bin/python -u train.py --config configs/llama-7b-{slot // 16}.yaml "
                   f"--run-id {run} --lr 3e-4 --batch-size {16 << slot % 3} --data /datasets/shard-{slot % 8}")
        created = round(START - 3600 + generation * CHURN_S + slot * 0.37, 2)
        return pid, cmdline, run, created

    def snapshot(self, second: int) -> Snapshot:
        """The machine at ``second`` seconds into the day."""
        t = float(second) if self.moving else 0.0
        timestamp = START + second
        if self.moving and second and second % CHURN_S == 0:
            slot = (second // CHURN_S * 13) % PROCESS_COUNT
            self.slots[slot] = self._process_identity(slot, second // CHURN_S)
        devices = tuple(self._device(gpu, t) for gpu in range(GPU_COUNT))
        processes = tuple(self._process(slot, t, timestamp, devices[slot // PER_GPU]) for slot in range(PROCESS_COUNT))
        return Snapshot(
            timestamp=timestamp, source=SourceKind.NVML, host=self._host(t), driver=self.driver, devices=devices,
            processes=processes, jobs=self._jobs(), advice=self._advice(second), errors=self._errors(second),
            label=None,
        )

    def _device(self, gpu: int, t: float) -> DeviceSample:
        util = util_gpu(t, gpu) if self.moving else 40 + 7 * gpu
        util_mem = round(util * (0.3 + 0.1 * wave(t, gpu, "util_mem")))
        power_mw = min(650_000, round(90_000 + 4_500 * util + 40_000 * wave(t, gpu, "power")))
        self.energy_mj[gpu] += power_mw // 1000 if self.moving else 0
        busy = util > 0
        return DeviceSample(
            index=gpu, name="NVIDIA H100 80GB HBM3", uuid=f"GPU-3f0c{gpu:04x}-6d1e-4c55-9b1a-00000000{gpu:04x}",
            pci_bus_id=f"00000000:{0x18 + gpu * 0x10:02X}:00.0", minor_number=gpu, cuda_index=None,
            utilization_gpu_percent=float(util), utilization_memory_percent=float(util_mem),
            memory_used_bytes=round((40 + 30 * wave(t, gpu, "mem_used")) * GIB) // MIB * MIB,
            memory_total_bytes=81_559_191_552, memory_reserved_bytes=593_494_016,
            power_watts=power_mw / 1000.0, power_limit_watts=(690_000 if gpu == GPU_COUNT - 1 else 700_000) / 1000.0,
            temperature_celsius=float(round(50 + 15 * wave(t, gpu, "temp"))), fan_percent=None,
            clock_sm_mhz=1980 - 15 * round(10 * (1 + wave(t, gpu, "temp"))) if busy else 345,
            clock_memory_mhz=2619, pstate=0 if busy else 8, energy_joules=self.energy_mj[gpu] / 1000.0,
            throttle_reasons=("sw_power_cap",) if power_mw > 500_000 else (),
            pcie_tx_bytes_per_s=float(0 if not busy else round(2_000_000 + 1_800_000 * wave(t, gpu, "pcie_tx")) * 1024),
            pcie_rx_bytes_per_s=float(0 if not busy else round(6_000_000 + 5_500_000 * wave(t, gpu, "pcie_rx")) * 1024),
            ecc_errors_uncorrected=0, mig_mode=False, compute_capability=(9, 0),
            **(self._hopper_device(gpu, t, util, busy) if self.hopper else {}),
        )

    @staticmethod
    def _hopper_device(gpu: int, t: float, util: float, busy: bool) -> dict[str, float]:
        gpm = util * (0.8 + 0.1 * wave(t, gpu, "proc_share"))
        return {  # at the collectors' precision: GPM to 0.01, counter rates in whole bytes per second
            "sm_active_percent": round(gpm * 0.97, 2), "sm_occupancy_percent": round(gpm * 0.41, 2),
            "tensor_active_percent": round(gpm * 0.63, 2), "dram_active_percent": round(gpm * 0.52, 2),
            "nvlink_tx_bytes_per_s": float(round((120e9 + 40e9 * wave(t, gpu, "pcie_tx")) / 3.0)) if busy else 0.0,
            "nvlink_rx_bytes_per_s": float(round((118e9 + 40e9 * wave(t, gpu, "pcie_rx")) / 3.0)) if busy else 0.0,
        }

    def _process(self, slot: int, t: float, timestamp: float, device: DeviceSample) -> ProcessSample:
        pid, cmdline, _, created = self.slots[slot]
        gpu, rank = divmod(slot, PER_GPU)
        util = device.utilization_gpu_percent or 0.0
        share = (1 + rank) / 36 * (1.2 + wave(t, gpu, "proc_share") * (rank - PER_GPU / 2) / PER_GPU)
        watched = self.hopper and slot % 8 == 0
        return ProcessSample(
            pid=pid, device_index=gpu, ppid=4000 + gpu, name="python", cmdline=cmdline, user=f"user{gpu // 2}",
            gpu_memory_bytes=round((device.memory_used_bytes or 0) * share) // MIB * MIB,
            sm_percent=float(round(util * share)), gpu_memory_percent=float(round((device.utilization_memory_percent or 0) * share)),
            gpu_process_type=GpuProcessType.COMPUTE,
            cpu_percent=round(95 + 60 * wave(t + slot, gpu, "util_mem"), 1) if self.moving else 100.0,
            rss_bytes=8 * GIB + 4096 * round(3000 * (1 + wave(t / 10 + slot, gpu, "mem_used"))),
            elapsed_seconds=round(max(0.0, timestamp + self._read_delay(slot, t) - created), 2), create_time=created,
            status="running" if util or not self.moving else "sleeping", num_workers=4,
            input_wait_percent=round((0.4 + 0.3 * wave(t, gpu, "pcie_rx")) * 100 / 3, 1) if watched else None,
            steps_per_second=round((3.1 + wave(t, gpu, "power")) / 1.7, 2) if watched else None,
            loader_num_workers=4 if watched else None, loader_batch_size=32 if watched else None,
            job=1 + gpu // 2, rank=rank + 8 * (gpu % 2),
            cpu_wait_percent=round(abs(3 * wave(t + slot, gpu, "temp")), 1) if self.moving else 0.0,
        )

    @staticmethod
    def _read_delay(slot: int, t: float) -> float:
        """Seconds between the snapshot's timestamp and the read of a process (0-6 ms, varying)."""
        return ((int(t) * 7919 + slot * 104_729) % 6000) * 1e-6

    def _host(self, t: float) -> HostSample:
        cores = tuple(round(min(100.0, max(0.0, 60 + 38 * wave(t + core, core % GPU_COUNT, "util_gpu"))), 1)
                      for core in range(CORES))
        return HostSample(
            hostname="dgx-h100-01", cpu_percent_per_core=cores, iowait_percent=round(2 + 1.5 * wave(t, 0, "temp"), 1),
            load_average=tuple(round((40 + amplitude * wave(t / slow, 1, "temp")) * 2048) / 2048  # kernel fixed point
                               for amplitude, slow in ((8, 1), (4, 5), (2, 15))),
            memory_used_bytes=(900 * GIB + round(60 * GIB * wave(t, 2, "mem_used"))) // 4096 * 4096,
            memory_total_bytes=2_163_352_322_048, swap_used_bytes=0, swap_total_bytes=0,
        )

    def _jobs(self) -> tuple[JobSample, ...]:
        jobs = []
        for job in range(4):
            slots = range(job * 2 * PER_GPU, (job + 1) * 2 * PER_GPU)
            jobs.append(JobSample(
                id=job + 1, kind=WorkloadKind.TRAINING, evidence=f"torchrun PID {4000 + job}; RANK/WORLD_SIZE set",
                pids=tuple(self.slots[s][0] for s in slots), devices=(2 * job, 2 * job + 1), world_size=16,
                launcher_pid=4000 + job, cluster_key=None,
            ))
        return tuple(jobs)

    def _advice(self, second: int) -> tuple[Advice, ...]:
        if not self.moving:
            return ()
        advice = []
        if second % 3600 < 600:
            advice.append(Advice(f"input_bound:gpu{SQUARE_GPU}", Severity.WARN, f"gpu{SQUARE_GPU}",
                                 f"GPU {SQUARE_GPU} waits for input half of the time",
                                 "util 100 % and 0 % in turn every 4 s", "more DataLoader workers"))
        if second % 1800 < 120:
            advice.append(Advice(f"bursty:gpu{BURST_GPU}", Severity.INFO, f"gpu{BURST_GPU}",
                                 f"GPU {BURST_GPU} idles between short bursts", "10 % with 1.5 s at 100 % every 10 s",
                                 "batch the requests"))
        if second % 7200 > 7000:
            advice.append(Advice("hot:gpu7", Severity.CRITICAL, "gpu7", "GPU 7 is hot", "temperature 88 C", "check airflow"))
        return tuple(advice)

    def _errors(self, second: int) -> tuple[ErrorNote, ...]:
        return (ErrorNote("gpu3", "NVML call timed out (NVML_ERROR_TIMEOUT)"),) if self.moving and second % 900 == 0 else ()


def write_day(path: Path, seconds: int, moving: bool, hopper: bool = False) -> dict[str, float]:
    """Write ``seconds`` snapshots; CPU of ``write`` and ``close`` per snapshot, and the file size."""
    machine = Machine(moving, hopper)
    writer = CompactWriter(path)
    cpu = 0.0
    worst = 0.0
    for second in range(seconds):
        snapshot = machine.snapshot(second)
        before = time.process_time()
        writer.write(snapshot)
        spent = time.process_time() - before
        cpu += spent
        worst = max(worst, spent)
        if second % 3600 == 3599:
            print(f"  {(second + 1) // 3600} h written, {path.stat().st_size / 1e6:.1f} MB, "
                  f"{cpu / (second + 1) * 1000:.2f} ms CPU per snapshot", file=sys.stderr)
    before = time.process_time()
    writer.close()
    cpu += time.process_time() - before
    return {"cpu_ms": cpu / seconds * 1000, "worst_ms": worst * 1000, "bytes": path.stat().st_size}


def jsonl_sizes(seconds: int) -> tuple[int, int]:
    """Bytes of the same snapshots as JSON lines and as ``.jsonl.gz`` (one gzip member per line, as the writer does)."""
    machine = Machine(True)
    plain = packed = 0
    for second in range(seconds):
        line = snapshot_to_json(machine.snapshot(second)).encode() + b"\n"
        plain += len(line)
        packed += len(gzip.compress(line, compresslevel=6, mtime=0))
    return plain, packed


def live_recordings(workdir: Path, seconds: float) -> dict[str, dict[str, float]]:
    """Record with the real app for ``seconds`` at 1 Hz, side by side: the benchmark machine (fake NVML, 64 real
    processes, the mover) and ``--demo mixed``; bytes per snapshot of each, stopped with SIGTERM."""
    from mover import bench_machine

    base = dict(os.environ, PYTHONPATH=str(REPO))
    found: dict[str, dict[str, float]] = {}
    with bench_machine(workdir / "machine") as machine:
        runs = {
            "fake NVML (benchmark machine)": ([], machine.env(base)),
            "--demo mixed": (["--demo", "mixed"], base),
        }
        procs = {}
        for name, (extra, env) in runs.items():
            path = workdir / f"live-{len(procs)}.gtr"
            procs[name] = (path, subprocess.Popen([sys.executable, "-m", "gpusight", *extra, "--record", str(path),
                                                   "--interval", "1"], env=env, stdin=subprocess.DEVNULL,
                                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        time.sleep(seconds)
        for name, (path, proc) in procs.items():
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
            items = list(read_recording(path))
            snapshots = [i for i in items if isinstance(i, Snapshot)]
            found[name] = {"snapshots": float(len(snapshots)), "bytes": float(path.stat().st_size),
                           "problems": float(len(items) - len(snapshots)),
                           "processes": float(max((len(s.processes) for s in snapshots), default=0))}
    return found


def seek_times(path: Path, seconds: int) -> dict[str, float]:
    """Open + span + advice events + first snapshot of read_from at a few moments; the worst and the mean."""
    times = []
    for fraction in (0.0, 0.13, 0.5, 0.77, 0.999):
        began = time.perf_counter()
        recording = CompactRecording(path)
        span = recording.last_timestamp - recording.first_timestamp
        assert span >= 0
        events = recording.advice_events()
        first = next(iter(recording.read_from(START + fraction * seconds + 0.5)))
        times.append(time.perf_counter() - began)
        recording.close()
        assert isinstance(first, Snapshot), first
    return {"worst_s": max(times), "mean_s": sum(times) / len(times), "events": float(len(events))}


def decode_all(path: Path) -> dict[str, float]:
    """Read the whole file back; wall time, snapshots and problems."""
    began = time.perf_counter()
    count = problems = 0
    for item in read_recording(path):
        if isinstance(item, RecordingProblem):
            problems += 1
        else:
            count += 1
    return {"seconds": time.perf_counter() - began, "snapshots": float(count), "problems": float(problems)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=24.0, help="simulated hours to write (default 24: a full day)")
    parser.add_argument("--json-hours", type=float, default=1.0, help="hours written as JSON lines for the ratio")
    parser.add_argument("--live-seconds", type=float, default=120.0,
                        help="seconds of real recording with the app, fake NVML and demo (default 120; 0: none)")
    parser.add_argument("--no-results", action="store_true", help="print only; do not write RESULTS-recording.md")
    args = parser.parse_args()
    seconds = max(60, round(args.hours * 3600))
    json_seconds = max(10, min(seconds, round(args.json_hours * 3600)))
    scale = DAY_S / seconds
    with tempfile.TemporaryDirectory(prefix="gpusight-day-") as workdir:
        day = Path(workdir) / "day.gtr"
        print(f"benchmark: writing {seconds} snapshots (moving) to {day}", file=sys.stderr)
        moving = write_day(day, seconds, True)
        print("benchmark: seeking", file=sys.stderr)
        seek = seek_times(day, seconds)
        print("benchmark: decoding the whole file", file=sys.stderr)
        decode = decode_all(day)
        constant_path = Path(workdir) / "constant.gtr"
        constant_seconds = min(seconds, 3600)
        print(f"benchmark: writing {constant_seconds} snapshots (constant)", file=sys.stderr)
        constant = write_day(constant_path, constant_seconds, False)
        print(f"benchmark: writing {constant_seconds} snapshots (with GPM, NVLink and gpusight.torch figures)", file=sys.stderr)
        hopper = write_day(Path(workdir) / "hopper.gtr", constant_seconds, True, hopper=True)
        print(f"benchmark: {json_seconds} snapshots as JSON lines and .jsonl.gz", file=sys.stderr)
        plain, packed = jsonl_sizes(json_seconds)
        live = {}
        if args.live_seconds > 0:
            print(f"benchmark: recording {args.live_seconds:g} s with the real app (fake NVML, demo)", file=sys.stderr)
            live = live_recordings(Path(workdir), args.live_seconds)
    per_snapshot = moving["bytes"] / seconds
    day_mb = moving["bytes"] * scale / 1e6
    rows = [
        ("Bytes per day, moving data (1 Hz, 86,400 snapshots)",
         f"{day_mb:.1f} MB" + ("" if seconds == DAY_S else f" (extrapolated from {seconds} snapshots)"),
         f"<= {TARGET_MB_PER_DAY:g} MB", day_mb <= TARGET_MB_PER_DAY),
        ("Bytes per snapshot, moving", f"{per_snapshot:.0f} B", "", None),
        ("Writer CPU per snapshot, moving (mean; worst single write)",
         f"{moving['cpu_ms']:.2f} ms ({moving['worst_ms']:.1f} ms)", f"<= {TARGET_CPU_MS:g} ms", moving["cpu_ms"] <= TARGET_CPU_MS),
        ("Open + span + advice events + first snapshot of read_from (worst of 5 moments; mean)",
         f"{seek['worst_s'] * 1000:.0f} ms ({seek['mean_s'] * 1000:.0f} ms)", f"< {TARGET_SEEK_S:g} s", seek["worst_s"] < TARGET_SEEK_S),
        ("Decode the whole file (read_recording)",
         f"{decode['seconds']:.1f} s, {decode['snapshots'] / decode['seconds']:.0f} snapshots/s, {decode['problems']:.0f} problems",
         "well under a minute for a day", None),
        ("JSON lines, same data (first " + f"{json_seconds} snapshots)",
         f"{plain / json_seconds:.0f} B/snapshot = {plain / json_seconds * DAY_S / 1e9:.2f} GB/day; compact is {plain / json_seconds / per_snapshot:.0f}x smaller", "", None),
        (".jsonl.gz, same data", f"{packed / json_seconds:.0f} B/snapshot = {packed / json_seconds * DAY_S / 1e6:.0f} MB/day; "
         f"compact is {packed / json_seconds / per_snapshot:.1f}x smaller", "", None),
        ("Extra row: constant data (nothing moves)",
         f"{constant['bytes'] / constant_seconds * DAY_S / 1e6:.2f} MB/day, {constant['cpu_ms']:.2f} ms CPU per snapshot", "", None),
        ("Extra row: moving, plus GPM (4 metrics), NVLink and gpusight.torch figures (a Hopper machine with watched "
         "trainers; first hour)",
         f"{hopper['bytes'] / constant_seconds * DAY_S / 1e6:.1f} MB/day, {hopper['cpu_ms']:.2f} ms CPU per snapshot", "", None),
    ]
    for name, figures in live.items():
        per = figures["bytes"] / max(1.0, figures["snapshots"])
        rows.append((f"Extra row: the real app, `gpusight --record` at 1 Hz for {args.live_seconds:g} s, {name}",
                     f"{figures['snapshots']:.0f} snapshots of up to {figures['processes']:.0f} processes, {per:.0f} B/snapshot "
                     f"= {per * DAY_S / 1e6:.1f} MB/day (keyframe and header included), {figures['problems']:.0f} problems",
                     "", None))
    lines = [
        "# Compact recording format: a day at 1 Hz", "",
        f"`python benchmarks/recording_day.py{'' if seconds == DAY_S else f' --hours {args.hours:g}'}` on {platform.node() or 'this machine'} "
        f"({os.cpu_count()} cores, Python {platform.python_version()}), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.", "",
        f"8 GPUs and {PROCESS_COUNT} processes with every metric moving (waves.py; GPU {SQUARE_GPU} stalls 4 s in 8, "
        f"GPU {BURST_GPU} bursts 1.5 s every 10 s), one process replaced every {CHURN_S} s with a new command line, "
        "4 jobs, advice raised and cleared, a 64-core host; timestamps 1 s apart, written as fast as the writer goes.", "",
        "| Figure | Measured | Target | Met |", "|---|---|---|---|",
    ]
    for name, value, target, met in rows:
        lines.append(f"| {name} | {value} | {target} | {'' if met is None else ('yes' if met else 'NO')} |")
    if live:
        lines += [
            "", "The real-app rows include one keyframe per 120 s (a day's blocks have one per 300 s). The fake NVML "
            "reports GPU and process memory in arbitrary bytes, which costs about 300 B per snapshot here; real H100s "
            "report process memory in whole MiB and device memory in 4 KiB pages (tests/data/real-h100), as the "
            "simulated day does.",
        ]
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_results:
        (REPO / "benchmarks" / "RESULTS-recording.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

