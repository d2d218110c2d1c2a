"""The cluster view's data side against a real Prometheus scraping simulated exporters every second.

(a) plain dcgm-exporter output (a stored sample): nodes and GPUs found, the gpusight-only panels named;
(b) nodes following gpusight.metric_names with a job spanning two nodes where one rank is slow, and an idle GPU
holding memory: fleet advice; (c) a killed target shows as down within a few scrapes, keeping its last values.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpusight.cluster.frame import ClusterFrame
from gpusight.cluster.source import GPUSIGHT_PANELS, ClusterSource
from support.exposition import ExpositionServer, SimGpu, SimJob, SimNode, SimProcess, render
from support.prometheus import PrometheusServer, Target, require_prometheus

REPO = Path(__file__).resolve().parents[1]
DCGM_SAMPLE = REPO / "tests" / "data" / "cluster" / "dcgm-exporter-3.3.txt"
HISTORY = 20.0
"""Seconds of history the tests ask for: 1 s steps, a 10 s advice window."""


def poll_until(source: ClusterSource, done, timeout: float = 30.0, focus: str | None = None) -> ClusterFrame:
    """Poll every half second until ``done(frame)``; the last frame either way."""
    deadline = time.monotonic() + timeout
    frame = source.poll(focus)
    while not done(frame) and time.monotonic() < deadline:
        time.sleep(0.5)
        frame = source.poll(focus)
    return frame


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "gpusight", *args], capture_output=True, text=True, env=env,
                          timeout=timeout, check=False)


# -- (a) plain dcgm-exporter ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def dcgm_fleet():
    require_prometheus()
    sample = DCGM_SAMPLE.read_bytes()
    routes = {
        "/old": lambda: sample,
        "/new": lambda: sample.replace(b'Hostname="dgx-a100-01"', b'hostname="dgx-a100-02"'),
        "/bare": lambda: sample.replace(b',Hostname="dgx-a100-01"', b""),
    }
    server = ExpositionServer(routes)
    targets = [Target(server.address, path, instance) for path, instance in
               (("/old", "10.0.0.1:9400"), ("/new", "10.0.0.2:9400"), ("/bare", "10.0.0.3:9400"))]
    with PrometheusServer(targets) as prometheus:
        yield prometheus
    server.close()


def test_plain_dcgm_exporter_nodes_and_gpus(dcgm_fleet):
    def complete(frame):  # the charts get their first point a step after the first scrape
        return len(frame.nodes) == 3 and all(history.series for history in frame.history)

    frame = poll_until(ClusterSource(dcgm_fleet.url, history_seconds=HISTORY), complete, focus="dgx-a100-01")
    assert [n.host for n in frame.nodes] == ["10.0.0.3:9400", "dgx-a100-01", "dgx-a100-02"]
    for node in frame.nodes:
        assert node.up and node.exporter == "dcgm" and node.note is None
        assert [g.index for g in node.gpus] == [0, 1]
    gpu = frame.nodes[1].gpus[0]
    assert gpu.uuid == "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52" and gpu.model == "NVIDIA A100-SXM4-80GB"
    assert gpu.utilization_percent == 97 and gpu.power_watts == pytest.approx(312.518)
    assert gpu.memory_used_bytes == 61720 << 20 and gpu.memory_total_bytes == (61720 + 19207 + 573) << 20
    assert gpu.tensor_active_percent == pytest.approx(41.2005) and gpu.pcie_rx_bytes_per_s == 2137795812
    assert gpu.sm_active_percent is None  # not among dcgm-exporter's default counters: N/A, never 0
    assert frame.nodes[1].cpu_percent is None
    assert frame.processes == () and frame.jobs == () and frame.node_advice == ()
    assert [line.split(":")[0] for line in frame.missing_panels] == list(GPUSIGHT_PANELS)
    assert all("gpusight --serve" in line for line in frame.missing_panels)
    assert frame.problems == ()
    charts = {h.metric for h in frame.history if h.series}
    assert {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_POWER_USAGE",
            "DCGM_FI_PROF_PCIE_TX_BYTES"} <= charts


def test_plain_dcgm_exporter_once_table(dcgm_fleet):
    result = run_cli("--cluster", dcgm_fleet.url, "--once", "--cluster-history", str(HISTORY))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "3 nodes, 6 GPUs" in out
    assert "dgx-a100-01  up  dcgm-exporter" in out
    assert "97%" in out and "313W" in out and "61C" in out
    assert "processes: needs gpusight --serve on the nodes" in out
    assert result.stderr == ""


# -- (b) gpusight exporters: stragglers and idle GPUs ----------------------------------------------------------------

def training_nodes() -> list[SimNode]:
    """Two nodes of job slurm:4242 (rank 3 on gpu-b GPU 1 is slow); gpu-a GPU 3 idle holding memory."""
    job = SimJob(1, "slurm:4242", world_size=4)
    a = SimNode("gpu-a", [SimGpu(0, 95, 60000, 600, 70, 0.9), SimGpu(1, 94, 60000, 610, 71, 0.9),
                          SimGpu(2, 0, 0), SimGpu(3, 0, 20000)],
                jobs=[job, SimJob(2, "", "notebook")],
                processes=[SimProcess(1, "0", 0, "train.py", sm=92, memory_bytes=58 << 30),
                           SimProcess(1, "1", 1, "train.py", sm=90, memory_bytes=58 << 30),
                           SimProcess(2, "0", 3, "jupyter-kernel", user="bob", sm=0, memory_bytes=19 << 30)])
    b = SimNode("gpu-b", [SimGpu(0, 95, 60000, 600, 70, 0.9), SimGpu(1, 40, 60000, 300, 60, 0.3),
                          SimGpu(2, 0, 100), SimGpu(3, 0, 100)],
                jobs=[SimJob(1, "slurm:4242", world_size=4)],
                processes=[SimProcess(1, "2", 0, "train.py", sm=91, memory_bytes=58 << 30),
                           SimProcess(1, "3", 1, "train.py", sm=30, memory_bytes=58 << 30)])
    return [a, b]


@pytest.fixture(scope="module")
def gpusight_fleet():
    require_prometheus()
    nodes = training_nodes()
    dcgm = DCGM_SAMPLE.read_bytes()
    routes = {f"/{n.host}": (lambda n=n: render(n)) for n in nodes}
    routes["/dcgm"] = lambda: dcgm
    server = ExpositionServer(routes)
    targets = [Target(server.address, path, path[1:]) for path in routes]
    with PrometheusServer(targets) as prometheus:
        yield prometheus
    server.close()


def has_advice(*prefixes: str):
    return lambda frame: all(any(a.id.startswith(p) for a in frame.fleet_advice) for p in prefixes)


def test_straggler_and_idle_gpu_advice(gpusight_fleet):
    source = ClusterSource(gpusight_fleet.url, history_seconds=HISTORY)
    def complete(frame):  # every node's window filled: the nodes' first scrapes came at different moments
        free = [a.evidence for a in frame.fleet_advice if a.id == "fleet_free_gpus"]
        return has_advice("fleet_straggler", "fleet_idle_holding")(frame) and bool(free) and "dgx" in free[0]

    frame = poll_until(source, complete)
    ids = [a.id for a in frame.fleet_advice]
    straggler = next(a for a in frame.fleet_advice if a.id == "fleet_straggler:slurm:4242")
    assert "rank 3 on gpu-b GPU 1 30%" in straggler.evidence
    assert "median of 4 ranks on 2 nodes" in straggler.evidence and "SM averaged" in straggler.evidence
    assert "fleet_idle_holding:gpu-a/gpu3" in ids
    assert "fleet_idle_holding:gpu-a/gpu2" not in ids  # idle but empty: free, not holding
    idle = next(a for a in frame.fleet_advice if a.id == "fleet_idle_holding:gpu-a/gpu3")
    assert "jupyter-kernel" in idle.evidence
    free = next(a for a in frame.fleet_advice if a.id == "fleet_free_gpus")
    assert free.evidence.startswith("gpu-b: 2, dgx-a100-01: 1, gpu-a: 1")
    assert not any(a.id.startswith("fleet_nodes_down") for a in frame.fleet_advice)


def test_jobs_processes_and_exporter_detection(gpusight_fleet):
    frame = poll_until(ClusterSource(gpusight_fleet.url, history_seconds=HISTORY), lambda f: len(f.processes) == 5)
    assert {n.host: n.exporter for n in frame.nodes} == {"dgx-a100-01": "dcgm", "gpu-a": "gpusight", "gpu-b": "gpusight"}
    assert [(j.host, j.job, j.cluster_job, j.world_size) for j in frame.jobs] == [
        ("gpu-a", 1, "slurm:4242", 4), ("gpu-a", 2, None, None), ("gpu-b", 1, "slurm:4242", 4)]
    slow = next(p for p in frame.processes if p.host == "gpu-b" and p.rank == "3")
    assert (slow.gpu, slow.name, slow.user, slow.sm_percent, slow.memory_bytes) == (1, "train.py", "alice", 30, 58 << 30)
    assert frame.missing_panels == ("processes, jobs, advice, host CPU: none from 1 node without gpusight --serve "
                                    "(dgx-a100-01)",)


def test_cluster_once_and_json_cli(gpusight_fleet):
    args = ("--cluster", gpusight_fleet.url, "--cluster-history", str(HISTORY))
    poll_until(ClusterSource(gpusight_fleet.url, history_seconds=HISTORY), has_advice("fleet_straggler"))
    table = run_cli(*args, "--once")
    assert table.returncode == 0, table.stderr
    assert "gpu-b  up  gpusight --serve" in table.stdout
    assert "train.py r3 slurm:4242 SM 30%" in table.stdout
    assert "Straggler in slurm:4242: rank 3 on gpu-b GPU 1" in table.stdout
    document = json.loads(run_cli(*args, "--json").stdout)
    assert document["schema"] == "gpusight-cluster/1"
    assert list(document) == ["schema", "timestamp", "url", "nodes", "jobs", "job_speeds", "processes", "node_advice",
                              "fleet_advice", "history", "problems", "missing_panels", "query_seconds"]
    assert [n["host"] for n in document["nodes"]] == ["dgx-a100-01", "gpu-a", "gpu-b"]
    assert set(document["nodes"][1]["gpus"][0]) >= {"index", "utilization_percent", "memory_used_bytes", "lost", "free"}
    assert document["jobs"][0]["kind"] == "training"
    assert any(a["id"] == "fleet_straggler:slurm:4242" and a["severity"] == "warn" for a in document["fleet_advice"])
    util = next(h for h in document["history"] if h["metric"] == "DCGM_FI_DEV_GPU_UTIL")
    assert util["step"] == 1 and len(util["series"]) == 10 and len(util["series"][0]["values"]) == 21


# -- (c) a node that stops reporting -----------------------------------------------------------------------------

def test_killed_node_shows_down_and_keeps_its_last_values():
    require_prometheus()
    alive, doomed = (ExpositionServer({"/metrics": lambda n=n: render(n)}) for n in (
        SimNode("keeper", [SimGpu(0, 80, 1000)]), SimNode("victim", [SimGpu(0, 77, 5000), SimGpu(1, 66, 5000)])))
    with PrometheusServer([Target(alive.address), Target(doomed.address)]) as prometheus:
        source = ClusterSource(prometheus.url, history_seconds=HISTORY)
        frame = poll_until(source, lambda f: len(f.nodes) == 2 and all(n.up for n in f.nodes))
        assert [n.host for n in frame.nodes] == ["keeper", "victim"]
        doomed.close()
        killed = time.time()
        frame = poll_until(source, lambda f: not f.nodes[1].up, timeout=15)
        victim = frame.nodes[1]
        assert not victim.up and victim.note is not None and victim.note.startswith("down since ")
        assert frame.nodes[0].up
        assert [(g.index, g.utilization_percent) for g in victim.gpus] == [(0, 77), (1, 66)]
        assert victim.last_seen is not None and victim.last_seen <= killed + 1
        assert "fleet_nodes_down" in [a.id for a in frame.fleet_advice]
        # A fresh source (a new gpusight --cluster) never saw it alive and still shows it, from the charts.
        fresh = ClusterSource(prometheus.url, history_seconds=HISTORY).poll()
        assert [(n.host, n.up) for n in fresh.nodes] == [("keeper", True), ("victim", False)]
        assert [(g.index, g.utilization_percent) for g in fresh.nodes[1].gpus] == [(0, 77), (1, 66)]
        down = run_cli("--cluster", prometheus.url, "--once", "--cluster-history", str(HISTORY))
        assert down.returncode == 0
        assert "victim  DOWN  gpusight --serve  2 GPUs  (down since" in down.stdout
        assert "1 node not reporting" in down.stdout
    alive.close()


def test_a_node_silent_longer_than_the_history_becomes_a_target_down():
    require_prometheus()
    alive, doomed = (ExpositionServer({"/metrics": lambda n=n: render(n)}) for n in (
        SimNode("keeper", [SimGpu(0, 80, 1000)]), SimNode("victim", [SimGpu(0, 77, 5000)])))
    with PrometheusServer([Target(alive.address), Target(doomed.address, instance="victim:9401")]) as prometheus:
        source = ClusterSource(prometheus.url, history_seconds=6)
        poll_until(source, lambda f: len(f.nodes) == 2 and all(n.up for n in f.nodes))
        doomed.close()
        frame = poll_until(source, lambda f: [n.host for n in f.nodes] == ["keeper"], timeout=30)
        assert [n.host for n in frame.nodes] == ["keeper"]
        assert "targets down, no GPU data seen from them: victim:9401" in frame.problems
    alive.close()


def test_hostile_names_from_exporters_are_escaped_in_the_table():
    require_prometheus()
    evil = SimNode("evil\x1b]0;pwned\x07\u202enode", [SimGpu(0, 50, 1000)], jobs=[SimJob(1, "slurm:1\x1b[2J")],
                   processes=[SimProcess(1, "0", 0, "\x1b[31mred\x9b1m", user="u\x07ser", sm=50)])
    weird = (b'DCGM_FI_DEV_GPU_UTIL{gpu="\xc2\xb2",Hostname="weird"} 5\n'
             b'DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="weird"} NaN\n'
             b'gpusight_job_info{Hostname="weird",gpusight_job="\xc2\xb2",kind="bogus"} 1\n'
             b'gpusight_advice{Hostname="weird",advice="x",severity="apocalyptic"} 1\n')
    server = ExpositionServer({"/metrics": lambda: render(evil), "/weird": lambda: weird})
    with PrometheusServer([Target(server.address), Target(server.address, "/weird", "weird")]) as prometheus:
        poll_until(ClusterSource(prometheus.url, history_seconds=HISTORY), lambda f: len(f.processes) == 1)
        result = run_cli("--cluster", prometheus.url, "--once", "--cluster-history", str(HISTORY))
    server.close()
    assert result.returncode == 0, result.stderr
    assert "evil?node  up  gpusight --serve" in result.stdout
    assert "weird  up  dcgm-exporter  1 GPU, 0 free\n" in result.stdout and "    0    N/A" in result.stdout  # NaN is unknown
    assert "INFO     weird: x" in result.stdout  # an unknown severity reads as info
    assert "red" in result.stdout and "slurm:1" in result.stdout
    assert not any(c in result.stdout for c in "\x1b\x07\x9b\u202e")


def test_incremental_range_queries_match_a_full_fetch_and_cost_less():
    require_prometheus()
    moving = SimNode("mover", [SimGpu(i) for i in range(4)], gpusight=False)

    def body() -> bytes:
        for gpu in moving.gpus:
            gpu.util = (time.time() * 7 + gpu.index * 13) % 100
            gpu.fb_used_mib = (time.time() * 50) % 70000
        return render(moving)

    server = ExpositionServer({"/metrics": body})
    with PrometheusServer([Target(server.address)]) as prometheus:
        time.sleep(HISTORY + 2)  # a full window of data
        now = time.time()
        moment = [now - 6]
        cached = ClusterSource(prometheus.url, history_seconds=HISTORY, clock=lambda: moment[0])
        cached.poll()
        moment[0] = now  # the same source, 6 s later
        later = cached.poll()
        incremental = {expr: size for expr, _, size in cached.last_stats.per_query}
        fresh = ClusterSource(prometheus.url, history_seconds=HISTORY, clock=lambda: now)
        full = fresh.poll()
        whole = {expr: size for expr, _, size in fresh.last_stats.per_query}
    server.close()
    for metric in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED"):
        a = next(h for h in later.history if h.metric == metric)
        b = next(h for h in full.history if h.metric == metric)
        assert (a.start, a.step) == (b.start, b.step)
        assert a.series == b.series and len(a.series) == 4
        assert sum(v is not None for v in a.series[("mover", 0)]) >= 10
        query = next(expr for expr in whole if metric in expr and expr.startswith("max by (Hostname"))
        assert incremental[query] < whole[query]  # 16 of 21 points: the 6 s since the last poll and a 10 s overlap


def test_real_published_dcgm_exporter_output_is_read_by_its_names():
    """tests/data/dcgm-exporter/metrics.txt: lines of real scrapes users published (Hostname and hostname)."""
    require_prometheus()
    sample = (REPO / "tests" / "data" / "dcgm-exporter" / "metrics.txt").read_bytes()
    server = ExpositionServer({"/metrics": lambda: sample})
    with PrometheusServer([Target(server.address)]) as prometheus:
        frame = poll_until(ClusterSource(prometheus.url, history_seconds=HISTORY), lambda f: len(f.nodes) == 2)
    server.close()
    nodes = {node.host: node for node in frame.nodes}
    assert sorted(nodes) == ["dcgm-exporter-wwwjh", "r6i3n0"]  # the old and the new spelling of the label
    v100 = nodes["r6i3n0"].gpus[0]
    assert (v100.index, v100.utilization_percent, v100.model) == (0, 0, "Tesla V100-SXM2-32GB")
    assert v100.uuid == "GPU-a6158b59-2c1e-1e63-0068-9178c4298abd" and v100.memory_used_bytes is None
    ada = nodes["dcgm-exporter-wwwjh"].gpus[0]
    assert (ada.index, ada.temperature_celsius, ada.utilization_percent) == (1, 44, None)
    assert "no DCGM_FI_DEV_FB_USED from dcgm-exporter-wwwjh, r6i3n0: shown as N/A" in frame.problems
