"""Advice about a whole fleet, from windows of range-query data (never one instant, so a blip raises nothing).

Rules and their thresholds (:class:`FleetThresholds`, documented in docs/cluster.md):

- ``fleet_idle_holding:HOST/gpuN`` (warn): over the last ``window_seconds`` the GPU's utilization never rose
  above ``idle_util_percent`` while its framebuffer stayed at or above ``idle_memory_floor_mib``.
- ``fleet_straggler:CLUSTER_JOB`` (warn): a job spanning two or more nodes (the ``cluster_job`` label) whose
  slowest rank's load, averaged over the window, is at most ``straggler_ratio`` of the median rank's and
  ``straggler_min_gap`` points below it, while the median is at least ``straggler_min_median``. The load is the
  process's SM % where every rank has it (``gpusight_process_sm_percent``), else its GPU's utilization.
- ``fleet_free_gpus`` (info): the GPUs :func:`judge_free` marks free; one line counting them per node.
- ``fleet_nodes_down`` (warn): nodes whose targets are down or whose samples stopped; one line naming them.
- ``fleet_drain:HOST/gpuN`` (critical): :func:`gpusight.cluster.health.drain_gpus`, from each GPU's health.

A window counts only when at least ``min_coverage`` of its points have samples.

A GPU is *free* (:func:`judge_free`, the one definition the cluster view's header, host rows and advice all count)
when its node is up, it answers, its health does not say drain, no process is reported on it (on nodes without
``gpusight --serve``, where processes are unknown, this part is skipped), and its utilization is at most ``idle_util_percent`` and its memory
at most ``free_memory_mib``, both now and at every sample of the window; an unknown value or a window with too few
samples never counts as free.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from gpusight.cluster.counts import counted
from gpusight.cluster.frame import ClusterGpu, ClusterHistory, ClusterNode, ClusterProcess
from gpusight.snapshot.model import Advice, Severity

MIB = 1 << 20
"""Bytes in a MiB (dcgm-exporter's framebuffer unit)."""

DEFAULT_WINDOW_SECONDS = 60.0
"""The window the fleet rules judge unless told otherwise."""

LISTED_NODES = 8
"""Nodes named in one line of fleet advice before the rest are counted."""


@dataclass(frozen=True, slots=True)
class FleetThresholds:
    """The thresholds of the fleet rules."""

    window_seconds: float = DEFAULT_WINDOW_SECONDS
    """The window every rule judges, ending now."""
    min_coverage: float = 0.75
    """Share of the window's points that must have samples for the window to count."""
    idle_util_percent: float = 2.0
    """Utilization at or below this counts as idle."""
    idle_memory_floor_mib: float = 1024.0
    """An idle GPU holding at least this much framebuffer raises ``fleet_idle_holding``."""
    free_memory_mib: float = 512.0
    """A GPU using at most this much framebuffer (and idle, with no process) counts as free."""
    straggler_ratio: float = 0.6
    """The slowest rank's load at most this share of the median's is a straggler..."""
    straggler_min_gap: float = 15.0
    """... when it is also at least this many points below the median..."""
    straggler_min_median: float = 20.0
    """... and the job is busy: its median rank's load is at least this."""


@dataclass(frozen=True, slots=True)
class RankLoad:
    """One rank of a job spanning nodes and its load averaged over the window."""

    cluster_job: str
    """The key the job has on every node."""
    host: str
    """The rank's node."""
    gpu: int | None
    """Its GPU."""
    rank: str
    """The ``rank`` label."""
    load: float
    """Its SM % or its GPU's utilization (%), averaged over the window."""
    measure: str
    """What ``load`` is: ``"SM"`` or ``"GPU util"``."""


def window(history: ClusterHistory, key: tuple[str, int], thresholds: FleetThresholds) -> list[float] | None:
    """The values of ``key`` in the last ``window_seconds`` of ``history``; None when too few have samples."""
    values = history.series.get(key)
    if values is None:
        return None
    count = max(1, int(round(thresholds.window_seconds / history.step)))
    recent = values[-count:]
    known = [v for v in recent if v is not None]
    if len(recent) < count * thresholds.min_coverage or len(known) < len(recent) * thresholds.min_coverage:
        return None
    return known


def listed(items: Sequence[str]) -> str:
    """``items`` joined, cut after ``LISTED_NODES`` with a count of the rest."""
    shown = ", ".join(items[:LISTED_NODES])
    rest = len(items) - LISTED_NODES
    return f"{shown} (+{rest} more)" if rest > 0 else shown


def idle_holding(util: ClusterHistory, memory: ClusterHistory, up_hosts: set[str],
                 processes: Sequence[ClusterProcess], thresholds: FleetThresholds) -> list[Advice]:
    """``fleet_idle_holding`` for each GPU of an up node idle over the window with memory held (``memory`` in MiB)."""
    names: dict[tuple[str, int], list[str]] = defaultdict(list)
    for process in processes:
        if process.gpu is not None and process.name:
            names[(process.host, process.gpu)].append(process.name)
    advice = []
    for key in sorted(util.series):
        host, gpu = key
        if host not in up_hosts:
            continue
        busy, held = window(util, key, thresholds), window(memory, key, thresholds)
        if busy is None or held is None or max(busy) > thresholds.idle_util_percent:
            continue
        if min(held) < thresholds.idle_memory_floor_mib:
            continue
        gib, most = min(held) / 1024, max(held) / 1024
        amount = f"{gib:.1f} GiB" if f"{gib:.1f}" == f"{most:.1f}" else f"{gib:.1f}-{most:.1f} GiB"
        who = f"; processes: {', '.join(sorted(set(names[key])))}" if names[key] else ""
        advice.append(Advice(
            id=f"fleet_idle_holding:{host}/gpu{gpu}", severity=Severity.WARN, scope=f"{host}/gpu{gpu}",
            title=f"{host} GPU {gpu} idle while holding {gib:.1f} GiB",
            evidence=f"utilization at most {max(busy):.0f}% for the last {thresholds.window_seconds:.0f} s while "
                     f"{amount} stayed allocated{who}",
            action="Free the GPU for others: end the idle process or notebook kernel, or release its cached memory.",
        ))
    return advice


def on_host(advice: Advice, host: str) -> bool:
    """Whether fleet ``advice`` is about one GPU of ``host`` (its scope is ``HOST/gpuN``, as ``idle_holding`` writes)."""
    return advice.scope.startswith(f"{host}/")


def stragglers(ranks: Iterable[RankLoad], thresholds: FleetThresholds) -> list[Advice]:
    """``fleet_straggler`` for each job spanning nodes whose slowest rank lags the median rank."""
    jobs: dict[str, list[RankLoad]] = defaultdict(list)
    for rank in ranks:
        jobs[rank.cluster_job].append(rank)
    advice = []
    for key in sorted(jobs):
        members = jobs[key]
        if len({m.host for m in members}) < 2:
            continue
        median = statistics.median(m.load for m in members)
        slowest = min(members, key=lambda m: (m.load, m.host, m.rank))
        gap = median - slowest.load
        if median < thresholds.straggler_min_median or gap < thresholds.straggler_min_gap:
            continue
        if slowest.load > thresholds.straggler_ratio * median:
            continue
        lagging = [m for m in members if m.load <= thresholds.straggler_ratio * median
                   and median - m.load >= thresholds.straggler_min_gap]
        where = f"{slowest.host} GPU {slowest.gpu if slowest.gpu is not None else '?'}"
        others = f"; {len(lagging) - 1} more ranks lag as well" if len(lagging) > 1 else ""
        advice.append(Advice(
            id=f"fleet_straggler:{key}", severity=Severity.WARN, scope=key,
            title=f"Straggler in {key}: rank {slowest.rank} on {where} at {slowest.load:.0f}% vs {median:.0f}%",
            evidence=f"{slowest.measure} averaged over the last {thresholds.window_seconds:.0f} s: rank {slowest.rank} "
                     f"on {where} {slowest.load:.0f}%, median of {len(members)} ranks on "
                     f"{len({m.host for m in members})} nodes {median:.0f}% (gap {gap:.0f} points){others}",
            action=f"The whole job waits for the slowest rank: check {slowest.host} for throttling, a busy neighbour "
                   "or a slow input pipeline (gpusight on that node shows its DataLoader).",
        ))
    return advice


def _is_free(gpu: ClusterGpu, util: list[float] | None, memory: list[float] | None,
             thresholds: FleetThresholds) -> bool:
    """Whether ``gpu`` (of an up node, with no process, not to be drained) is idle and empty now and over its
    window (MiB)."""
    if gpu.lost or util is None or memory is None or (gpu.health is not None and gpu.health.needs_drain):
        return False
    if gpu.utilization_percent is None or gpu.memory_used_bytes is None:
        return False
    return (max(util + [gpu.utilization_percent]) <= thresholds.idle_util_percent
            and max(memory + [gpu.memory_used_bytes / MIB]) <= thresholds.free_memory_mib)


def judge_free(nodes: Sequence[ClusterNode], util: ClusterHistory, memory: ClusterHistory,
               processes: Sequence[ClusterProcess], thresholds: FleetThresholds) -> tuple[ClusterNode, ...]:
    """``nodes`` with each GPU's ``free`` set by the module's one definition of a free GPU (``memory`` in MiB)."""
    busy = {(p.host, p.gpu) for p in processes}
    judged = []
    for node in nodes:
        gpus = tuple(
            replace(gpu, free=node.up and (node.host, gpu.index) not in busy and _is_free(
                gpu, window(util, (node.host, gpu.index), thresholds),
                window(memory, (node.host, gpu.index), thresholds), thresholds))
            for gpu in node.gpus
        )
        judged.append(replace(node, gpus=gpus))
    return tuple(judged)


def free_gpus(nodes: Sequence[ClusterNode], thresholds: FleetThresholds) -> list[Advice]:
    """One ``fleet_free_gpus`` line counting, per node, the GPUs :func:`judge_free` marked free."""
    counts = {node.host: node.free_gpus for node in nodes if node.free_gpus}
    if not counts:
        return []
    ranked = sorted(counts, key=lambda host: (-counts[host], host))
    total = sum(counts.values())
    return [Advice(
        id="fleet_free_gpus", severity=Severity.INFO, scope="fleet",
        title=f"{counted(total, 'GPU')} free on {counted(len(counts), 'node')}",
        evidence=listed([f"{host}: {counts[host]}" for host in ranked])
                 + f" (idle, at most {thresholds.free_memory_mib:.0f} MiB used, no process, now and for the last "
                   f"{thresholds.window_seconds:.0f} s)",
        action="Schedule waiting work there.",
    )]


def nodes_down(nodes: Sequence[ClusterNode]) -> list[Advice]:
    """One ``fleet_nodes_down`` line naming the nodes that stopped reporting."""
    down = [node for node in nodes if not node.up]
    if not down:
        return []
    return [Advice(
        id="fleet_nodes_down", severity=Severity.WARN, scope="fleet",
        title=f"{counted(len(down), 'node')} not reporting",
        evidence=listed([f"{node.host} ({node.note})" if node.note else node.host for node in down]),
        action="Check those nodes and their exporters; the cluster view keeps their last values.",
    )]
