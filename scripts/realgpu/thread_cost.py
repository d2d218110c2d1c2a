"""Per-thread CPU of gpusight on a real GPU (diagnostic): where the cost of watching goes, thread by thread.

Usage: ``python scripts/realgpu/thread_cost.py OUT_DIR`` beside a running job. Runs the TUI in a pty at 160x45 at the
defaults and at ``--interval 0.25``, and a headless ``--record`` at 0.5 s, 15 s each after a 3 s warm-up, and
names each thread through a ``sitecustomize`` that writes every started thread's native id and name to a file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
from support.terminal import PtyTerminal  # noqa: E402

SITE = '''
import os, threading
_start = threading.Thread.start
def _named_start(self, *a, **k):
    _start(self, *a, **k)
    with open(os.environ["THREAD_NAMES"], "a") as f:
        f.write(f"{self.native_id} {self.name}\\n")
threading.Thread.start = _named_start
'''


def cpu_by_thread(pid: int) -> dict[int, float]:
    """CPU seconds of each thread of ``pid``."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
            out[int(tid)] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            pass
    return out


def measure(argv: list[str], env: dict[str, str], names: Path, pty: bool) -> dict[str, float]:
    """ms/s of CPU per named thread over 15 s after 3 s."""
    names.write_text(f"{os.getpid()} -\n")
    if pty:
        term = PtyTerminal(argv, (160, 45), env=env, controlling=True)
        pid = term.proc.pid
    else:
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        pid = proc.pid
    time.sleep(3)
    before, t0 = cpu_by_thread(pid), time.monotonic()
    time.sleep(15)
    after, elapsed = cpu_by_thread(pid), time.monotonic() - t0
    if pty:
        term.quit()
        term.cleanup()
    else:
        proc.terminate()
        proc.wait(10)
    named = {int(line.split()[0]): line.split(maxsplit=1)[1].strip() for line in names.read_text().splitlines()}
    named[pid] = "MainThread"
    costs: dict[str, float] = {}
    for tid, seconds in after.items():
        name = named.get(tid, f"thread {tid}")
        costs[name] = costs.get(name, 0.0) + round((seconds - before.get(tid, 0.0)) / elapsed * 1000, 1)
    costs["total"] = round(sum(v for k, v in costs.items() if k != "total"), 1)
    return costs


def main() -> int:
    """Measure three runs and write thread_cost.json."""
    out = Path(sys.argv[1])
    site = Path(tempfile.mkdtemp())
    (site / "sitecustomize.py").write_text(SITE)
    names = site / "names.txt"
    env = {**os.environ, "TERM": "xterm-256color", "LANG": "C.UTF-8", "THREAD_NAMES": str(names),
           "PYTHONPATH": f"{site}:{os.environ.get('PYTHONPATH', '')}"}
    base = [sys.executable, "-m", "gpusight"]
    runs = {"TUI defaults (0.5 s, screen 1 s)": (base, True), "TUI --interval 0.25": ([*base, "--interval", "0.25"], True),
            "headless --record at 0.5 s": ([*base, "--record", str(site / "r.gtr")], False)}
    results = {label: measure(argv, env, names, pty) for label, (argv, pty) in runs.items()}
    (out / "thread_cost.json").write_text(json.dumps(results, indent=1))
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
