"""Runs gpusight beside real training jobs on a real NVIDIA GPU and keeps everything worth keeping.

Usage: ``python scripts/realgpu/harness.py OUT_DIR PHASE...`` with phases

- ``env``: versions, ``nvidia-smi -q``, the query-field list, NVML call costs on an idle GPU;
- ``fields``: a GPU-bound convnet in fp32 (TF32 off), then bf16, while gpusight records, the TUI runs,
  and ``gpusight --once --json``, ``nvidia-smi --query-gpu``, ``pmon`` and ``--query-compute-apps`` are
  taken together three times per precision, with nvidia-smi/dmon streams running throughout;
- ``run_a`` (input-bound), ``run_b`` (fed, bf16, NVML cost probe alongside), ``run_c`` (trainer plus
  inference server): each recorded, ``--json --duration 20`` near the end, and a screenshot of the
  live TUI at 160x45 taken with its ``s`` key; in run_a and run_c gpusight's CPU at several intervals;
- ``observer``: one fed trainer's step rate in windows without gpusight and with the TUI at 0.5 s and 0.25 s;
- ``procutil``: trainer and server; raw per-process utilization samples beside ``pmon`` and a recording;
- ``pcie``: the units of the PCIe sources under a steady pinned copy;
- ``pcie_check``: gpusight's PCIe rates under that copy, beside dmon, with the raw byte counters.

``--scale F`` multiplies every duration (a quick run on a laptop: ``--scale 0.2 --small``; ``--small``
shrinks the model so it trains on a CPU). Every phase catches its own failure, so the others still run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pcie_units import COPY
from terminal import BarePty, TmuxTerminal, open_terminal

SRC = Path(__file__).resolve().parents[2]
"""The gpusight source tree this harness runs (put first on PYTHONPATH of every child)."""

SCREEN = (160, 45)
"""Terminal size of the live TUI."""

QUERY_FIELDS = (
    "index", "name", "uuid", "utilization.gpu", "utilization.memory", "memory.used", "memory.total",
    "memory.reserved", "memory.free", "power.draw", "power.draw.instant", "power.draw.average", "power.limit",
    "enforced.power.limit", "temperature.gpu", "fan.speed", "clocks.sm", "clocks.mem", "pstate",
    "clocks_event_reasons.active", "clocks_throttle_reasons.active", "pcie.link.gen.current",
    "pcie.link.width.current", "ecc.mode.current", "ecc.errors.uncorrected.volatile.total", "mig.mode.current",
    "compute_cap", "driver_version", "persistence_mode",
)
"""nvidia-smi --query-gpu fields wanted; those this nvidia-smi does not know are left out."""

TRAIN = ("-m", "gpusight.examples.convnet")
SERVE = ("-m", "gpusight.examples.serve")
GPUSIGHT = ("-m", "gpusight")


class Harness:
    """Starts and stops the children of one phase, and writes into ``out``."""

    def __init__(self, out: Path, scale: float, small: bool) -> None:
        self.out = out
        """Output folder."""
        self.scale = scale
        """Factor applied to every duration."""
        self.small = small
        """Shrink the model (for a CPU-only rehearsal)."""
        self.env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(SRC), *filter(None, [os.environ.get("PYTHONPATH")])]), "PYTHONUNBUFFERED": "1"}
        """Environment of every child."""
        self.children: list[subprocess.Popen[bytes]] = []
        self.terminals: list[TmuxTerminal | BarePty] = []
        self.smi_fields: list[str] = []

    def seconds(self, value: float) -> float:
        """``value`` seconds, scaled."""
        return value * self.scale

    def spawn(self, argv: Sequence[str], log: Path) -> subprocess.Popen[bytes]:
        """Start ``argv`` in its own session with stdout and stderr into ``log``."""
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as stream:
            child = subprocess.Popen(list(argv), stdout=stream, stderr=subprocess.STDOUT, env=self.env,
                                     start_new_session=True, cwd=self.out)
        self.children.append(child)
        return child

    def python(self, args: Sequence[str], log: Path) -> subprocess.Popen[bytes]:
        """Start ``python args`` (see ``spawn``)."""
        return self.spawn([sys.executable, *args], log)

    def stop(self, child: subprocess.Popen[bytes], sig: int = signal.SIGINT, timeout: float = 15.0) -> int | None:
        """Signal ``child``'s process group and wait; kill it after ``timeout``."""
        if child.poll() is None:
            try:
                os.killpg(child.pid, sig)
            except ProcessLookupError:
                pass
            try:
                child.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait(5)
        return child.returncode

    def stop_all(self) -> None:
        """Stop every child and terminal still running."""
        for terminal in self.terminals:
            terminal.close()
        self.terminals = []
        for child in self.children:
            self.stop(child, timeout=10)
        self.children = []

    def trainer_args(self, *extra: str) -> list[str]:
        """The convnet's command line (``extra`` appended), shrunk with ``--small``."""
        args = [*TRAIN, "--report-every", "5"]
        if self.small:
            args += ["--image-size", "32", "--width", "8", "--batch-size", "32", "--samples", "1024"]
        return args + list(extra)

    def tui(self, name: str, *extra: str) -> TmuxTerminal | BarePty:
        """The live TUI at 160x45 with ``extra`` flags, in a terminal named ``name``."""
        terminal = open_terminal(f"gpusight-{name}-{os.getpid()}")
        env = {"PYTHONPATH": self.env["PYTHONPATH"], "TERM": "xterm-256color", "COLORTERM": "truecolor",
               "PYTHONUNBUFFERED": "1"}
        terminal.start([sys.executable, *GPUSIGHT, *extra], SCREEN, env)
        self.terminals.append(terminal)
        return terminal

    def screenshot(self, terminal: TmuxTerminal | BarePty, export_dir: Path, stem: str) -> None:
        """Press ``s``, wait for the SVG the app exports, and keep it (with tmux's text of the screen) as ``stem``."""
        shots = self.out / "shots"
        shots.mkdir(exist_ok=True)
        before = set(export_dir.glob("*.svg")) if export_dir.exists() else set()
        terminal.keys("s")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            new = set(export_dir.glob("*.svg")) - before if export_dir.exists() else set()
            if new:
                shutil.copy(max(new), shots / f"{stem}.svg")
                break
            time.sleep(0.2)
        else:
            print(f"screenshot {stem}: no SVG exported within 20 s", flush=True)
        (shots / f"{stem}.txt").write_text(terminal.screen())
        (shots / f"{stem}.ansi").write_text(terminal.screen(escapes=True))

    def nvidia_smi(self, args: Sequence[str], out: Path, timeout: float = 30) -> None:
        """Run nvidia-smi with ``args`` and keep its output (and failure) in ``out``."""
        try:
            result = subprocess.run(["nvidia-smi", *args], check=False, capture_output=True, text=True, timeout=timeout)
            out.write_text(result.stdout + (f"\n# rc={result.returncode} {result.stderr}" if result.returncode else ""))
        except (OSError, subprocess.SubprocessError) as error:
            out.write_text(f"# failed: {error}\n")

    def known_query_fields(self) -> list[str]:
        """The QUERY_FIELDS this nvidia-smi documents."""
        if not self.smi_fields:
            try:
                text = subprocess.run(["nvidia-smi", "--help-query-gpu"], check=False, capture_output=True, text=True,
                                      timeout=30).stdout
            except (OSError, subprocess.SubprocessError):
                text = ""
            self.smi_fields = [f for f in QUERY_FIELDS if f'"{f}"' in text]
        return self.smi_fields


def wait_for_text(path: Path, text: str, timeout: float) -> bool:
    """Wait until ``path`` contains ``text``; False after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return True
        time.sleep(0.2)
    return False


def sleep_until(t0: float, offset: float) -> None:
    """Sleep until ``offset`` seconds after monotonic time ``t0``."""
    delay = t0 + offset - time.monotonic()
    if delay > 0:
        time.sleep(delay)


def phase_env(h: Harness) -> None:
    """Versions, nvidia-smi's reference output and field list, NVML costs on the idle GPU."""
    d = h.out / "env"
    d.mkdir(exist_ok=True)
    probe = ("import sys, torch, pynvml, psutil, textual, rich; "
             "print(sys.version); print('torch', torch.__version__, torch.cuda.is_available()); "
             "print('pynvml', pynvml.__file__); print('textual', textual.__version__, 'psutil', psutil.__version__)")
    (d / "versions.txt").write_text(subprocess.run([sys.executable, "-c", probe], check=False, capture_output=True, text=True,
                                                   env=h.env).stdout + f"cores {os.cpu_count()}\n")
    h.nvidia_smi([], d / "nvidia-smi.txt")
    h.nvidia_smi(["-q"], d / "nvidia-smi-q-idle.txt")
    h.nvidia_smi(["--help-query-gpu"], d / "help-query-gpu.txt")
    h.nvidia_smi(["dmon", "--help"], d / "dmon-help.txt")
    h.nvidia_smi(["pmon", "--help"], d / "pmon-help.txt")
    (d / "query-fields.txt").write_text("\n".join(h.known_query_fields()) + "\n")
    idle = subprocess.run([sys.executable, *GPUSIGHT, "--once", "--json"], check=False, capture_output=True, text=True,
                          env=h.env, timeout=60)
    (d / "once-idle.json").write_text(idle.stdout + idle.stderr)
    cost = subprocess.run([sys.executable, str(SRC / "scripts/realgpu/nvml_cost.py"), str(d / "nvml-cost-idle.json"),
                           "150"], check=False, capture_output=True, text=True, env=h.env, timeout=120)
    print(cost.stdout + cost.stderr[-2000:], flush=True)


def take_field_set(h: Harness, d: Path, label: str) -> None:
    """gpusight --once --json, nvidia-smi --query-gpu, pmon and --query-compute-apps, all started at once."""
    fields = ",".join(h.known_query_fields())
    started = time.time()
    jobs = [
        (subprocess.Popen([sys.executable, *GPUSIGHT, "--once", "--json"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=h.env), d / f"once-{label}.json"),
        (subprocess.Popen(["nvidia-smi", f"--query-gpu=timestamp,{fields}", "--format=csv,nounits"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE), d / f"smi-{label}.csv"),
        (subprocess.Popen(["nvidia-smi", "pmon", "-c", "1", "-s", "um"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE), d / f"pmon-{label}.txt"),
        (subprocess.Popen(["nvidia-smi", "--query-compute-apps=pid,used_memory,process_name", "--format=csv"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE), d / f"apps-{label}.csv"),
    ]
    for job, path in jobs:
        try:
            stdout, stderr = job.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            job.kill()
            stdout, stderr = job.communicate()
        path.write_bytes(stdout + (b"\n# stderr: " + stderr if stderr.strip() else b""))
    stamps = d / "sets.json"
    known = json.loads(stamps.read_text()) if stamps.exists() else {}
    known[label] = {"started": started, "finished": time.time()}
    stamps.write_text(json.dumps(known, indent=1))


def start_streams(h: Harness, d: Path) -> None:
    """nvidia-smi query/pmon/dmon streams (and dcgmi's profiling fields when dcgmi exists) for the whole phase."""
    fields = ",".join(h.known_query_fields())
    h.spawn(["nvidia-smi", f"--query-gpu=timestamp,{fields}", "--format=csv,nounits", "-lms", "500"],
            d / "smi-stream.csv")
    h.spawn(["nvidia-smi", "pmon", "-s", "um", "-o", "T", "-d", "1"], d / "pmon-stream.txt")
    h.spawn(["nvidia-smi", "dmon", "-s", "pucvmet", "-o", "T", "-d", "1"], d / "dmon.txt")
    h.spawn(["nvidia-smi", "dmon", "--gpm-metrics", "1,2,3,5,10,20,21", "-o", "T", "-d", "1"], d / "dmon-gpm.txt")
    if shutil.which("dcgmi"):
        h.spawn(["dcgmi", "dmon", "-e", "1002,1003,1004,1005,1009,1010", "-d", "1000"], d / "dcgmi.txt")


def phase_fields(h: Harness) -> None:
    """fp32 then bf16 training with gpusight and nvidia-smi side by side."""
    d = h.out / "fields"
    d.mkdir(exist_ok=True)
    recorder = h.python([*GPUSIGHT, "--record", str(d / "precision.jsonl.gz"), "--interval", "0.5"], d / "record.log")
    start_streams(h, d)
    tui = h.tui("fields", "--export-dir", str(d / "export"))
    common = ("--slow-ms", "0.5", "--num-workers", "14", "--pin-memory", "--persistent-workers",
              "--prefetch-factor", "4")
    for precision, duration in (("fp32", 45.0), ("bf16", 40.0)):
        log = d / f"train-{precision}.log"
        trainer = h.python(h.trainer_args(*common, "--precision", precision, "--duration", str(h.seconds(duration))), log)
        wait_for_text(log, "training on", 120)
        t0 = time.monotonic()
        if precision == "bf16":
            sleep_until(t0, h.seconds(3))
            cost = h.python([str(SRC / "scripts/realgpu/nvml_cost.py"), str(d / "nvml-cost-loaded.json"), "100"],
                            d / "nvml-cost-loaded.log")
        for k, at in enumerate((18.0, 28.0, 36.0)):
            sleep_until(t0, h.seconds(at))
            take_field_set(h, d, f"{precision}-{k}")
            if precision == "bf16" and k == 0:
                h.nvidia_smi(["-q"], d / "nvidia-smi-q-loaded.txt")
        sleep_until(t0, h.seconds(duration - 2))
        h.screenshot(tui, d / "export", f"fields-{precision}")
        trainer.wait(h.seconds(duration) + 60)
    cost.wait(60)
    h.stop(recorder)
    h.stop_all()


RUNS: dict[str, tuple[tuple[str, ...], ...]] = {
    "run_a": (("--slow-ms", "1", "--num-workers", "1", "--precision", "tf32"),),
    "run_b": (("--slow-ms", "1", "--num-workers", "14", "--pin-memory", "--persistent-workers",
               "--prefetch-factor", "4", "--precision", "bf16"),),
    "run_c": (("--slow-ms", "0.5", "--num-workers", "8", "--pin-memory", "--persistent-workers",
               "--prefetch-factor", "4", "--precision", "bf16"), ("serve",)),
}
"""Each run's jobs: convnet knobs, or ``("serve",)`` for the inference server."""

RUN_SECONDS = 80.0
"""Length of each run."""

CPU_RUNS = frozenset({"run_a", "run_c"})
"""Runs during which gpusight's CPU is also measured at 0.25 s and 1 s, in the TUI and headless."""

COST_RUNS = frozenset({"run_b", "run_c"})
"""Runs during which the NVML cost probe polls (100 polls from 5 s in)."""


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU seconds of ``pid`` so far; None when it is gone."""
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return None
    return times.user + times.system


def phase_run(h: Harness, name: str) -> None:
    """One recorded run with a TUI screenshot, a 20 s JSON summary and (run_c) gpusight's CPU at several intervals."""
    d = h.out / name
    d.mkdir(exist_ok=True)
    recorder = h.python([*GPUSIGHT, "--record", str(d / f"{name}.jsonl.gz"), "--interval", "0.5"], d / "record.log")
    h.spawn(["nvidia-smi", "pmon", "-s", "um", "-o", "T", "-d", "1"], d / "pmon-stream.txt")
    tui = h.tui(name, "--export-dir", str(d / "export"))
    measured: dict[str, int] = {"record@0.5": recorder.pid}
    if tui.pid is not None:
        measured["tui@0.5"] = tui.pid
    if name in CPU_RUNS:
        for interval in ("0.25", "1"):
            extra = h.tui(f"{name}-{interval}", "--interval", interval, "--export-dir", str(d / "export-cpu"))
            if extra.pid is not None:
                measured[f"tui@{interval}"] = extra.pid
            rec = h.python([*GPUSIGHT, "--record", f"/tmp/gpusight-cpu-{interval}.jsonl", "--interval", interval],
                           d / f"record-{interval}.log")
            measured[f"record@{interval}"] = rec.pid
    jobs = []
    for k, job in enumerate(RUNS[name]):
        log = d / f"job{k}.log"
        if job == ("serve",):
            size = ["--image-size", "32", "--width", "8"] if h.small else []
            jobs.append(h.python([*SERVE, "--rate", "400", "--max-batch", "32", *size], log))
        else:
            jobs.append(h.python(h.trainer_args(*job, "--step-log", str(d / f"steps{k}.log")), log))
    wait_for_text(d / "job0.log", "training on", 120)
    t0 = time.monotonic()
    if name in COST_RUNS:
        sleep_until(t0, h.seconds(5))
        h.python([str(SRC / "scripts/realgpu/nvml_cost.py"), str(d / "nvml-cost-loaded.json"), "100"],
                 d / "nvml-cost-loaded.log")
    cpu: dict[str, dict[str, float | None]] = {}
    sleep_until(t0, h.seconds(30))
    start = {label: cpu_seconds(pid) for label, pid in measured.items()}
    began = time.monotonic()
    sleep_until(t0, h.seconds(RUN_SECONDS - 22))
    summary = h.python([*GPUSIGHT, "--json", "--duration", str(h.seconds(20))], d / f"{name}-json.log")
    sleep_until(t0, h.seconds(60))
    elapsed = time.monotonic() - began
    for label, pid in measured.items():
        end = cpu_seconds(pid)
        first = start.get(label)
        cpu[label] = {"window_s": elapsed,
                      "cpu_ms_per_s": None if end is None or first is None else (end - first) / elapsed * 1000}
    (d / "gpusight-cpu.json").write_text(json.dumps(cpu, indent=1))
    sleep_until(t0, h.seconds(RUN_SECONDS - 10))
    h.screenshot(tui, d / "export", name)
    summary.wait(h.seconds(30) + 30)
    for job in jobs:
        h.stop(job)
    h.stop(recorder)
    h.stop_all()
    json_log = (d / f"{name}-json.log").read_text(errors="replace")
    (d / f"{name}.json").write_text(json_log[json_log.find("{"):] if "{" in json_log else json_log)


OBSERVER_PLAN = (None, "0.5", None, "0.25") * 3
"""Observer windows in order: None runs no gpusight, a number runs the TUI at that interval."""

OBSERVER_WINDOW_S = 12.0
"""Length of one observer window; its first 2 s (gpusight starting or quitting) are not counted."""


def step_rate(log: Path, start: float, end: float) -> float | None:
    """Steps per second between monotonic times ``start`` and ``end`` from a ``--step-log`` file."""
    points = [tuple(map(float, line.split())) for line in log.read_text().splitlines() if line.strip()]
    inside = [(t, s) for t, s in points if start <= t <= end]
    if len(inside) < 2:
        return None
    (t1, s1), (t2, s2) = inside[0], inside[-1]
    return (s2 - s1) / (t2 - t1) if t2 > t1 else None


def phase_observer(h: Harness) -> None:
    """One trainer; windows without gpusight and with the TUI at 0.5 s and 0.25 s; medians of the step rate."""
    d = h.out / "observer"
    d.mkdir(exist_ok=True)
    steps = d / "steps.log"
    total = h.seconds(15 + OBSERVER_WINDOW_S * len(OBSERVER_PLAN) + 5)
    trainer = h.python(h.trainer_args("--slow-ms", "0.5", "--num-workers", "14", "--pin-memory", "--persistent-workers",
                                      "--prefetch-factor", "4", "--precision", "bf16", "--duration", str(total),
                                      "--step-log", str(steps)), d / "train.log")
    wait_for_text(d / "train.log", "training on", 120)
    t0 = time.monotonic()
    windows = []
    for k, interval in enumerate(OBSERVER_PLAN):
        begin = t0 + h.seconds(15 + k * OBSERVER_WINDOW_S)
        sleep_until(begin, 0)
        tui = h.tui(f"observer-{k}", "--interval", interval) if interval else None
        sleep_until(begin, h.seconds(OBSERVER_WINDOW_S))
        if tui is not None:
            tui.keys("q")
            time.sleep(0.5)
            tui.close()
            h.terminals.remove(tui)
        windows.append({"gpusight": interval, "start": begin + h.seconds(2), "end": begin + h.seconds(OBSERVER_WINDOW_S)})
    trainer.wait(h.seconds(60) + 60)
    for window in windows:
        window["steps_per_s"] = step_rate(steps, window["start"], window["end"])
    result: dict[str, object] = {"windows": windows}
    for condition in (None, "0.5", "0.25"):
        rates = [w["steps_per_s"] for w in windows if w["gpusight"] == condition and w["steps_per_s"] is not None]
        result[f"median_{condition or 'off'}"] = statistics.median(rates) if rates else None
    (d / "observer.json").write_text(json.dumps(result, indent=1))
    print("observer:", {k: v for k, v in result.items() if k.startswith("median")}, flush=True)
    h.stop_all()


def phase_procutil(h: Harness) -> None:
    """Two processes on the GPU: raw per-process utilization samples beside pmon and a gpusight recording."""
    d = h.out / "procutil"
    d.mkdir(exist_ok=True)
    h.python([*GPUSIGHT, "--record", str(d / "procutil.jsonl.gz"), "--interval", "0.5"], d / "record.log")
    h.spawn(["nvidia-smi", "pmon", "-s", "um", "-o", "T", "-d", "1"], d / "pmon-stream.txt")
    trainer, server = RUNS["run_c"]
    h.python(h.trainer_args(*trainer), d / "job0.log")
    h.python([*SERVE, "--rate", "400", "--max-batch", "32",
              *(["--image-size", "32", "--width", "8"] if h.small else [])], d / "job1.log")
    wait_for_text(d / "job0.log", "training on", 120)
    time.sleep(h.seconds(12))
    subprocess.run([sys.executable, str(SRC / "scripts/realgpu/procutil_probe.py"), str(d / "samples.jsonl"),
                    str(h.seconds(25))], env=h.env, check=False, timeout=120)
    h.stop_all()


def phase_pcie(h: Harness) -> None:
    """PCIe units: byte counters, the throughput call, GPM and dmon under a steady pinned copy."""
    d = h.out / "pcie"
    d.mkdir(exist_ok=True)
    h.spawn(["nvidia-smi", "dmon", "-s", "t", "-o", "T", "-d", "1"], d / "dmon.txt")
    h.spawn(["nvidia-smi", "dmon", "--gpm-metrics", "20,21", "-o", "T", "-d", "1"], d / "dmon-gpm.txt")
    result = subprocess.run([sys.executable, str(SRC / "scripts/realgpu/pcie_units.py"), str(d / "pcie.json")],
                            env=h.env, check=False, timeout=120, capture_output=True, text=True)
    print(result.stdout + result.stderr[-2000:], flush=True)
    h.stop_all()


def phase_pcie_check(h: Harness) -> None:
    """gpusight's PCIe rates under a steady pinned copy each way, beside dmon, with the raw byte counters."""
    d = h.out / "pcie_check"
    d.mkdir(exist_ok=True)
    h.spawn(["nvidia-smi", "dmon", "-s", "t", "-o", "T", "-d", "1"], d / "dmon.txt")
    h.python(["-c", COPY, str(h.seconds(9))], d / "copy.log")
    for direction in ("h2d", "d2h"):
        wait_for_text(d / "copy.log", direction, 60)
        time.sleep(h.seconds(1))
        raw = h.python([str(SRC / "scripts/realgpu/pcie_raw.py"), str(d / f"raw-{direction}.jsonl"), "2"], d / "raw.log")
        summary = subprocess.run([sys.executable, *GPUSIGHT, "--json", "--duration", str(h.seconds(4)), "--interval", "0.5"],
                                 env=h.env, check=False, timeout=60, capture_output=True, text=True)
        (d / f"{direction}.json").write_text(summary.stdout + summary.stderr)
        raw.wait(30)
    h.stop_all()


PHASES: dict[str, Callable[[Harness], None]] = {
    "env": phase_env,
    "fields": phase_fields,
    "run_a": lambda h: phase_run(h, "run_a"),
    "run_b": lambda h: phase_run(h, "run_b"),
    "run_c": lambda h: phase_run(h, "run_c"),
    "observer": phase_observer,
    "procutil": phase_procutil,
    "pcie": phase_pcie,
    "pcie_check": phase_pcie_check,
}
"""Phases by name, run in the order given on the command line."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the phases named on the command line; 1 when any failed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("phases", nargs="+", choices=sorted(PHASES))
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--small", action="store_true")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    harness = Harness(args.out.resolve(), args.scale, args.small)
    os.chdir(harness.out)  # never the repository root: `python -m gpusight` would import the gpusight found there
    failed = []
    for name in args.phases:
        started = time.monotonic()
        print(f"== {name}", flush=True)
        try:
            PHASES[name](harness)
        except Exception:  # noqa: BLE001 - one broken phase must not lose the others
            traceback.print_exc()
            failed.append(name)
        finally:
            harness.stop_all()
        print(f"== {name} done in {time.monotonic() - started:.0f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
