"""Real :class:`~gpusight.cluster.frame.ClusterFrame` objects built in code, for driving the cluster view.

Every value is a deterministic function of the host and GPU numbers, so screens are reproducible.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from gpusight.cluster.fleet_advice import FleetThresholds, free_gpus, idle_holding, judge_free, nodes_down
from gpusight.cluster.frame import (
    ClusterFrame,
    ClusterGpu,
    ClusterHistory,
    ClusterJob,
    ClusterNode,
    ClusterProcess,
)
from gpusight.cluster.job_speed import job_speeds
from gpusight.metric_names import FB_USED, GPU_TEMP, GPU_UTIL, PCIE_RX, PCIE_TX, POWER_USAGE
from gpusight.snapshot.model import Advice, Severity, WorkloadKind

URL = "http://prometheus.test:9090"
"""The URL the frames name."""

T0 = 1_700_000_000.0
"""Timestamp of the frames (22:13:20 UTC)."""

GIB = 1024**3
"""Bytes in a GiB."""

TOTAL = 80 * GIB
"""Each GPU's memory."""

POINTS = 60
"""History points per series."""


def gpu(host: int, index: int, *, dcgm: bool = False) -> ClusterGpu:
    """GPU ``index`` of node number ``host``: busy on even GPUs, free on every fourth one."""
    free = index % 4 == 3
    util = 0.0 if free else float((host * 13 + index * 7) % 60 + 40)
    return ClusterGpu(
        host=host_name(host),
        index=index,
        uuid=f"GPU-{host:04d}{index:04d}-0000-0000-0000-000000000000",
        model="NVIDIA H100 80GB HBM3",
        utilization_percent=util,
        memory_used_bytes=0 if free else (20 + (host + index) % 50) * GIB,
        memory_total_bytes=TOTAL,
        power_watts=70.0 if free else 300.0 + util * 3,
        temperature_celsius=35.0 if free else 50.0 + util / 4,
        sm_active_percent=None if dcgm else util * 0.8,
        tensor_active_percent=None if dcgm else util * 0.3,
        pcie_rx_bytes_per_s=2e9 * util / 100,
        pcie_tx_bytes_per_s=1e9 * util / 100,
    )


def host_name(number: int) -> str:
    """``node-003``."""
    return f"node-{number:03d}"


def history(metric: str, hosts: list[int], gpus: int, value: Callable[[int, int, int], float | None]) -> ClusterHistory:
    """``metric`` for every GPU of ``hosts``: ``value(host, gpu, step)`` at each of POINTS steps."""
    return ClusterHistory(
        metric=metric,
        start=T0 - POINTS * 2,
        step=2.0,
        series={(host_name(h), g): tuple(value(h, g, s) for s in range(POINTS)) for h in hosts for g in range(gpus)},
    )


def _wave(h: int, g: int, s: int) -> float:
    """A moving value for busy GPUs; 0 all along for the free ones (every fourth, as in ``gpu``)."""
    return 0.0 if g % 4 == 3 else float((h * 11 + g * 17 + s * 5) % 100)


def histories(hosts: list[int], gpus: int) -> tuple[ClusterHistory, ...]:
    """Util and memory (MiB) histories for all GPUs; power, temperature and PCIe too."""
    return (
        history(GPU_UTIL.name, hosts, gpus, _wave),
        history(FB_USED.name, hosts, gpus, lambda h, g, s: _wave(h, g, s) * 800.0),
        history(POWER_USAGE.name, hosts, gpus, lambda h, g, s: 100 + _wave(h, g, s) * 5),
        history(GPU_TEMP.name, hosts, gpus, lambda h, g, s: 30 + _wave(h, g, s) / 2),
        history(PCIE_RX.name, hosts, gpus, lambda h, g, s: _wave(h, g, s) * 2e7),
        history(PCIE_TX.name, hosts, gpus, lambda h, g, s: None if s < 10 else _wave(h, g, s) * 1e7),
    )


def speed(steps: float, flops: float) -> dict[str, object]:
    """A node's part of a job on 8 H100s (bf16 peak 989 TFLOP/s each) with 8 x 16 samples of 4096 tokens a step."""
    return dict(steps_per_second=steps, samples_per_second=128 * steps, tokens_per_second=128 * 4096 * steps,
                flops_per_second=flops, peak_flops_per_second=8 * 989e12, utilization_name="MFU",
                step_time_percent=(("data", 14.0), ("compute", 70.0), ("communication", 12.0), ("copy", 2.0),
                                   ("idle", 2.0)))


def small_cluster() -> ClusterFrame:
    """Three gpusight nodes (one down), one dcgm-only node, 8 GPUs each, with jobs, processes and advice; node-002's
    GPU 7 sits idle holding 70 GiB. Which GPUs are free and the fleet advice (but the straggler) come from gpusight's
    own rules, so every figure agrees with the others."""
    nodes = [
        ClusterNode(host=host_name(1), instances=("10.0.0.1:9400",), up=True, exporter="gpusight",
                    gpus=tuple(gpu(1, i) for i in range(8)), last_seen=T0, cpu_percent=45.0, iowait_percent=3.0),
        ClusterNode(host=host_name(2), instances=("10.0.0.2:9400",), up=True, exporter="gpusight",
                    gpus=(*(gpu(2, i) for i in range(7)), dataclasses.replace(gpu(2, 7), memory_used_bytes=70 * GIB)),
                    last_seen=T0),
        ClusterNode(host=host_name(3), instances=("10.0.0.3:9400",), up=False, exporter="gpusight",
                    gpus=tuple(gpu(3, i) for i in range(8)), last_seen=T0 - 30,
                    note="down since 14:12:50 (3 scrapes missed)"),
        ClusterNode(host=host_name(4), instances=("10.0.0.4:9400",), up=True, exporter="dcgm",
                    gpus=tuple(gpu(4, i, dcgm=True) for i in range(8)), last_seen=T0),
    ]
    jobs = (
        ClusterJob(host=host_name(1), job=1, kind=WorkloadKind.TRAINING, cluster_job="slurm:4242", world_size=16,
                   memory_bytes=8 * 40 * GIB, **speed(1.25, 3.3e15)),
        ClusterJob(host=host_name(2), job=1, kind=WorkloadKind.TRAINING, cluster_job="slurm:4242", world_size=16,
                   memory_bytes=8 * 40 * GIB, **speed(1.1, 3.0e15)),
        ClusterJob(host=host_name(2), job=2, kind=WorkloadKind.INFERENCE, cluster_job="pod:serving/vllm-0",
                   memory_bytes=70 * GIB),
    )
    processes = tuple(
        ClusterProcess(host=host_name(h), job=1, rank=str((h - 1) * 8 + g), gpu=g, name="python", user="alice",
                       slurm_job_id="4242", memory_bytes=40 * GIB, sm_percent=60.0 + g, cpu_percent=101.0,
                       workers=4, workers_cpu_percent=280.0, input_wait_percent=12.0 + h)
        for h in (1, 2) for g in range(3)
    ) + (
        ClusterProcess(host=host_name(2), job=2, rank="0", gpu=7, name="vllm [red]serve[/]", user="svc\x1b[31m",
                       container="vllm-0", pod="vllm-0", namespace="serving", memory_bytes=70 * GIB, sm_percent=0.0,
                       cpu_percent=50.0),
    )
    node_advice = (
        (host_name(1), Advice(id="input_bound:job1", severity=Severity.WARN, scope="job1",
                              title="Input-bound: GPUs wait for data", evidence="input wait 13% on ranks 0-2",
                              action="raise num_workers")),
        (host_name(2), Advice(id="idle_holder:gpu7", severity=Severity.INFO, scope="gpu7",
                              title="Idle GPU holding memory", evidence="pid 77 holds 70GiB at 0% util",
                              action="free it")),
    )
    util, memory, *others = histories([1, 2, 3, 4], 8)
    memory = dataclasses.replace(memory, series={**memory.series, (host_name(2), 7): (70.0 * 1024,) * POINTS})
    charts = (util, memory, *others)
    judged = judge_free(nodes, util, memory, processes, FleetThresholds())
    fleet_advice = (
        *nodes_down(judged),
        Advice(id="straggler:slurm:4242", severity=Severity.WARN, scope="slurm:4242",
               title="Straggler: node-002 is slower than node-001",
               evidence="node-002 input wait 14% vs 13%; util 61% vs 72%", action="look at node-002's input pipeline"),
        *idle_holding(util, memory, {node.host for node in judged if node.up}, processes, FleetThresholds()),
        *free_gpus(judged, FleetThresholds()),
    )
    return ClusterFrame(
        timestamp=T0,
        url=URL,
        nodes=judged,
        jobs=jobs,
        job_speeds=job_speeds(jobs),
        processes=processes,
        node_advice=node_advice,
        fleet_advice=fleet_advice,
        history=charts,
        problems=("node-003 stopped reporting: 3 scrapes missed",),
        missing_panels=("processes, jobs, advice, host CPU: none from 1 node without gpusight --serve (node-004)",),
        query_seconds=0.21,
    )


def fleet(nodes: int = 100, gpus: int = 8, step: int = 0) -> ClusterFrame:
    """A fleet of ``nodes`` gpusight nodes of ``gpus`` GPUs; ``step`` moves the numbers (a later poll)."""
    hosts = list(range(1, nodes + 1))

    def moved(h: int, i: int) -> ClusterGpu:
        base = gpu(h, i)
        if base.utilization_percent:
            return dataclasses.replace(base, utilization_percent=float((base.utilization_percent + step * 3) % 100))
        return base

    util = history(GPU_UTIL.name, hosts, gpus, lambda h, g, s: _wave(h, g, s + step))
    memory = history(FB_USED.name, hosts, gpus, lambda h, g, s: _wave(h, g, s + step) * 800.0)
    fleet_nodes = tuple(
        ClusterNode(host=host_name(h), instances=(f"10.0.{h // 256}.{h % 256}:9400",), up=True, exporter="gpusight",
                    gpus=tuple(moved(h, i) for i in range(gpus)), last_seen=T0)
        for h in hosts
    )
    judged = judge_free(fleet_nodes, util, memory, (), FleetThresholds())
    return ClusterFrame(
        timestamp=T0 + step * 2,
        url=URL,
        nodes=judged,
        fleet_advice=tuple(free_gpus(judged, FleetThresholds())),
        history=(util, memory),
        query_seconds=0.5,
    )


def unreachable() -> ClusterFrame:
    """What a poll of a server that does not answer returns."""
    return ClusterFrame(timestamp=T0, url=URL, problems=(f"Prometheus at {URL} is unreachable: connection refused",))
