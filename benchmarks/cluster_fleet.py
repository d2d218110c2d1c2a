"""The cluster view's cost on a simulated fleet (fleet_sim.py: 100 nodes x 8 GPUs by default) and a real Prometheus.

Polls ``ClusterSource`` like the cluster view does (every 2 s, with a focus host) and reports the poll time
(p50/p95/max), the bytes fetched and the queries sent per poll, and Prometheus's own evaluation time
(``stats=all``); it also checks that the frame shows what the fleet holds (every node and GPU, the straggler,
the idle node, the dead node). ``--results`` writes the section "Cluster view: a simulated fleet" of
benchmarks/RESULTS-cluster.md.

    python benchmarks/cluster_fleet.py --warmup 70 --polls 30
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import sys
import time
from pathlib import Path

from fleet_sim import DOWN_NODE, GPUS, IDLE_NODE, STRAGGLER_JOB, node_name, spawn_fleet

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpusight.cluster.source import ClusterSource  # noqa: E402

SECTION = "## Cluster view: a simulated fleet"


def percentile(values: list[float], share: float) -> float:
    """The ``share`` quantile (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))]


def measure(nodes: int, warmup: float, polls: int, interval: float) -> dict[str, object]:
    """Run the fleet, poll it and return the figures."""
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    fleet, url = spawn_fleet(nodes, kill_after=min(30.0, warmup / 2))
    try:
        time.sleep(max(0.0, warmup - (time.monotonic() - started)))
        source = ClusterSource(url, server_stats=True)
        times, sizes, counts, server, per_query = [], [], [], [], {}
        frame = None
        for i in range(polls):
            started = time.monotonic()
            frame = source.poll(focus_host=node_name(i % nodes))
            times.append(time.monotonic() - started)
            stats = source.last_stats
            sizes.append(stats.bytes)
            counts.append(stats.requests)
            server.append(stats.server_seconds)
            for expr, seconds, size in stats.per_query:
                per_query.setdefault(re.sub(r'Hostname="[^"]*"', 'Hostname="…"', expr), []).append((seconds, size))
            time.sleep(max(0.0, interval - (time.monotonic() - started)))
        assert frame is not None
        ids = [a.id for a in frame.fleet_advice]
        checks = {
            "nodes": len(frame.nodes), "GPUs": sum(len(n.gpus) for n in frame.nodes),
            "down": [n.host for n in frame.nodes if not n.up],
            "straggler": f"fleet_straggler:{STRAGGLER_JOB}" in ids,
            "idle holding on the idle node": sum(1 for i in ids if i.startswith(f"fleet_idle_holding:{node_name(IDLE_NODE)}/")),
            "free GPUs line": next((a.title for a in frame.fleet_advice if a.id == "fleet_free_gpus"), None),
            "processes": len(frame.processes), "problems": list(frame.problems),
        }
        return {"nodes": nodes, "polls": polls, "interval": interval, "warmup": warmup, "times": times, "sizes": sizes,
                "counts": counts, "server": server, "per_query": per_query, "checks": checks,
                "load": (load_before, os.getloadavg()[0])}
    finally:
        fleet.terminate()
        fleet.wait(30)


def report(figures: dict[str, object]) -> str:
    """The RESULTS-cluster.md section."""
    times = [t * 1000 for t in figures["times"]]  # type: ignore[union-attr]
    sizes = figures["sizes"]
    server = [s * 1000 for s in figures["server"]]  # type: ignore[union-attr]
    checks = figures["checks"]
    nodes = figures["nodes"]
    lines = [
        SECTION, "",
        f"Written by `python benchmarks/cluster_fleet.py --results` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
        f" ({platform.machine()}, Python {platform.python_version()}, `prometheus` 2.42 from Debian, 2 cores shared by "
        "the simulator (a process of its own), Prometheus and the poller).",
        "",
        f"{nodes} nodes x {GPUS} GPUs (fleet_sim.py: moving figures, a straggler job over 4 nodes, an idle node "
        f"holding memory, {node_name(DOWN_NODE)} killed mid-run, 20 nodes with dcgm-exporter's series only), "
        f"scraped every 1 s; `ClusterSource` polled {figures['polls']} times every {figures['interval']:g} s with a "
        f"focus host, after {figures['warmup']:g} s of warm-up, 300 s of history at a 3 s step (101 points per series). "
        f"Load average (1 min) {figures['load'][0]:.1f} before the run and {figures['load'][1]:.1f} at its end: "  # type: ignore[index]
        "the figures move with whatever else runs on the machine.",
        "",
        "| figure | p50 | p95 | max |",
        "|---|---|---|---|",
        f"| poll time (all queries, parsing, fleet advice), ms | {percentile(times, .5):.0f} | {percentile(times, .95):.0f} | {max(times):.0f} |",
        f"| Prometheus's own evaluation time per poll, ms | {percentile(server, .5):.0f} | {percentile(server, .95):.0f} | {max(server):.0f} |",
        f"| bytes fetched per poll, KiB | {percentile(sizes, .5) / 1024:.0f} | {percentile(sizes, .95) / 1024:.0f} | {max(sizes) / 1024:.0f} |",
        f"| queries per poll | {percentile(figures['counts'], .5):.0f} | {percentile(figures['counts'], .95):.0f} | {max(figures['counts'])} |",
        "",
        "Per query (median over the polls):",
        "",
        "| query | ms | KiB |",
        "|---|---|---|",
    ]
    for expr, samples in figures["per_query"].items():  # type: ignore[union-attr]
        lines.append(f"| `{expr[:90]}` | {statistics.median(s for s, _ in samples) * 1000:.0f} | "
                     f"{statistics.median(b for _, b in samples) / 1024:.0f} |")
    lines += ["", "What the last frame showed: " + "; ".join(f"{k}: {v}" for k, v in checks.items()) + ".", "",
              "The poll runs in the cluster view's worker thread, never in the UI's. The largest poll is the first "
              "(it fetches the whole history; later ones fetch only the newest points of each chart). The instant "
              "device query (up to 15 series per GPU) carries about half the bytes and most of Prometheus's time. "
              "Bytes and time grow with the number of GPUs; the number of queries stays the same.", ""]
    return "\n".join(lines)


def write_section(path: Path, section: str) -> None:
    """Replace (or append) the section of ``path`` that has ``section``'s heading (its first line)."""
    text = path.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(section.split("\n", 1)[0]) + r".*?(?=\n## |\Z)", re.S)
    text = pattern.sub(section.rstrip("\n"), text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + section
    path.write_text(text.rstrip("\n") + "\n", encoding="utf-8")


def main() -> None:
    """Measure and print (or write) the section."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--warmup", type=float, default=70.0, help="seconds of data before the first poll")
    parser.add_argument("--polls", type=int, default=30)
    parser.add_argument("--interval", type=float, default=2.0)
    parser.add_argument("--results", action="store_true", help="write the section into benchmarks/RESULTS-cluster.md")
    args = parser.parse_args()
    section = report(measure(args.nodes, args.warmup, args.polls, args.interval))
    print(section)
    if args.results:
        write_section(REPO / "benchmarks" / "RESULTS-cluster.md", section)


if __name__ == "__main__":
    main()
