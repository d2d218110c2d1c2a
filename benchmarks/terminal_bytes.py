"""Terminal bytes and CPU of the monitor for two checkouts on the same data: a replay of the moving scenario.

Live moving data differs from run to run (processes come and go at other moments, the advice re-wraps at other
times), so two runs of the live monitor cannot be compared byte for byte. This records the moving benchmark
machine (mover.py) once with ``gpusight --record``, then replays that recording in a pty (tests/support/terminal.py)
with each checkout in turn, alternating, and prints bytes/s and CPU ms/s measured after a warm-up. A checkout runs
from its own directory (``python -m gpusight`` with it as the working directory and on ``PYTHONPATH``).

    nice -n 19 python benchmarks/terminal_bytes.py --before /path/to/main --after . --size 160x45 --rounds 2
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from bench_env import base_env  # noqa: E402
from mover import bench_machine  # noqa: E402

from support.terminal import PtyTerminal  # noqa: E402


def record(path: Path, seconds: float, workdir: Path) -> None:
    """Record ``seconds`` of the moving scenario with this checkout's ``gpusight --record``."""
    with bench_machine(workdir) as machine:
        env = dict(machine.env(base_env(workdir)), PYTHONPATH=str(REPO))
        proc = subprocess.Popen([sys.executable, "-m", "gpusight", "--record", str(path)], env=env, cwd=REPO,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(seconds)
        proc.terminate()
        proc.wait()


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of process ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def replay(checkout: Path, recording: Path, size: tuple[int, int], warmup: float, measure: float,
           workdir: Path) -> tuple[float, float]:
    """KiB/s written and CPU ms/s of ``checkout``'s monitor replaying ``recording`` at ``size``."""
    env = dict(base_env(workdir), PYTHONPATH=str(checkout))
    term = PtyTerminal([sys.executable, "-m", "gpusight", "--replay", str(recording)], size, env=env,
                       controlling=True, cwd=checkout, keep_output=False)
    try:
        time.sleep(warmup)
        cpu0, bytes0, start = cpu_seconds(term.proc.pid), term.received, time.monotonic()
        time.sleep(measure)
        cpu1, bytes1, elapsed = cpu_seconds(term.proc.pid), term.received, time.monotonic() - start
    finally:
        term.quit()
        term.cleanup()
    return (bytes1 - bytes0) / elapsed / 1024, (cpu1 - cpu0) / elapsed * 1000


def main() -> None:
    """Record once, replay with each checkout, print one line per run."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="checkout of the old code")
    parser.add_argument("--after", type=Path, default=REPO, help="checkout of the new code (default: this one)")
    parser.add_argument("--size", default="160x45", help="terminal size, COLSxROWS (default 160x45)")
    parser.add_argument("--record-seconds", type=float, default=80.0)
    parser.add_argument("--warmup", type=float, default=4.0)
    parser.add_argument("--measure", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    columns, rows = (int(part) for part in args.size.split("x"))
    workdir = Path(tempfile.mkdtemp())
    recording = workdir / "moving.gsr"
    record(recording, args.record_seconds, workdir)
    for _ in range(args.rounds):
        for name, checkout in (("before", args.before.resolve()), ("after", args.after.resolve())):
            kib, cpu = replay(checkout, recording, (columns, rows), args.warmup, args.measure, workdir)
            print(f"{name:6s} {args.size}: {kib:.3f} KiB/s  {cpu:.1f} ms/s", flush=True)


if __name__ == "__main__":
    main()
