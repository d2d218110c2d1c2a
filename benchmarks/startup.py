"""Start-up costs: wall time of one-shot ``gpusight --once``, the import time of the package and its UI, and
(run as a script) the first frame of the live monitor of several checkouts side by side.

Usage (from the repository root)::

    python benchmarks/startup.py --runs 6 /path/to/a/worktree/of/main .
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_env import base_env, precompile
from mover import BenchMachine, bench_machine
from ptyrun import run_in_pty
from waves import FIRST_FRAME_MARKER

IMPORT_PROBE = (
    "import sys, time\n"
    "started = time.perf_counter()\n"
    "__import__(sys.argv[1])\n"
    "print(time.perf_counter() - started)\n"
)
"""Child program that prints how long importing the module named by its argument took."""


def once_wall_s(env: dict[str, str], runs: int) -> list[float]:
    """Wall seconds of ``gpusight --once`` (stdout a pipe), one per run; raises if it fails."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        result = subprocess.run([sys.executable, "-m", "gpusight", "--once"], env=env, capture_output=True,
                                text=True, timeout=60, check=False)
        times.append(time.perf_counter() - started)
        if result.returncode != 0 or "H100" not in result.stdout:
            raise RuntimeError(f"gpusight --once failed ({result.returncode}): {result.stderr.strip()[-500:]}")
    return times


def import_s(module: str, env: dict[str, str], runs: int) -> list[float]:
    """Seconds to import ``module`` in a fresh interpreter, one per run."""
    times = []
    for _ in range(runs):
        result = subprocess.run([sys.executable, "-c", IMPORT_PROBE, module], env=env, capture_output=True,
                                text=True, timeout=60, check=True)
        times.append(float(result.stdout.strip()))
    return times


def median(values: list[float]) -> float:
    """Median of ``values``."""
    return statistics.median(values)


def first_frame_s(checkout: Path, machine: BenchMachine, env: dict[str, str], size: tuple[int, int],
                  interval: float | None, workdir: Path) -> tuple[float | None, float | None]:
    """One live run of ``checkout``'s gpusight in a pty on the moving machine: the first frame seen on the pty and
    the one the app reports (``first_frame_s`` of GPUSIGHT_STATS_FILE), both from the spawn."""
    stats = workdir / "startup-stats.json"
    stats.unlink(missing_ok=True)
    run_env = dict(env, PYTHONPATH=str(checkout), GPUSIGHT_STATS_FILE=str(stats))
    extra = [] if interval is None else ["--interval", f"{interval:g}"]
    machine.mover.restart(moving=True)
    result = run_in_pty([sys.executable, "-m", "gpusight", *extra], run_env, size[0], size[1], 0.0,
                        FIRST_FRAME_WATCH_S, FIRST_FRAME_MARKER)
    in_app = json.loads(stats.read_text()).get("first_frame_s") if stats.exists() else None
    return result.first_frame_s, in_app


FIRST_FRAME_WATCH_S = 4.0
"""How long each live run lasts: long enough for the first frame on a busy machine."""


def compare(checkouts: list[Path], runs: int, points: list[tuple[tuple[int, int], float | None]]) -> None:
    """Print the median first frames (pty and in-app) of each checkout at each point, the checkouts alternated."""

    with tempfile.TemporaryDirectory() as tmp, bench_machine(Path(tmp)) as machine:
        env = machine.env(base_env(Path(tmp)))
        for checkout in checkouts:
            precompile(env, checkout)
        for size, interval in points:
            seen: dict[Path, list[tuple[float | None, float | None]]] = {c: [] for c in checkouts}
            for _ in range(runs):
                for checkout in checkouts:
                    seen[checkout].append(first_frame_s(checkout, machine, env, size, interval, Path(tmp)))
            for checkout, values in seen.items():
                pty = [p for p, _ in values if p is not None]
                app = [a for _, a in values if a is not None]
                print(f"{checkout} {size[0]}x{size[1]} {'default' if interval is None else f'{interval:g} s'}: "
                      f"first frame {_median_text(pty)} s on the pty, {_median_text(app)} s in the app "
                      f"(medians of {len(pty)} and {len(app)} of {runs} runs)")


def _median_text(values: list[float]) -> str:
    return f"{median(values):.3f}" if values else "n/a"


def main(argv: list[str] | None = None) -> None:
    """``python benchmarks/startup.py [--runs N] CHECKOUT...``: first frames of each checkout, alternated."""
    parser = argparse.ArgumentParser(description="First frame of gpusight checkouts on the moving benchmark machine.")
    parser.add_argument("checkouts", nargs="+", type=Path, help="repository roots (e.g. a worktree of main and this)")
    parser.add_argument("--runs", type=int, default=5, help="runs per checkout and point (default 5)")
    args = parser.parse_args(argv)
    points = [((160, 45), None), ((160, 45), 0.25), ((80, 24), None), ((80, 24), 0.25)]
    compare([c.resolve() for c in args.checkouts], args.runs, points)


if __name__ == "__main__":
    main()
