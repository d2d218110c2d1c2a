"""The cluster view's MIG instances, GPU health and drain advice, end to end: a real Prometheus scrapes a real
``gpusight --serve --replay`` of hand-built snapshots (tests/support/health_fleet.py) and a dcgm-exporter node in
its MIG shape (tests/data/cluster/dcgm-exporter-mig-health.txt); ``ClusterSource`` and ``gpusight --cluster
--once/--json`` read both."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_cluster_tui_pty import visible

from gpusight import metric_names as m
from gpusight.cluster.frame import ClusterFrame, ClusterNode
from gpusight.cluster.source import DEVICE_QUERY, ClusterSource
from support.exporter import serving
from support.exposition import ExpositionServer
from support.health_fleet import MIG_PIDS, write_fleet_recording
from support.prometheus import PrometheusServer, Target, require_prometheus
from support.terminal import PtyTerminal, gpusight_argv

REPO = Path(__file__).resolve().parents[1]
DCGM_MIG = REPO / "tests" / "data" / "cluster" / "dcgm-exporter-mig-health.txt"
HISTORY = "20"


@pytest.fixture(scope="module")
def prometheus_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require_prometheus()
    recording = write_fleet_recording(tmp_path_factory.mktemp("fleet") / "node-07.jsonl", time.time(), 180)
    sample = DCGM_MIG.read_bytes()
    server = ExpositionServer({"/metrics": lambda: sample})
    try:
        with serving(["--replay", str(recording), "--loop", "--hostname", "node-07"]) as exporter, \
                PrometheusServer([Target(exporter.url.split("://", 1)[1], instance="node-07:9401"),
                                  Target(server.address, instance="10.0.0.7:9400")]) as prometheus:
            yield prometheus.url
    finally:
        server.close()


def _poll(url: str) -> ClusterFrame:
    source = ClusterSource(url, history_seconds=float(HISTORY))
    deadline = time.monotonic() + 30
    frame = source.poll()
    while time.monotonic() < deadline and not (len(frame.nodes) == 2 and frame.processes
                                               and all(n.gpus and n.gpus[0].mig for n in frame.nodes)
                                               and any(g.lost for n in frame.nodes for g in n.gpus)):
        time.sleep(0.5)
        frame = source.poll()
    return frame


@pytest.fixture(scope="module")
def frame(prometheus_url: str) -> ClusterFrame:
    return _poll(prometheus_url)


def _node(frame: ClusterFrame, host: str) -> ClusterNode:
    return next(node for node in frame.nodes if node.host == host)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "gpusight", *args], capture_output=True, text=True, env=env,
                          timeout=60, check=False)


def test_mig_instances_are_listed_under_their_gpu_from_both_exporters(frame) -> None:
    ours = _node(frame, "node-07").gpus[0]
    assert [(g.gpu_instance_id, g.profile) for g in ours.mig][:2] == [(1, "3g.40gb"), (2, "2g.20gb")]
    assert [g.gpu_instance_id for g in ours.mig] == [1, 2, 5]
    assert ours.mig[0].memory_used_bytes == 1 << 30 and ours.mig[0].memory_total_bytes == 10 << 30
    assert ours.mig[0].sm_active_percent == pytest.approx(50.0)
    assert ours.mig[1].sm_active_percent is None  # no GPM figure: N/A, never 0 and never the parent's
    dcgm = _node(frame, "dgx-a100-07").gpus[0]
    assert [(g.gpu_instance_id, g.profile) for g in dcgm.mig] == [(1, "3g.40gb"), (2, "2g.20gb"), (5, "1g.10gb")]
    assert dcgm.mig[0].memory_used_bytes == 30120 << 20 and dcgm.mig[0].memory_total_bytes == (30120 + 10350) << 20
    assert dcgm.mig[0].tensor_active_percent == pytest.approx(41.2)
    assert dcgm.memory_used_bytes is None  # the instances' memory is never summed into, or taken for, the parent's


def test_processes_are_placed_on_their_instance(frame) -> None:
    placed = {p.name: (p.gpu, p.gpu_instance_id) for p in frame.processes}
    assert placed == {f"train{gi}": (0, gi) for gi in MIG_PIDS}


def test_health_per_gpu_from_both_exporters(frame) -> None:
    ours = {g.index: g.health for g in _node(frame, "node-07").gpus}
    assert {i: h is not None and h.needs_drain for i, h in ours.items()} == {0: False, 1: True, 2: True, 3: True,
                                                                               4: False, 5: True}
    assert _node(frame, "node-07").gpus[5].lost and ours[5] is not None and ours[5].findings[0].key == "xid79"
    assert ours[4] is not None and ours[4].score == 100
    assert ours[1].findings[0].key == "xid48"  # the last Xid, at the time gpusight --serve received it
    assert _node(frame, "node-07").gpus[4].decoder_percent == 95.0
    dcgm = {g.index: g.health for g in _node(frame, "dgx-a100-07").gpus}
    assert dcgm[0] is not None and dcgm[0].score == 100
    assert dcgm[1] is not None and dcgm[1].needs_drain and dcgm[1].findings[0].key == "xid79"


def test_fleet_advice_names_the_node_and_the_gpu(frame) -> None:
    drains = {a.id: a for a in frame.fleet_advice if a.id.startswith("fleet_drain:")}
    assert sorted(drains) == ["fleet_drain:dgx-a100-07/gpu1", "fleet_drain:node-07/gpu1", "fleet_drain:node-07/gpu2",
                              "fleet_drain:node-07/gpu3", "fleet_drain:node-07/gpu5"]
    assert drains["fleet_drain:node-07/gpu5"].title == "drain gpu5 on node-07: Xid 79: GPU has fallen off the bus"
    assert all(a.severity == "critical" for a in drains.values())
    assert drains["dgx-a100-07/gpu1".join(("fleet_drain:", ""))].title.startswith(
        "drain gpu1 on dgx-a100-07: Xid 79: ")
    assert drains["fleet_drain:node-07/gpu2"].title == "drain gpu2 on node-07: row remap pending: reset needed"
    assert drains["fleet_drain:node-07/gpu3"].title.startswith("drain gpu3 on node-07: PCIe link degraded")
    assert "Gen3 x8 (can run Gen5 x16)" in drains["fleet_drain:node-07/gpu3"].evidence
    assert list(frame.fleet_advice[:5]) == list(drains.values())  # critical first
    free = {(g.host, g.index) for n in frame.nodes for g in n.gpus if g.free}
    assert not free & {("node-07", 1), ("node-07", 2), ("node-07", 3)}


def test_cluster_once_shows_instances_badges_and_advice(prometheus_url: str, frame) -> None:
    result = _cli("--cluster", prometheus_url, "--once", "--cluster-history", HISTORY)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "node-07  up  gpusight --serve  6 GPUs" in out and "4 GPUs to drain" in out
    assert "1 GPU to drain" in out  # dgx-a100-07
    lines = out.splitlines()
    gpu0 = next(i for i, line in enumerate(lines) if line.startswith("    0 ") and "node-07" in "".join(lines[:i][-3:]))
    assert lines[gpu0 + 1].lstrip().startswith("MIG 1 3g.40gb") and "train1" in lines[gpu0 + 1]
    assert "SM 50%" in lines[gpu0 + 1]
    assert lines[gpu0 + 3].lstrip().startswith('MIG 5 1g.10gb"?') and "\x1b" not in out
    assert sum("DRAIN" in line.split() for line in lines) == 5
    assert "DEC 95%" in out
    assert "CRITICAL drain gpu1 on node-07: Xid 48: " in out


def test_cluster_json_carries_instances_and_health(prometheus_url: str) -> None:
    result = _cli("--cluster", prometheus_url, "--json", "--cluster-history", HISTORY)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    node = next(n for n in document["nodes"] if n["host"] == "node-07")
    assert [m["gpu_instance_id"] for m in node["gpus"][0]["mig"]] == [1, 2, 5]
    health = node["gpus"][2]["health"]
    assert health["score"] == 50 and health["findings"][0]["level"] == "drain"


def test_health_costs_no_query_of_its_own_and_a_healthy_gpu_one_series(prometheus_url: str) -> None:
    source = ClusterSource(prometheus_url, history_seconds=float(HISTORY))
    source.poll()
    assert source.last_stats.requests == 6  # as before: MIG and health ride in the device query
    answer = source.client.query(DEVICE_QUERY, at=time.time())
    health = {metric.name for metric in (*m.HEALTH_METRICS, *m.VIDEO_METRICS, m.XID_LAST_TIME)}

    def served(gpu: str) -> set[str]:
        return {s.labels["__name__"] for s in answer if s.labels.get(m.LABEL_HOSTNAME) == "node-07"
                and s.labels.get(m.LABEL_GPU) == gpu and s.labels["__name__"] in health}

    assert served("0") == {m.XID_ERRORS.name, m.ECC_SBE_AGG.name}  # healthy: the rest are 0 and stay home
    assert served("3") == {m.XID_ERRORS.name, m.ECC_SBE_AGG.name, m.PCIE_REPLAY.name, m.PCIE_LINK_GEN.name,
                           m.PCIE_LINK_WIDTH.name, m.PCIE_MAX_LINK_GEN.name, m.PCIE_MAX_LINK_WIDTH.name}
    assert served("4") == {m.XID_ERRORS.name, m.ECC_SBE_AGG.name, m.DEC_UTIL.name}


@pytest.mark.parametrize("size", [(160, 45), (80, 24)])
def test_the_cluster_tui_lists_instances_and_drain_badges(prometheus_url: str, size: tuple[int, int]) -> None:
    argv = gpusight_argv("--cluster", prometheus_url, "--interval", "1", "--cluster-history", HISTORY)
    env = dict(os.environ, GPUSIGHT_PARTIAL_OUTPUT="0")  # whole changed lines keep the words whole in the bytes
    with PtyTerminal(argv, size, env=env) as term:
        screen = lambda: visible(bytes(term.output))  # noqa: E731 - read again on every check
        term.wait_for(lambda: "4 GPUs to drain" in screen(), "node-07's drain count on its host row", 60)
        term.wait_for(lambda: "1 GPU to drain" in screen(), "dgx-a100-07's drain count", 30)
        term.wait_for(lambda: "MIG 1 3g.40gb" in screen(), "a MIG instance under its GPU", 30)
        if size[0] >= 120:
            term.wait_for(lambda: "DRAIN Xid 79" in screen(), "the drain badge naming the Xid", 30)
            term.wait_for(lambda: "train1" in screen(), "the instance's process", 30)
        mark = len(term.output)
        for key in b"/node-07\r":  # typed, not pasted: the filter must get every key
            term.send(bytes([key]))
            time.sleep(0.15)
        time.sleep(0.5)
        term.send(b"\r")  # the cursor is on node-07's row: its screen
        after = lambda: visible(bytes(term.output[mark:]))  # noqa: E731
        # HEALTH heads the host screen's GPU table alone: its rows (the drain badges, the MIG rows) come after it
        host_screen = lambda: after().split("HEALTH", 1)[-1] if "HEALTH" in after() else ""  # noqa: E731
        term.wait_for(lambda: "DRAIN" in host_screen() and "MIG 5" in host_screen(), "the host screen's GPUs", 30)
        assert "Traceback" not in screen()
        assert term.quit() == 0
