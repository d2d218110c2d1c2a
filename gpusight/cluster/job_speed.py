"""Jobs' speed read back from Prometheus: each node's ``gpusight_job_*`` speed series, then each job across its nodes.

Values from Prometheus are untrusted: a value that is NaN, infinite, negative or beyond what any node could do
is unknown (None, :func:`gpusight.metric_ranges.plausible`), a utilization name other than MFU/HFU is dropped with its FLOP/s, and a node's achieved FLOP/s
above its peak are dropped too. A job's figures across nodes follow :mod:`gpusight.facts.speed`: steps per second
of the slowest node, samples, tokens and FLOP/s summed, utilization = summed achieved over summed peaks of the
nodes that report both; a node that reports nothing is left out, never counted as 0.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from gpusight import metric_names as m
from gpusight.cluster.frame import ClusterJob, ClusterJobSpeed
from gpusight.cluster.prom import Series
from gpusight.facts.speed import sum_known
from gpusight.metric_ranges import plausible
from gpusight.trainer_record import BREAKDOWN_PARTS

SPEED_METRICS = (m.JOB_STEPS, m.JOB_SAMPLES, m.JOB_TOKENS, m.JOB_FLOPS, m.JOB_PEAK_FLOPS, m.JOB_STEP_TIME)
"""The speed families the cluster view reads (MFU is recomputed from the FLOP/s and peaks, so it sums across nodes)."""

UTILIZATION_NAMES = ("MFU", "HFU")
"""The ``utilization`` label values believed."""

PARTS_SUM_TOLERANCE = 2.0
"""How far from 100 % a node's step-time parts may sum (rounding) before its breakdown is dropped."""

JobKey = tuple[str, str]
"""(host, ``gpusight_job`` label)."""


def read_speeds(by_name: Mapping[str, list[Series]], host_of: Callable[[dict[str, str]], str]) -> dict[JobKey, dict[str, Any]]:
    """Each node's job speed fields (``ClusterJob`` field -> value), keyed by (host, job label)."""
    values: dict[str, dict[JobKey, float]] = {}
    names: dict[JobKey, str] = {}
    parts: dict[JobKey, dict[str, float]] = defaultdict(dict)
    for metric in SPEED_METRICS:
        table = values.setdefault(metric.name, {})
        for series in by_name.get(metric.name, ()):
            labels = series.labels
            key = (host_of(labels), labels.get(m.LABEL_JOB, ""))
            value = plausible(metric.name, series.value)
            if value is None:
                continue
            if metric is m.JOB_STEP_TIME:
                parts[key][labels.get(m.LABEL_STEP_PART, "")] = value
                continue
            if metric in (m.JOB_FLOPS, m.JOB_PEAK_FLOPS):
                name = labels.get(m.LABEL_UTILIZATION, "")
                if name not in UTILIZATION_NAMES:
                    continue
                names[key] = name
            table[key] = value
    keys = set().union(*(table.keys() for table in values.values()), parts.keys())
    return {key: _fields(key, values, names.get(key), parts.get(key, {})) for key in keys}


def _fields(key: JobKey, values: dict[str, dict[JobKey, float]], name: str | None,
            parts: dict[str, float]) -> dict[str, Any]:
    """One node's job speed fields from its plausible values."""
    flops, peak = values[m.JOB_FLOPS.name].get(key), values[m.JOB_PEAK_FLOPS.name].get(key)
    if flops is None or not peak or flops > peak:
        flops = peak = name = None
    breakdown = None
    if set(parts) == set(BREAKDOWN_PARTS) and abs(sum(parts.values()) - 100.0) <= PARTS_SUM_TOLERANCE:
        breakdown = tuple((part, parts[part]) for part in BREAKDOWN_PARTS)
    return {
        "steps_per_second": values[m.JOB_STEPS.name].get(key),
        "samples_per_second": values[m.JOB_SAMPLES.name].get(key),
        "tokens_per_second": values[m.JOB_TOKENS.name].get(key),
        "flops_per_second": flops,
        "peak_flops_per_second": peak,
        "utilization_name": name,
        "step_time_percent": breakdown,
    }


def job_key(job: ClusterJob) -> str:
    """The key a job's parts share across nodes: its cluster key, else ``HOST/jobN``."""
    return job.cluster_job or f"{job.host}/job{job.job}"


def speed_across(key: str, parts: Sequence[ClusterJob]) -> ClusterJobSpeed:
    """The speed of the job ``key`` whose parts on its nodes are ``parts``."""
    reporting = [job for job in parts if job.steps_per_second is not None]
    rated = [job for job in parts if job.flops_per_second is not None and job.peak_flops_per_second]
    achieved = sum_known(job.flops_per_second for job in rated)
    peak = sum_known(job.peak_flops_per_second for job in rated)
    profiled = [job.step_time_percent for job in parts if job.step_time_percent is not None]
    breakdown = None
    if profiled:
        breakdown = tuple((part, sum(node[i][1] for node in profiled) / len(profiled))
                          for i, part in enumerate(BREAKDOWN_PARTS))
    return ClusterJobSpeed(
        key=key,
        hosts=tuple(sorted({job.host for job in parts})),
        reporting_hosts=tuple(sorted({job.host for job in reporting})),
        steps_per_second=min((job.steps_per_second for job in reporting if job.steps_per_second is not None),
                             default=None),
        samples_per_second=sum_known(job.samples_per_second for job in parts),
        tokens_per_second=sum_known(job.tokens_per_second for job in parts),
        flops_per_second=achieved,
        peak_flops_per_second=peak,
        flops_utilization_percent=None if achieved is None or not peak else achieved / peak * 100.0,
        utilization_name=None if not rated else ("HFU" if any(j.utilization_name == "HFU" for j in rated) else "MFU"),
        step_time_percent=breakdown,
    )


def job_speeds(jobs: Iterable[ClusterJob]) -> tuple[ClusterJobSpeed, ...]:
    """The speed across nodes of every job with a node whose ranks report steps per second, by key."""
    by_key: dict[str, list[ClusterJob]] = defaultdict(list)
    for job in jobs:
        by_key[job_key(job)].append(job)
    speeds = [speed_across(key, parts) for key, parts in sorted(by_key.items())]
    return tuple(speed for speed in speeds if speed.reporting_hosts)
