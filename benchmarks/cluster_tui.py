"""How responsive the cluster view (``gpusight --cluster``) is with a 100-node, 800-GPU fleet, in a real pty.

Two sources of frames:

- ``sim`` (always): the cluster view's app in a pty, its ``poll`` handing out moving 100-node frames built
  in code (``tests/support/cluster_frames.fleet``): the UI's own cost, with no server in the way.
- ``--fleet-sim`` (or ``--url URL``): ``python -m gpusight --cluster URL`` itself against the fleet simulator's
  Prometheus (``benchmarks/fleet_sim.py``, 100 nodes of which 20 serve dcgm-exporter's series only, run in a
  process of its own) or any server: the UI with real queries.

Measured after a warm-up, at 160x45 and 80x24:

- key to screen: for each key, the time from writing it to the pty until the first output byte and until
  the marker its screen draws (Enter: the host screen's ``History``; Esc: the fleet status line;
  ``?``: the help screen's title; ``p``: ``PAUSED``); medians and maxima over the rounds;
- poll to screen: from each poll's return to the refresh that showed it (the app's own figure, written to
  ``GPUSIGHT_STATS_FILE`` on exit);
- CPU milliseconds per second of the process and terminal bytes per second while it polls.

Usage: ``python benchmarks/cluster_tui.py [--fleet-sim | --url URL] [--rounds 10] [--write-results]``.
It is not a test and gates nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from support.terminal import PtyTerminal, gpusight_argv  # noqa: E402

KEYS = (
    ("Enter", b"\r", b"History (range"),
    ("Esc", b"\x1b", b"last poll"),
    ("?", b"?", b"gpusight keys"),
    ("Esc", b"\x1b", b"last poll"),
    ("p", b"p", b"PAUSED"),
    ("p", b"p", None),
)
"""(name, bytes typed, marker the resulting screen draws, or None to time only the first byte)."""

MARKER_TIMEOUT_S = 10.0
"""Longest wait for a key's marker before the key counts as lost."""

RESULTS_BEGIN = "<!-- cluster-tui: begin (benchmarks/cluster_tui.py --write-results) -->"
RESULTS_END = "<!-- cluster-tui: end -->"


@dataclass
class Run:
    """What one pty run measured."""

    source: str
    size: tuple[int, int]
    first_byte: dict[str, list[float]]
    marker: dict[str, list[float]]
    poll_to_screen: list[float]
    cpu_ms_per_s: float
    bytes_per_s: float
    polls: int


def inner_sim(nodes: int, interval: float) -> int:
    """Run the cluster view over moving frames built in code (the ``sim`` source), in this terminal."""
    from gpusight.ui.cluster.app import STATS_FILE_ENV, ClusterApp
    from support.cluster_frames import URL, fleet

    steps = iter(range(1_000_000))

    def poll(focus_host: str | None) -> object:
        return fleet(nodes=nodes, step=next(steps))

    app = ClusterApp(poll, URL, interval=interval)  # type: ignore[arg-type]
    app.run()
    path = os.environ.get(STATS_FILE_ENV)
    if path:
        Path(path).write_text(json.dumps(app.stats()), encoding="utf-8")
    return 0


def measure(argv: list[str], source: str, size: tuple[int, int], rounds: int, settle: float, stats: Path) -> Run:
    """Run ``argv`` in a pty, let it poll for ``settle`` seconds, type the keys ``rounds`` times, quit."""
    env = dict(os.environ, GPUSIGHT_STATS_FILE=str(stats), PYTHONPATH=str(REPO))
    first: dict[str, list[float]] = {}
    marker: dict[str, list[float]] = {}
    with PtyTerminal(argv, size, env=env, cwd=REPO) as term:
        term.wait_for(lambda: b"last poll" in term.output and b"node-" in term.output, "the first fleet frame", 180)
        time.sleep(settle)
        proc = psutil.Process(term.proc.pid)
        cpu0, bytes0, t0 = sum(proc.cpu_times()[:2]), term.received, time.monotonic()
        time.sleep(settle)
        cpu1, bytes1, t1 = sum(proc.cpu_times()[:2]), term.received, time.monotonic()
        for _ in range(rounds):
            for name, keys, mark in KEYS:
                offset, count = len(term.output), term.received
                sent = time.monotonic()
                term.send(keys)
                deadline = sent + MARKER_TIMEOUT_S
                while term.received == count and time.monotonic() < deadline:
                    time.sleep(0.001)
                first.setdefault(name, []).append(time.monotonic() - sent)
                if mark is not None:
                    while mark not in term.output[offset:] and time.monotonic() < deadline:
                        time.sleep(0.001)
                    marker.setdefault(name, []).append(time.monotonic() - sent)
                time.sleep(0.3)
        term.quit()
    data = json.loads(stats.read_text(encoding="utf-8"))
    return Run(source, size, first, marker, data["poll_to_screen_s"], 1000 * (cpu1 - cpu0) / (t1 - t0),
               (bytes1 - bytes0) / (t1 - t0), data["polls"])


def _ms(values: list[float]) -> str:
    return f"{1000 * statistics.median(values):.0f} / {1000 * max(values):.0f}" if values else "n/a"


def report(runs: list[Run], nodes: int, interval: float, rounds: int) -> str:
    """The Markdown section for RESULTS-cluster.md."""
    lines = [
        "## Cluster view (`gpusight --cluster`) with 100 nodes",
        "",
        f"Written by `python benchmarks/cluster_tui.py` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. "
        f"{nodes} nodes of 8 GPUs ({nodes * 8} GPU rows), every GPU's utilization moving on every poll, polled every "
        f"{interval:g} s, in a real pty (TERM=xterm-256color). Key times: median / max over {rounds} rounds, in ms, "
        "from writing the key to the first byte on the terminal and to the text its screen draws. "
        "`sim`: the app's poll hands out frames built in code (the UI alone); a URL: `gpusight --cluster URL`.",
        "",
        "| source | size | Enter (host) first byte / drawn | Esc (back) drawn | ? (help) drawn | p (pause) drawn "
        "| poll to screen ms median / max | CPU ms/s | output KiB/s | polls |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        lines.append(
            f"| {run.source} | {run.size[0]}x{run.size[1]} | {_ms(run.first_byte['Enter'])} ; {_ms(run.marker['Enter'])} "
            f"| {_ms(run.marker['Esc'])} | {_ms(run.marker['?'])} | {_ms(run.marker['p'])} | {_ms(run.poll_to_screen)} "
            f"| {run.cpu_ms_per_s:.0f} | {run.bytes_per_s / 1024:.1f} | {run.polls} |"
        )
    lines += [
        "",
        "Conditions: 2 shared cores; with the fleet simulator, Prometheus (scraping every node each second) and the "
        "simulator ran on the same cores as the measured gpusight. CPU is the gpusight process's alone. Poll to screen is "
        "the app's own figure (poll returned -> the refresh that showed it); the poll itself (the queries) runs on a "
        "thread of its own and never blocks a key. The fleet table re-renders only the rows on screen whose values "
        "changed (tests/test_cluster_ui.py checks this with 900 rows).",
    ]
    return "\n".join(lines) + "\n"


def write_results(section: str, path: Path) -> None:
    """Put ``section`` between the cluster-tui markers of ``path`` (appended the first time)."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    block = f"{RESULTS_BEGIN}\n{section}{RESULTS_END}\n"
    if RESULTS_BEGIN in text and RESULTS_END in text:
        head, rest = text.split(RESULTS_BEGIN, 1)
        text = head + block + rest.split(RESULTS_END, 1)[1].lstrip("\n")
    else:
        text = text.rstrip("\n") + "\n\n" + block
    path.write_text(text, encoding="utf-8")


def main() -> int:
    """Measure and print (and optionally store) the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inner-sim", type=int, metavar="NODES", help=argparse.SUPPRESS)
    parser.add_argument("--url", help="also measure `gpusight --cluster URL`")
    parser.add_argument("--fleet-sim", action="store_true", help="also measure `gpusight --cluster` on the fleet simulator")
    parser.add_argument("--nodes", type=int, default=100, help="nodes of the sim source (default 100)")
    parser.add_argument("--interval", type=float, default=2.0, help="poll interval in seconds (default 2)")
    parser.add_argument("--rounds", type=int, default=10, help="times each key is typed (default 10)")
    parser.add_argument("--settle", type=float, default=4.0, help="seconds of polling before CPU is measured, and measured")
    parser.add_argument("--sizes", default="160x45,80x24")
    parser.add_argument("--write-results", action="store_true", help="store the section in benchmarks/RESULTS-cluster.md")
    args = parser.parse_args()
    if args.inner_sim is not None:
        return inner_sim(args.inner_sim, args.interval)
    runs = []
    sizes = [tuple(int(n) for n in size.split("x")) for size in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        stats = Path(tmp) / "stats.json"
        for size in sizes:  # first, with nothing else running
            sim = [sys.executable, str(Path(__file__).resolve()), "--inner-sim", str(args.nodes), "--interval", str(args.interval)]
            runs.append(measure(sim, "sim", size, args.rounds, args.settle, stats))  # type: ignore[arg-type]
        simulator = None
        if args.fleet_sim:
            from fleet_sim import spawn_fleet

            simulator, args.url = spawn_fleet(args.nodes, kill_after=None)
        try:
            for size in sizes if args.url else ():
                argv = gpusight_argv("--cluster", args.url, "--interval", str(args.interval))
                source = "fleet simulator via Prometheus" if args.fleet_sim else args.url
                runs.append(measure(argv, source, size, args.rounds, args.settle, stats))  # type: ignore[arg-type]
        finally:
            if simulator is not None:
                simulator.terminate()
                simulator.wait(30)
    section = report(runs, args.nodes, args.interval, args.rounds)
    print(section)
    if args.write_results:
        write_results(section, REPO / "benchmarks" / "RESULTS-cluster.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
