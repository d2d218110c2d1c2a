"""gpusight performance benchmark against nvitop and nvtop on the same fake NVML, on moving data; writes RESULTS.md.

Usage (from the repository root)::

    python benchmarks/run.py            # full run, about 8-10 minutes on 2 cores
    python benchmarks/run.py --no-peers --measure 2 --warmup 1 --day-hours 0.1 --record-seconds 3 --output /tmp/r.md
    python benchmarks/run.py --from-json raw.json --readme-table   # the README's table from saved numbers

See benchmarks/README.md for what is measured and how.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench_env import base_env, gpusight_env, precompile
from memory_day import DAY_SAMPLES
from mover import BenchMachine, bench_machine
from peers import Peer, get_nvitop, get_nvtop
from ptyrun import run_in_pty
from report import Measurements, RunRecord, readme_section, write_report
from scenario import REPO
from startup import import_s, median, once_wall_s
from waves import FIRST_FRAME_MARKER

GPUSIGHT_DEFAULT_INTERVAL_S = 0.5
"""gpusight's polling period without ``--interval`` (gpusight/sampling/sampler.py)."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description="Benchmark gpusight against nvitop and nvtop on a fake 8-GPU machine.")
    parser.add_argument("--interval", type=float, default=0.25,
                        help="the fast interval every tool also runs at, besides its default (default 0.25 s)")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds after start before measuring (default 3)")
    parser.add_argument("--measure", type=float, default=15.0, help="seconds measured per run (default 15)")
    parser.add_argument("--sizes", default="160x45,80x24", help="terminal sizes, COLSxROWS, comma separated")
    parser.add_argument("--no-peers", action="store_true", help="run gpusight only (no nvitop/nvtop)")
    parser.add_argument("--runs", type=int, default=5, help="repetitions of the --once and import timings (default 5)")
    parser.add_argument("--day-hours", type=float, default=24.0,
                        help="simulated hours of 4 Hz samples for the memory test (default 24)")
    parser.add_argument("--record-seconds", type=float, default=60.0,
                        help="length of the recording the replay rows play (default 60)")
    parser.add_argument("--output", type=Path, default=REPO / "benchmarks" / "RESULTS.md", help="report path")
    parser.add_argument("--json", type=Path, help="also write the raw measurements as JSON here")
    parser.add_argument("--from-json", type=Path, metavar="FILE",
                        help="measure nothing: rewrite the report from raw measurements saved with --json")
    parser.add_argument("--readme-table", action="store_true",
                        help="print only the README's benchmark section (command and headline table)")
    return parser.parse_args(argv)


def sizes(text: str) -> list[tuple[int, int]]:
    """``"160x45,80x24"`` as [(160, 45), (80, 24)]."""
    out = []
    for part in text.split(","):
        columns, rows = part.lower().split("x")
        out.append((int(columns), int(rows)))
    return out


def gpusight_version(env: dict[str, str]) -> str:
    """``gpusight --version --verbose`` output on one line (``gpusight 0.1.0; partial output: active``)."""
    result = subprocess.run([sys.executable, "-m", "gpusight", "--version", "--verbose"], env=env, capture_output=True,
                            text=True, check=False)
    return "; ".join(result.stdout.split("\n")).strip("; ") or "unknown"


def measure(tool: Peer, data: str, interval_s: float | None, size: tuple[int, int], env: dict[str, str],
            args: argparse.Namespace, machine: BenchMachine, workdir: Path, extra: tuple[str, ...] = ()) -> RunRecord:
    """One run of ``tool`` in a pty on ``data`` (the mover restarted first); gpusight also writes its statistics."""
    argv, interval = tool.command(interval_s)
    run_env = env
    stats_path = workdir / "gpusight-stats.json"
    if tool.name == "gpusight":
        stats_path.unlink(missing_ok=True)
        run_env = dict(env, GPUSIGHT_STATS_FILE=str(stats_path))
    pace = "the recording's pace" if extra else f"{'default interval ' if interval_s is None else ''}{interval:g} s"
    print(f"benchmark: {' '.join((tool.name, *extra))} on {data} data at {size[0]}x{size[1]}, {pace}", file=sys.stderr)
    machine.mover.restart(moving=data != "constant")
    result = run_in_pty([*argv, *extra], run_env, size[0], size[1], args.warmup, args.measure, FIRST_FRAME_MARKER)
    mover = machine.mover.stats()
    stats = json.loads(stats_path.read_text()) if tool.name == "gpusight" and stats_path.exists() else None
    if stats is not None:
        interval = stats["interval_s"]
    return RunRecord(tool.name, data, size, interval, interval_s is None, result, stats,
                     {"writes": mover.writes, "churned": mover.churned})


def record(machine: BenchMachine, env: dict[str, str], path: Path, seconds: float, interval_s: float) -> dict[str, Any]:
    """Record the moving scenario with ``gpusight --record`` (no terminal) for ``seconds``; a summary of the file."""
    print(f"benchmark: recording {seconds:g} s of the moving scenario with gpusight --record", file=sys.stderr)
    machine.mover.restart(moving=True)
    proc = subprocess.Popen([sys.executable, "-m", "gpusight", "--record", str(path), "--interval", f"{interval_s:g}"],
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(seconds)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    if proc.returncode != 0 or not path.exists():
        raise RuntimeError(f"gpusight --record failed ({proc.returncode}): {err.decode(errors='replace')[-800:]}")
    return summarize_recording(path, seconds, interval_s)


def summarize_recording(path: Path, seconds: float, interval_s: float) -> dict[str, Any]:
    """Snapshots, distinct utilization values of GPU 0 and distinct process ids in a recording."""
    utilization: set[object] = set()
    pids: set[int] = set()
    snapshots = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        snapshot = json.loads(line)
        snapshots += 1
        devices = snapshot["devices"]
        if devices:
            utilization.add(devices[0]["utilization_gpu_percent"])
        pids.update(process["pid"] for process in snapshot["processes"])
    return {"seconds": seconds, "interval_s": interval_s, "bytes": path.stat().st_size, "snapshots": snapshots,
            "distinct_gpu0_util": len(utilization), "distinct_pids": len(pids)}


def memory_day(env: dict[str, str], hours: float) -> subprocess.Popen[str]:
    """Start memory_day.py for ``hours`` simulated hours (it runs beside the recording, which is not timed)."""
    samples = max(1, int(hours * DAY_SAMPLES / 24))
    print(f"benchmark: simulating {hours:g} h ({samples} samples) through history and advice", file=sys.stderr)
    return subprocess.Popen([sys.executable, str(REPO / "benchmarks" / "memory_day.py"), "--samples", str(samples)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish_memory_day(proc: subprocess.Popen[str]) -> dict[str, Any]:
    """memory_day.py's result line."""
    out, err = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"memory_day.py failed: {err.strip()[-800:]}")
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def measure_all(args: argparse.Namespace, peers: list[Peer], workdir: Path) -> Measurements:
    """Every measurement, on one benchmark machine."""
    wanted = sizes(args.sizes)
    with bench_machine(workdir) as machine:
        env = machine.env(base_env(workdir))
        ours = gpusight_env(env)
        precompile(ours)
        gpusight = Peer("gpusight", (sys.executable, "-m", "gpusight"), gpusight_version(ours), GPUSIGHT_DEFAULT_INTERVAL_S)
        tools = [gpusight, *(peer for peer in peers if peer.argv is not None)]
        day_proc = memory_day(ours, args.day_hours)
        recording_path = workdir / "recording.jsonl"
        recording = record(machine, ours, recording_path, args.record_seconds, args.interval)
        day = finish_memory_day(day_proc)
        records = []
        for size in wanted:
            for interval in (args.interval, None):
                for tool in tools:
                    records.append(measure(tool, "moving", interval, size, ours if tool is gpusight else env,
                                           args, machine, workdir))
        replay = ("--replay", str(recording_path), "--loop")
        for size in wanted:
            records.append(measure(gpusight, "replay", None, size, ours, args, machine, workdir, replay))
        for tool in tools:
            records.append(measure(tool, "constant", args.interval, wanted[0], ours if tool is gpusight else env,
                                   args, machine, workdir))
        print("benchmark: gpusight --once and import times", file=sys.stderr)
        machine.mover.restart(moving=True)
        once = once_wall_s(ours, args.runs)
        imports = {module: median(import_s(module, ours, args.runs))
                   for module in ("gpusight", "gpusight.cli", "gpusight.ui.main.app")}
    return Measurements(
        date=datetime.now(timezone.utc),
        gpusight_version=gpusight.version or "unknown",
        peers=peers,
        records=records,
        once_s=once,
        import_s=imports,
        day=day,
        recording=recording,
        interval_s=args.interval,
        warmup_s=args.warmup,
        measure_s=args.measure,
    )


def main(argv: list[str] | None = None) -> int:
    """Run every measurement and write the report; returns the exit status."""
    args = parse_args(argv)
    if args.from_json is not None:
        measurements = Measurements.from_dict(json.loads(args.from_json.read_text()))
        print(readme_section(measurements) if args.readme_table else write_report(args.output, measurements))
        return 0
    started = time.monotonic()
    peers = [] if args.no_peers else [get_nvitop(), get_nvtop()]
    for peer in peers:
        if peer.argv is None:
            print(f"benchmark: skipping {peer.name}: {peer.reason}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="gpusight-bench-") as tmp:
        measurements = measure_all(args, peers, Path(tmp))
    text = write_report(args.output, measurements)
    if args.json is not None:
        args.json.write_text(json.dumps(measurements.as_dict(), indent=2) + "\n")
    print(readme_section(measurements) if args.readme_table else text)
    print(f"benchmark: done in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
