"""gputop performance benchmark against nvitop and nvtop on the same fake NVML; writes benchmarks/RESULTS.md.

Usage (from the repository root)::

    python benchmarks/run.py            # full run, about 10 minutes on 2 cores
    python benchmarks/run.py --no-peers --measure 2 --warmup 1 --day-hours 0.1 --output /tmp/r.md

See benchmarks/README.md for what is measured and how.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from memory_day import DAY_SAMPLES
from peers import Peer, get_nvitop, get_nvtop
from ptyrun import PtyResult, run_in_pty
from report import Measurements, RunRecord, write_report
from scenario import LAST_GPU_UTILIZATION_TEXT, REPO, bench_machine
from startup import import_s, median, once_wall_s

MARKER = LAST_GPU_UTILIZATION_TEXT.encode()
"""Text only sampled data puts on screen (the last GPU's utilization); its first burst is the first full frame."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description="Benchmark gputop against nvitop and nvtop on a fake 8-GPU machine.")
    parser.add_argument("--interval", type=float, default=0.25, help="refresh interval for every tool (default 0.25 s)")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds after start before measuring (default 3)")
    parser.add_argument("--measure", type=float, default=12.0, help="seconds measured per run (default 12)")
    parser.add_argument("--sizes", default="160x45,80x24", help="terminal sizes, COLSxROWS, comma separated")
    parser.add_argument("--no-peers", action="store_true", help="run gputop only (no nvitop/nvtop)")
    parser.add_argument("--runs", type=int, default=5, help="repetitions of the --once and import timings (default 5)")
    parser.add_argument("--day-hours", type=float, default=24.0,
                        help="simulated hours of 4 Hz samples for the memory test (default 24)")
    parser.add_argument("--output", type=Path, default=REPO / "benchmarks" / "RESULTS.md", help="report path")
    parser.add_argument("--json", type=Path, help="also write the raw measurements as JSON here")
    parser.add_argument("--from-json", type=Path, metavar="FILE",
                        help="measure nothing: rewrite the report from raw measurements saved with --json")
    return parser.parse_args(argv)


def sizes(text: str) -> list[tuple[int, int]]:
    """``"160x45,80x24"`` as [(160, 45), (80, 24)]."""
    out = []
    for part in text.split(","):
        columns, rows = part.lower().split("x")
        out.append((int(columns), int(rows)))
    return out


UNSET = ("COLORTERM", "NO_COLOR", "TEXTUAL", "GPUTOP_STATS_FILE", "PYTHONDONTWRITEBYTECODE")
"""Variables no tool may inherit from the shell that runs the benchmark."""


def base_env(workdir: Path) -> dict[str, str]:
    """The terminal environment every tool gets: xterm-256color, UTF-8, no truecolor, private config dirs.

    Byte code may be written (``PYTHONDONTWRITEBYTECODE`` is dropped) and :func:`precompile` compiles
    gputop first, so it starts as it does after ``pip install``, which compiles the package.
    """
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env.update(TERM="xterm-256color", LANG="C.UTF-8", LC_ALL="C.UTF-8", XDG_CONFIG_HOME=str(workdir / "config"))
    return env


def precompile(env: dict[str, str]) -> None:
    """Compile gputop's modules (into their ``__pycache__`` folders, which git ignores)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "gputop")], env=env, check=True,
                   capture_output=True)


def run_gputop(env: dict[str, str], args: argparse.Namespace, size: tuple[int, int], workdir: Path) -> RunRecord:
    """One gputop run in a pty, with its statistics file."""
    stats_path = workdir / f"gputop-stats-{size[0]}x{size[1]}.json"
    stats_path.unlink(missing_ok=True)
    run_env = dict(env, GPUTOP_STATS_FILE=str(stats_path))
    argv = [sys.executable, "-m", "gputop", "--interval", f"{args.interval:g}"]
    result = run_in_pty(argv, run_env, size[0], size[1], args.warmup, args.measure, MARKER)
    stats = json.loads(stats_path.read_text()) if stats_path.exists() else None
    return RunRecord("gputop", size, args.interval, result, stats)


def run_peer(peer: Peer, env: dict[str, str], args: argparse.Namespace, size: tuple[int, int]) -> RunRecord:
    """One peer run in a pty."""
    assert peer.argv is not None and peer.interval_s is not None
    result: PtyResult = run_in_pty(peer.argv, env, size[0], size[1], args.warmup, args.measure, MARKER)
    return RunRecord(peer.name, size, peer.interval_s, result, None)


def gputop_version(env: dict[str, str]) -> str:
    """``gputop --version`` output."""
    result = subprocess.run([sys.executable, "-m", "gputop", "--version"], env=env, capture_output=True, text=True,
                            check=False)
    return result.stdout.strip() or "unknown"


def main(argv: list[str] | None = None) -> int:
    """Run every measurement and write the report; returns the exit status."""
    args = parse_args(argv)
    if args.from_json is not None:
        print(write_report(args.output, Measurements.from_dict(json.loads(args.from_json.read_text()))))
        return 0
    wanted = sizes(args.sizes)
    peers = [] if args.no_peers else [get_nvitop(args.interval), get_nvtop(args.interval)]
    for peer in peers:
        if peer.argv is None:
            print(f"benchmark: skipping {peer.name}: {peer.reason}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="gputop-bench-") as tmp:
        workdir = Path(tmp)
        with bench_machine(workdir) as machine:
            env = machine.env(base_env(workdir))
            precompile(env)
            records = []
            for size in wanted:
                print(f"benchmark: gputop at {size[0]}x{size[1]}", file=sys.stderr)
                records.append(run_gputop(env, args, size, workdir))
                for peer in peers:
                    if peer.argv is not None:
                        print(f"benchmark: {peer.name} at {size[0]}x{size[1]}", file=sys.stderr)
                        records.append(run_peer(peer, env, args, size))
            print("benchmark: gputop --once and import times", file=sys.stderr)
            once = once_wall_s(env, args.runs)
            imports = {module: median(import_s(module, env, args.runs))
                       for module in ("gputop", "gputop.cli", "gputop.ui.app")}
            samples = max(1, int(args.day_hours * DAY_SAMPLES / 24))
            print(f"benchmark: simulated {args.day_hours:g} h ({samples} samples) through history and advice",
                  file=sys.stderr)
            day = subprocess.run([sys.executable, str(REPO / "benchmarks" / "memory_day.py"), "--samples",
                                  str(samples)], env=env, capture_output=True, text=True, check=False)
            if day.returncode != 0:
                raise RuntimeError(f"memory_day.py failed: {day.stderr.strip()[-800:]}")
            measurements = Measurements(
                date=datetime.now(timezone.utc),
                gputop_version=gputop_version(env),
                peers=peers,
                records=records,
                once_s=once,
                import_s=imports,
                day=json.loads(day.stdout.strip().splitlines()[-1]),
                interval_s=args.interval,
                warmup_s=args.warmup,
                measure_s=args.measure,
            )
    text = write_report(args.output, measurements)
    if args.json is not None:
        args.json.write_text(json.dumps(measurements.as_dict(), indent=2) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
