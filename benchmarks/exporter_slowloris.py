"""``gpusight --serve --demo`` under a slowloris attack: threads, scrape times and trickling connections, per tree.

For each source tree given (``--tree LABEL=PATH``, default this one), it starts ``python -m gpusight --serve`` from
that tree, scrapes it quietly (the median scrape time at rest), then opens ``--idle`` connections that send nothing
and ``--trickling`` ones that send a header byte a second for ``--attack`` seconds, scraping every 0.5 s meanwhile.
It notes the peak thread count (``/proc/PID/status``), how many trickling connections the server closed and when, then
closes every client and reads the thread count 1, 5 and 15 s later. Last, ``--concurrent`` scrapes at once must all be
answered. Prints a Markdown report; ``--results FILE`` writes it to FILE::

    git worktree add --detach /tmp/gpusight-main main
    python benchmarks/exporter_slowloris.py --tree before=/tmp/gpusight-main --tree after=. \\
        --results benchmarks/RESULTS-exporter.md
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from support.exporter import read_announcement, terminate  # noqa: E402
from support.slowloris import thread_count, trickle  # noqa: E402


@dataclass
class Result:
    """What one tree did under attack."""

    label: str
    """The tree's name in the report."""
    baseline_threads: int = 0
    """Threads after the first scrapes, before the attack."""
    peak_threads: int = 0
    """Most threads seen during the attack."""
    rest_ms: float = 0.0
    """Median scrape time with no attack."""
    attack_ms: list[float] = field(default_factory=list)
    """Scrape times during the attack."""
    failed_scrapes: int = 0
    """Scrapes during the attack that got no 200."""
    trickling_closed: list[float] = field(default_factory=list)
    """Seconds after connecting at which the server closed each trickling connection."""
    after_threads: dict[float, int] = field(default_factory=dict)
    """Seconds after the clients closed -> threads."""
    concurrent_answered: int = 0
    """Of the concurrent scrapes, how many got a 200."""


def _scrape_ms(url: str) -> float | None:
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(url + "/metrics", timeout=30) as answer:
            answer.read()
            ok = answer.status == 200
    except OSError:
        ok = False
    return (time.perf_counter() - start) * 1000 if ok else None


def run(label: str, tree: Path, args: argparse.Namespace) -> Result:
    """Attack a ``gpusight --serve --demo`` started from ``tree``."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    proc = subprocess.Popen([sys.executable, "-m", "gpusight", "--serve", "127.0.0.1:0", "--demo"], cwd=tree, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    result = Result(label)
    try:
        url = read_announcement(proc)
        host, port = url[len("http://"):].rsplit(":", 1)
        rest = [ms for ms in (_scrape_ms(url) for _ in range(20)) if ms is not None]
        result.rest_ms = statistics.median(rest)
        result.baseline_threads = thread_count(proc.pid)
        idle = [socket.create_connection((host, int(port))) for _ in range(args.idle)]
        trickling = [socket.create_connection((host, int(port))) for _ in range(args.trickling)]
        trickler = threading.Thread(target=lambda: result.trickling_closed.extend(
            trickle(trickling, args.attack, lambda elapsed: None)[1]))
        trickler.start()
        while trickler.is_alive():
            result.peak_threads = max(result.peak_threads, thread_count(proc.pid))
            ms = _scrape_ms(url)
            if ms is None:
                result.failed_scrapes += 1
            else:
                result.attack_ms.append(ms)
            time.sleep(0.5)
        for sock in idle + trickling:
            sock.close()
        closed_at = time.monotonic()
        for after in (1.0, 5.0, 15.0):
            time.sleep(max(0.0, closed_at + after - time.monotonic()))
            result.after_threads[after] = thread_count(proc.pid)
        result.concurrent_answered = _concurrent(url, args.concurrent)
    finally:
        terminate(proc)
    return result


def _concurrent(url: str, count: int) -> int:
    answered: list[bool] = []
    barrier = threading.Barrier(count)

    def one() -> None:
        barrier.wait()
        answered.append(_scrape_ms(url) is not None)

    workers = [threading.Thread(target=one) for _ in range(count)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return sum(answered)


def report(results: list[Result], args: argparse.Namespace) -> str:
    """The Markdown section."""
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "## Slowloris: threads and scrapes under idle and trickling connections", "",
        f"Written by `python benchmarks/exporter_slowloris.py --idle {args.idle} --trickling {args.trickling} "
        f"--attack {args.attack:g} --concurrent {args.concurrent}` on {when} ({platform.machine()}, "
        f"{os.cpu_count()} logical CPUs, load average {os.getloadavg()[0]:.2f} at the end). `gpusight --serve --demo`; "
        f"{args.idle} connections send nothing, {args.trickling} send a header byte a second for {args.attack:g} s; "
        "a scrape every 0.5 s meanwhile. Threads from `/proc/PID/status`.", "",
        "| tree | threads at rest | peak | 1 s after the clients close | 5 s | 15 s | trickling closed by the server "
        "(latest, s) | scrape ms at rest (median) | under attack (median / max) | failed scrapes | "
        f"{args.concurrent} concurrent scrapes answered |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        latest = f"{max(r.trickling_closed):.1f}" if r.trickling_closed else "-"
        attack = (f"{statistics.median(r.attack_ms):.1f} / {max(r.attack_ms):.1f}" if r.attack_ms else "-")
        lines.append(f"| {r.label} | {r.baseline_threads} | {r.peak_threads} | {r.after_threads[1.0]} | "
                     f"{r.after_threads[5.0]} | {r.after_threads[15.0]} | {len(r.trickling_closed)} of "
                     f"{args.trickling} ({latest}) | {r.rest_ms:.1f} | {attack} | {r.failed_scrapes} | "
                     f"{r.concurrent_answered} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run the attack on each tree and print (and optionally write) the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", metavar="LABEL=PATH",
                        help="a source tree to run gpusight from (repeatable; default: this one)")
    parser.add_argument("--idle", type=int, default=300, help="connections that send nothing (default 300)")
    parser.add_argument("--trickling", type=int, default=300, help="connections trickling a byte a second (300)")
    parser.add_argument("--attack", type=float, default=20.0, help="seconds the trickling lasts (default 20)")
    parser.add_argument("--concurrent", type=int, default=500, help="concurrent scrapes at the end (default 500)")
    parser.add_argument("--results", type=Path, help="also write the report to this Markdown file")
    args = parser.parse_args(argv)
    trees = [tuple(t.split("=", 1)) for t in args.tree or [f"this tree={REPO}"]]
    results = [run(label, Path(path).resolve(), args) for label, path in trees]
    text = report(results, args)
    print(text)
    if args.results is not None:
        args.results.write_text("# gpusight --serve under attack\n\n" + text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
