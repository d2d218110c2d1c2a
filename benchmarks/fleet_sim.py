"""A simulated fleet for the cluster view: N nodes x 8 GPUs with moving figures, scraped by a real Prometheus.

One HTTP server serves every node at ``/node/NAME/metrics`` (written by prometheus_client through
tests/support/exposition.py, under gpusight.metric_names); Prometheus scrapes each path as its own target
(``instance`` = ``NAME:9400``) every second. The figures are a pure function of the time since start:

- every GPU's utilization, memory, power, temperature and PCIe follow sine waves with periods of 7-60 s
  of their own; every 7th GPU bursts to 100 % for 2 s in 10;
- nodes 0-3 run job ``slurm:9001`` (32 ranks); rank 21 (node 2, GPU 5) is a straggler at about 35 % SM
  while the others run at about 90 %; the job publishes its speed (1.2 steps/s, about 38 % MFU), node 2 waiting
  35 % of each step for data;
- the node ``IDLE_NODE`` idles: utilization 0, GPUs 0-3 still holding 30 GiB (an idle notebook), 4-7 empty;
- the node ``DOWN_NODE`` stops answering ``kill_after`` seconds after start (its scrapes then get 404);
- the last ``dcgm_nodes`` nodes serve dcgm-exporter's series only (no processes, jobs or advice).

``python benchmarks/fleet_sim.py`` starts it, prints the Prometheus URL and runs until Ctrl-C; other
benchmarks call :func:`start_fleet`.
"""

from __future__ import annotations

import argparse
import math
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from support.exposition import ExpositionServer, SimGpu, SimJob, SimNode, SimProcess, render
from support.prometheus import PrometheusServer, Target

GPUS = 8
"""GPUs per node."""

IDLE_NODE = 17
"""The node that idles."""

DOWN_NODE = 42
"""The node that stops answering."""

STRAGGLER_JOB = "slurm:9001"
"""The job spanning nodes 0-3."""

STRAGGLER = (2, 5)
"""(node, GPU) of its slow rank."""

METRICS = ("util", "mem", "power", "temp", "pcie_tx", "pcie_rx", "sm")
"""Quantities with a wave of their own."""


def node_name(index: int) -> str:
    """``node-007``."""
    return f"node-{index:03d}"


def wave(t: float, node: int, gpu: int, metric: str) -> float:
    """A sine in [0, 1] with a period of 7-60 s and a phase of its own per (node, GPU, metric)."""
    key = node * 31 + gpu * 13 + METRICS.index(metric) * 29
    period = 7.0 + key % 54
    return 0.5 + 0.5 * math.sin(2 * math.pi * t / period + 0.37 * key)


def gpu_at(t: float, node: int, gpu: int) -> SimGpu:
    """One GPU's figures at ``t`` seconds."""
    if node == IDLE_NODE:
        return SimGpu(gpu, 0.0, 30720.0 if gpu < 4 else 0.0, 65.0, 31.0, 0.0, 1e5, 1e5)
    util = 55 + 40 * wave(t, node, gpu, "util")
    if (node * GPUS + gpu) % 7 == 0 and t % 10 < 2:
        util = 100.0
    sm = 0.5 + 0.45 * wave(t, node, gpu, "sm")
    if node < 4:
        util, sm = 88 + 6 * wave(t, node, gpu, "util"), 0.85 + 0.1 * wave(t, node, gpu, "sm")
        if (node, gpu) == STRAGGLER:
            util, sm = 38 + 6 * wave(t, node, gpu, "util"), 0.33 + 0.05 * wave(t, node, gpu, "sm")
    return SimGpu(
        gpu, round(util), round(20000 + 50000 * wave(t, node, gpu, "mem")), round(250 + 400 * util / 100, 1),
        round(45 + 30 * wave(t, node, gpu, "temp")), round(sm, 3),
        round(2e9 * wave(t, node, gpu, "pcie_tx")), round(8e9 * wave(t, node, gpu, "pcie_rx")),
    )


def node_at(t: float, node: int, gpusight: bool) -> SimNode:
    """One node's exposition model at ``t``."""
    gpus = [gpu_at(t, node, g) for g in range(GPUS)]
    sim = SimNode(node_name(node), gpus, gpusight=gpusight)
    if not gpusight:
        return sim
    if node == IDLE_NODE:
        sim.jobs = [SimJob(1, "", "notebook")]
        sim.processes = [SimProcess(1, str(g), g, "ipykernel", "carol", 0.0, 30 << 30) for g in range(4)]
        return sim
    cluster_job = STRAGGLER_JOB if node < 4 else ""
    sim.jobs = [SimJob(1, cluster_job, "training", 32 if node < 4 else 8)]
    if node < 4:  # the job publishes its speed (gpusight.torch); the straggler's node waits longest for data
        data = 35.0 if node == STRAGGLER[0] else 8.0
        sim.jobs[0] = SimJob(1, cluster_job, "training", 32, steps_per_second=1.2, tokens_per_second=1.2 * 8 * 16 * 4096,
                             flops_per_second=3.0e15 + 2e14 * math.sin(t / 13), peak_flops_per_second=8 * 989e12,
                             step_time_percent={"data": data, "compute": 82.0 - data, "communication": 14.0,
                                                "copy": 2.0, "idle": 2.0})
    sim.processes = [
        SimProcess(1, str(node * GPUS + g if node < 4 else g), g, "train.py", "alice",
                   round(gpus[g].sm_active * 100 if gpus[g].sm_active is not None else 0.0), int(gpus[g].fb_used_mib) << 20)
        for g in range(GPUS)
    ]
    return sim


@dataclass
class Fleet:
    """A running simulated fleet and the Prometheus scraping it."""

    nodes: int
    server: ExpositionServer
    prometheus: PrometheusServer
    started: float
    kill_after: float | None
    dcgm_nodes: int
    renders: int = 0
    """Node expositions written so far."""
    _cache: dict[tuple[int, int], bytes] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        """Prometheus's base URL."""
        return self.prometheus.url

    def body(self, node: int) -> bytes:
        """Node ``node``'s exposition now (re-rendered at most every half second)."""
        t = time.monotonic() - self.started
        key = (node, int(t * 2))
        with self._lock:
            cached = self._cache.get(key)
        if cached is None:
            cached = render(node_at(t, node, gpusight=node < self.nodes - self.dcgm_nodes))
            with self._lock:
                self._cache = {k: v for k, v in self._cache.items() if k[1] >= key[1] - 1}
                self._cache[key] = cached
                self.renders += 1
        return cached

    def stop(self) -> None:
        """Stop Prometheus and the server."""
        self.prometheus.stop()
        self.server.close()


def start_fleet(nodes: int = 100, kill_after: float | None = 30.0, dcgm_nodes: int = 20) -> Fleet:
    """Start the fleet's server and a Prometheus scraping it; returns once every node was scraped once."""
    server = ExpositionServer()
    started = time.monotonic()
    fleet = Fleet(nodes, server, PrometheusServer([]), started, kill_after, dcgm_nodes)

    def route(node: int):
        def make() -> bytes | None:
            if node == DOWN_NODE and kill_after is not None and time.monotonic() - started > kill_after:
                return None  # 404: Prometheus marks the target down
            return fleet.body(node)
        return make

    for node in range(nodes):
        server.routes[f"/node/{node_name(node)}/metrics"] = route(node)
    fleet.prometheus = PrometheusServer(
        [Target(server.address, f"/node/{node_name(n)}/metrics", f"{node_name(n)}:9400") for n in range(nodes)])
    try:
        fleet.prometheus.start(timeout=60)
    except BaseException:
        server.close()
        raise
    return fleet


def spawn_fleet(nodes: int = 100, kill_after: float | None = 30.0,
                dcgm_nodes: int = 20) -> tuple[subprocess.Popen[str], str]:
    """Run the fleet in a process of its own (its rendering then shares no GIL with the caller).

    Returns the process and Prometheus's URL; stop it with ``process.terminate()`` and ``wait()``.
    """
    command = [sys.executable, str(Path(__file__).resolve()), "--nodes", str(nodes), "--dcgm-nodes", str(dcgm_nodes),
               "--kill-after", str(kill_after if kill_after is not None else -1)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    if not url:
        process.wait(10)
        raise RuntimeError(f"the fleet simulator exited with {process.returncode} before starting")
    return process, url


def main() -> None:
    """Run the fleet until Ctrl-C, printing Prometheus's URL."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--kill-after", type=float, default=30.0, help=f"seconds before {node_name(DOWN_NODE)} dies (negative: never)")
    parser.add_argument("--dcgm-nodes", type=int, default=20, help="nodes serving dcgm-exporter's series only")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))  # stop Prometheus on the way out
    fleet = start_fleet(args.nodes, args.kill_after if args.kill_after >= 0 else None, args.dcgm_nodes)
    print(fleet.url, flush=True)
    try:
        while True:
            time.sleep(1)
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        fleet.stop()


if __name__ == "__main__":
    main()
