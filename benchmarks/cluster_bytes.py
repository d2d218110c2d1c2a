"""Bytes on the wire and connections per poll of the cluster client, before and after gzip and keep-alive.

A simulated fleet (fleet_sim.py: 100 nodes x 8 GPUs by default) is scraped by a real Prometheus; a counting TCP
proxy (tests/support/tcp_counter.py) sits between the client and Prometheus, so the figures are what the network
carries: answer bytes (headers included), request bytes and accepted connections, per poll. The client runs in a
process of its own, once with the code of ``--before`` (a commit, extracted with ``git archive``) and once with
this tree's, against the same fleet, each polling like the cluster view (every 2 s, with a focus host).
``--results`` writes the section "Cluster client: bytes and connections per poll" of benchmarks/RESULTS-cluster.md.

    python benchmarks/cluster_bytes.py --warmup 40 --polls 10 --results
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

from cluster_fleet import write_section
from fleet_sim import node_name, spawn_fleet

REPO = Path(__file__).resolve().parents[1]
SECTION = "## Cluster client: bytes and connections per poll"
BEFORE = "2548b99"
"""The last commit before the client asked for gzip and kept its connection."""


def poll_through_proxy(url: str, polls: int, interval: float, nodes: int) -> None:
    """(In the child.) Poll ``url`` through a counting proxy; print one JSON line per poll."""
    sys.path.insert(0, str(REPO / "tests"))
    from gpusight.cluster.source import ClusterSource
    from support.tcp_counter import CountingProxy

    upstream = urllib.parse.urlsplit(url)
    proxy = CountingProxy((upstream.hostname or "127.0.0.1", upstream.port or 80))
    source = ClusterSource(f"http://{proxy.address}")
    for i in range(polls):
        started = time.monotonic()
        proxy.reset()
        frame = source.poll(focus_host=node_name(i % nodes))
        print(json.dumps({"received": proxy.received, "sent": proxy.sent, "connections": proxy.connections,
                          "requests": source.last_stats.requests, "nodes": len(frame.nodes),
                          "problems": list(frame.problems)}), flush=True)
        time.sleep(max(0.0, interval - (time.monotonic() - started)))


def run_client(code: Path, url: str, polls: int, interval: float, nodes: int) -> list[dict[str, object]]:
    """Poll with the gpusight package under ``code`` in a child process; its per-poll figures."""
    command = [sys.executable, "-c",  # gpusight is imported from ``code`` first, so later path changes cannot swap it
               f"import sys; sys.path.insert(0, {str(code)!r}); import gpusight.cluster.source, gpusight; "
               f"assert gpusight.__file__.startswith({str(code)!r}), gpusight.__file__; "
               f"sys.path.insert(0, {str(REPO / 'benchmarks')!r}); "
               f"import cluster_bytes; cluster_bytes.poll_through_proxy({url!r}, {polls}, {interval}, {nodes})"]
    result = subprocess.run(command, capture_output=True, text=True, check=True, timeout=polls * (interval + 30))
    return [json.loads(line) for line in result.stdout.splitlines()]


def extract(commit: str, folder: Path) -> Path:
    """The ``gpusight`` package as of ``commit``, written under ``folder``."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, "gpusight"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    return folder


def measure(nodes: int, warmup: float, polls: int, interval: float, before: str) -> dict[str, object]:
    """Run the fleet, poll it with both clients and return the figures."""
    fleet, url = spawn_fleet(nodes)
    try:
        time.sleep(warmup)
        with tempfile.TemporaryDirectory(prefix="gpusight-before-") as folder:
            old = run_client(extract(before, Path(folder)), url, polls, interval, nodes)
        new = run_client(REPO, url, polls, interval, nodes)
    finally:
        fleet.terminate()
        fleet.wait(30)
    return {"nodes": nodes, "warmup": warmup, "polls": polls, "interval": interval, "before": before,
            "old": old, "new": new}


def row(name: str, samples: list[dict[str, object]]) -> str:
    """One table row: the first poll (the whole history) and the median of the later ones (the newest points)."""
    first, later = samples[0], samples[1:]

    def median(key: str) -> float:
        return statistics.median(float(s[key]) for s in later)  # type: ignore[arg-type]

    return (f"| {name} | {float(first['received']) / 1024:.0f} | {median('received') / 1024:.0f} | "  # type: ignore[arg-type]
            f"{median('sent') / 1024:.1f} | {first['connections']} | {median('connections'):.0f} | "
            f"{median('requests'):.0f} |")


def ratio(old: list[dict[str, object]], new: list[dict[str, object]], first: bool) -> float:
    """How many times fewer bytes ``new`` received than ``old``: on the first poll, or the median of the later ones."""
    def received(samples: list[dict[str, object]]) -> float:
        chosen = samples[:1] if first else samples[1:]
        return statistics.median(float(s["received"]) for s in chosen)  # type: ignore[arg-type]
    return received(old) / max(received(new), 1.0)


def kib_list(samples: list[dict[str, object]]) -> str:
    """The KiB each poll received, in order."""
    return ", ".join(f"{float(s['received']) / 1024:.0f}" for s in samples)  # type: ignore[arg-type]


def report(figures: dict[str, object]) -> str:
    """The RESULTS-cluster.md section."""
    old, new = figures["old"], figures["new"]
    problems = {p for s in [*old, *new] for p in s["problems"]}  # type: ignore[union-attr, attr-defined]
    lines = [
        SECTION, "",
        f"Written by `python benchmarks/cluster_bytes.py --results` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
        f" ({platform.machine()}, Python {platform.python_version()}, `prometheus` 2.42 from Debian).",
        "",
        f"{figures['nodes']} nodes x 8 GPUs (fleet_sim.py), scraped every 1 s, after {figures['warmup']:g} s of "
        f"warm-up; `ClusterSource` polled {figures['polls']} times every {figures['interval']:g} s with a focus host "
        "(default 300 s of history), through a counting TCP proxy in front of Prometheus: bytes are what the "
        f"network carried, HTTP headers included. \"Before\" is the client of {figures['before']} (urllib, one "
        "connection per query, no gzip), run against the same fleet just before \"after\" (this tree: http.client, "
        "one kept-alive connection, `Accept-Encoding: gzip`).",
        "",
        "| client | first poll, KiB received | later polls, KiB received (median) | KiB sent per poll | connections, "
        "first poll | connections per later poll | queries per poll |",
        "|---|---|---|---|---|---|---|",
        row("before", old),  # type: ignore[arg-type]
        row("after", new),  # type: ignore[arg-type]
        "",
        f"Bytes received: {ratio(old, new, True):.1f}x fewer on the first poll (it fetches the whole history), "
        f"{ratio(old, new, False):.1f}x fewer on the later ones (only the newest points of each chart, plus the device "
        "query). Connections: one per query before; one for the first poll after, then none (the connection is kept "
        "across polls). KiB received by each poll, before: "
        f"{kib_list(old)}; after: {kib_list(new)}. "
        f"Problems the frames reported: {'; '.join(sorted(problems)) or 'none'}.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    """Measure and print (or write) the section."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--warmup", type=float, default=40.0, help="seconds of data before the first poll")
    parser.add_argument("--polls", type=int, default=10)
    parser.add_argument("--interval", type=float, default=2.0)
    parser.add_argument("--before", default=BEFORE, help=f"the commit whose client is 'before' (default {BEFORE})")
    parser.add_argument("--results", action="store_true", help="write the section into benchmarks/RESULTS-cluster.md")
    args = parser.parse_args()
    section = report(measure(args.nodes, args.warmup, args.polls, args.interval, args.before))
    print(section)
    if args.results:
        write_section(REPO / "benchmarks" / "RESULTS-cluster.md", section)


if __name__ == "__main__":
    main()
