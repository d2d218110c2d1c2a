"""The fleet simulator (benchmarks/fleet_sim.py) keeps working: a few nodes, a real Prometheus, moving values."""

import sys
import time
from pathlib import Path

from gpusight.cluster.source import ClusterSource
from support.prometheus import require_prometheus

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from fleet_sim import start_fleet  # noqa: E402


def test_a_small_fleet_is_scraped_and_its_values_move():
    require_prometheus()
    fleet = start_fleet(nodes=5, kill_after=None, dcgm_nodes=1)
    try:
        source = ClusterSource(fleet.url, history_seconds=20)
        deadline = time.monotonic() + 30
        seen: list[tuple[float | None, ...]] = []
        while time.monotonic() < deadline and len(set(seen)) < 2:
            frame = source.poll("node-000")
            if len(frame.nodes) == 5:
                seen.append(tuple(g.utilization_percent for n in frame.nodes for g in n.gpus))
            time.sleep(1)
        assert [n.host for n in frame.nodes] == [f"node-{i:03d}" for i in range(5)]
        assert [n.exporter for n in frame.nodes] == ["gpusight"] * 4 + ["dcgm"]
        assert all(len(n.gpus) == 8 and n.up for n in frame.nodes)
        assert {j.cluster_job for j in frame.jobs if j.host in ("node-000", "node-003")} == {"slurm:9001"}
        assert len(set(seen)) >= 2, "the figures did not move between polls"
        [speed] = frame.job_speeds
        assert speed.key == "slurm:9001" and len(speed.reporting_hosts) == 4
        assert 30 < (speed.flops_utilization_percent or 0) < 45
        assert "fleet_input_bound:slurm:9001" in [a.id for a in frame.fleet_advice]
    finally:
        fleet.stop()
