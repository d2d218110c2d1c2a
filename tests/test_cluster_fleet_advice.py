"""Fleet advice rules on windows of range-query data: tables of cases, each able to fail."""

from dataclasses import replace

import pytest

from gpusight.cluster.fleet_advice import (
    FleetThresholds,
    RankLoad,
    free_gpus,
    idle_holding,
    judge_free,
    nodes_down,
    stragglers,
    window,
)
from gpusight.cluster.frame import ClusterGpu, ClusterHistory, ClusterJob, ClusterNode, ClusterProcess
from gpusight.cluster.job_speed import job_speeds
from gpusight.cluster.speed_advice import input_bound_jobs
from gpusight.snapshot.model import Severity, WorkloadKind

TH = FleetThresholds(window_seconds=10.0)
"""10 points of 1 s."""


def history(metric: str, **series: list[float | None]) -> ClusterHistory:
    """A 1 s history whose keys are ``host_gpu`` names, e.g. ``a_0``."""
    keyed = {(name.rsplit("_", 1)[0], int(name.rsplit("_", 1)[1])): tuple(values) for name, values in series.items()}
    return ClusterHistory(metric=metric, start=0.0, step=1.0, series=keyed)


IDLE = [0.0] * 20
BUSY = [90.0] * 20
BLIP = [0.0] * 15 + [60.0] + [0.0] * 4
HELD = [20000.0] * 20
EMPTY = [300.0] * 20


@pytest.mark.parametrize(("name", "util", "memory", "raised"), [
    ("idle holding memory", IDLE, HELD, True),
    ("busy holding memory", BUSY, HELD, False),
    ("a blip of work inside the window", BLIP, HELD, False),
    ("idle but a blip older than the window", [60.0] + [0.0] * 19, HELD, True),
    ("idle, memory below the floor", IDLE, EMPTY, False),
    ("memory freed within the window", IDLE, [20000.0] * 15 + [300.0] * 5, False),
    ("too few samples in the window", [None] * 14 + [0.0] * 6, HELD, False),
    ("a missed scrape", [0.0] * 17 + [None] + [0.0] * 2, HELD, True),
    ("half the scrapes missed", [0.0, None] * 10, HELD, False),
])
def test_idle_holding(name, util, memory, raised):
    advice = idle_holding(history("u", a_3=util), history("m", a_3=memory), {"a"}, [], TH)
    assert bool(advice) is raised, name
    if raised:
        assert advice[0].id == "fleet_idle_holding:a/gpu3"
        assert advice[0].severity is Severity.WARN
        assert "19.5 GiB" in advice[0].title
        assert "while 19.5 GiB stayed allocated" in advice[0].evidence


def test_idle_holding_names_the_processes_and_skips_down_nodes():
    processes = [ClusterProcess(host="a", job=1, rank="0", gpu=3, name="jupyter-kernel")]
    advice = idle_holding(history("u", a_3=IDLE, b_0=IDLE), history("m", a_3=HELD, b_0=HELD), {"a"}, processes, TH)
    assert [a.id for a in advice] == ["fleet_idle_holding:a/gpu3"]
    assert "jupyter-kernel" in advice[0].evidence


def ranks(job: str, loads: dict[tuple[str, int], float]) -> list[RankLoad]:
    return [RankLoad(job, host, gpu, str(i), load, "SM") for i, ((host, gpu), load) in enumerate(loads.items())]


@pytest.mark.parametrize(("name", "loads", "raised"), [
    ("one slow rank on another node", {("a", 0): 92, ("a", 1): 90, ("b", 0): 91, ("b", 1): 35}, True),
    ("all even", {("a", 0): 92, ("a", 1): 90, ("b", 0): 91, ("b", 1): 88}, False),
    ("a small gap", {("a", 0): 92, ("a", 1): 90, ("b", 0): 91, ("b", 1): 80}, False),
    ("an idle job", {("a", 0): 10, ("a", 1): 9, ("b", 0): 11, ("b", 1): 1}, False),
    ("one node only", {("a", 0): 92, ("a", 1): 90, ("a", 2): 91, ("a", 3): 30}, False),
])
def test_stragglers(name, loads, raised):
    advice = stragglers(ranks("slurm:7", loads), TH)
    assert bool(advice) is raised, name
    if raised:
        assert advice[0].id == "fleet_straggler:slurm:7"
        assert "rank 3 on b GPU 1" in advice[0].evidence
        assert "gap 56 points" in advice[0].evidence


def test_stragglers_judge_each_job_apart():
    loads = ranks("pod:ns/a", {("a", 0): 90, ("b", 0): 90, ("c", 0): 20}) + \
        ranks("pod:ns/b", {("a", 1): 20, ("b", 1): 20})
    assert [a.id for a in stragglers(loads, TH)] == ["fleet_straggler:pod:ns/a"]


def node(host: str, gpus: int, up: bool = True, note: str | None = None) -> ClusterNode:
    """A node whose GPUs are idle and empty right now (their histories say whether they were for the window)."""
    return ClusterNode(host=host, instances=(host,), up=up, exporter="gpusight", note=note,
                       gpus=tuple(ClusterGpu(host=host, index=i, utilization_percent=0.0, memory_used_bytes=0)
                                  for i in range(gpus)))


def test_free_gpus_counts_per_node_in_one_line():
    util = history("u", a_0=IDLE, a_1=IDLE, a_2=BUSY, b_0=IDLE, c_0=IDLE, d_0=IDLE)
    memory = history("m", a_0=EMPTY, a_1=EMPTY, a_2=HELD, b_0=EMPTY, c_0=EMPTY, d_0=EMPTY)
    nodes = [node("a", 3), node("b", 1), node("c", 1, up=False), node("d", 1)]
    processes = [ClusterProcess(host="d", job=1, rank="0", gpu=0)]  # starting up: no memory yet
    judged = judge_free(nodes, util, memory, processes, TH)
    assert [[gpu.free for gpu in n.gpus] for n in judged] == [[True, True, False], [True], [False], [False]]
    advice = free_gpus(judged, TH)
    assert len(advice) == 1
    assert advice[0].id == "fleet_free_gpus" and advice[0].severity is Severity.INFO
    assert advice[0].title == "3 GPUs free on 2 nodes"
    assert advice[0].evidence.startswith("a: 2, b: 1 ")


def test_free_gpus_line_stays_compact_for_a_hundred_nodes():
    names = [f"n{i:03d}" for i in range(100)]
    util = history("u", **{f"{n}_{g}": IDLE for n in names for g in range(8)})
    memory = history("m", **{f"{n}_{g}": EMPTY for n in names for g in range(8)})
    advice = free_gpus(judge_free([node(n, 8) for n in names], util, memory, [], TH), TH)
    assert advice[0].title == "800 GPUs free on 100 nodes"
    assert "(+92 more)" in advice[0].evidence
    assert len(advice[0].evidence) < 200


@pytest.mark.parametrize(("name", "now", "util", "memory", "free"), [
    ("idle and empty now and all along", {}, IDLE, EMPTY, True),
    ("work finished a moment ago: idle now, busy in the window", {}, [90.0] * 15 + [0.0] * 5, EMPTY, False),
    ("memory freed a moment ago", {}, IDLE, [20000.0] * 15 + [300.0] * 5, False),
    ("work started since the last step: busy now", {"utilization_percent": 80.0}, IDLE, EMPTY, False),
    ("memory taken since the last step", {"memory_used_bytes": 4 << 30}, IDLE, EMPTY, False),
    ("utilization unknown now", {"utilization_percent": None}, IDLE, EMPTY, False),
    ("memory unknown now", {"memory_used_bytes": None}, IDLE, EMPTY, False),
    ("the GPU stopped answering", {"lost": True}, IDLE, EMPTY, False),
    ("too few samples in the window", {}, [None] * 14 + [0.0] * 6, EMPTY, False),
])
def test_judge_free_needs_idle_and_empty_now_and_over_the_window(name, now, util, memory, free):
    gpu = ClusterGpu(host="a", index=0, utilization_percent=0.0, memory_used_bytes=0)
    nodes = [ClusterNode(host="a", instances=("a",), up=True, exporter="dcgm", gpus=(replace(gpu, **now),))]
    judged = judge_free(nodes, history("u", a_0=util), history("m", a_0=memory), [], TH)
    assert judged[0].gpus[0].free is free, name
    assert judged[0].free_gpus == int(free)
    assert bool(free_gpus(judged, TH)) is free


@pytest.mark.parametrize(("states", "title"), [
    ([True, True], None),
    ([True, False], "1 node not reporting"),
    ([False, False], "2 nodes not reporting"),
])
def test_nodes_down(states, title):
    nodes = [node(f"n{i}", 1, up=up, note=None if up else "down since 12:00:00") for i, up in enumerate(states)]
    advice = nodes_down(nodes)
    assert (advice[0].title if advice else None) == title
    if advice:
        assert "(down since 12:00:00)" in advice[0].evidence


def test_window_needs_coverage():
    h = history("u", a_0=[None] * 5 + [1.0] * 5)
    assert window(h, ("a", 0), TH) is None
    assert window(h, ("a", 0), FleetThresholds(window_seconds=5.0)) == [1.0] * 5
    assert window(h, ("b", 0), TH) is None


def _part(host: str, data: float, key: str | None = "slurm:9", steps: float | None = 2.0) -> ClusterJob:
    """A node's part of a job whose ranks wait ``data`` percent of each step for data."""
    parts = (("data", data), ("compute", 90.0 - data), ("communication", 10.0), ("copy", 0.0), ("idle", 0.0))
    return ClusterJob(host=host, job=1, kind=WorkloadKind.TRAINING, cluster_job=key, steps_per_second=steps,
                      step_time_percent=parts)


@pytest.mark.parametrize(("jobs", "expected"), [
    ([_part("a", 50.0), _part("b", 10.0)], ["fleet_input_bound:slurm:9"]),
    ([_part("a", 29.0), _part("b", 10.0)], []),  # below the input-bound threshold everywhere
    ([_part("a", 60.0, key=None)], []),  # one node: the node's own advice says it
    ([_part("a", 50.0), _part("b", 10.0, steps=None)], []),  # one node reporting speed: not across nodes
])
def test_input_bound_jobs_across_nodes(jobs: list[ClusterJob], expected: list[str]) -> None:
    advice = input_bound_jobs(jobs, job_speeds(jobs))
    assert [a.id for a in advice] == expected
    if advice:
        assert advice[0].title.endswith("a waits 50% of each step for data: up to 2.0x steps/s without it")
