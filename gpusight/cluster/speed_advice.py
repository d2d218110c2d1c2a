"""Fleet advice from the speed jobs report across nodes: a job spanning nodes that waits for data, with the gain bound.

In a synchronous job every rank makes the same steps, so the node whose ranks wait longest for their next batch
holds the others back (they wait for it in their collectives). With a step of ``T`` in which that node waits
``d * T`` for data, the job's step cannot get shorter than ``(1 - d) * T`` by removing the waits: at most
``1 / (1 - d)`` times the steps per second (:func:`gpusight.advice.speed.gain_text`, as a node's own advice
says it). The shares are each node's step-time breakdown as ``gpusight.torch``
measures it (averaged over the node's profiled ranks), read at the poll: already a rolling measurement, not a blip.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from gpusight.advice.config import Thresholds
from gpusight.advice.speed import gain_text
from gpusight.cluster.fleet_advice import listed
from gpusight.cluster.frame import ClusterJob, ClusterJobSpeed
from gpusight.cluster.job_speed import job_key
from gpusight.cluster.job_speed_text import job_utilization, steps_text
from gpusight.snapshot.model import Advice, Severity
from gpusight.textsafe import safe_text

INPUT_WAIT_PERCENT = Thresholds().input_wait_percent
"""A node of the job waiting at least this share of each step for data makes the job input-bound (as on one node)."""

KEY_WIDTH = 40
"""Longest job key in a title."""


def _share(job: ClusterJob, part: str) -> float | None:
    """The node's share of step time in ``part``; None when not profiled."""
    return None if job.step_time_percent is None else dict(job.step_time_percent).get(part)


def input_bound_jobs(jobs: Iterable[ClusterJob], speeds: Sequence[ClusterJobSpeed],
                     threshold: float = INPUT_WAIT_PERCENT) -> list[Advice]:
    """``fleet_input_bound`` for each job whose ranks report speed on 2+ nodes, one of which waits for data at least
    ``threshold`` percent of each step."""
    parts: dict[str, list[ClusterJob]] = defaultdict(list)
    for job in jobs:
        if _share(job, "data") is not None:
            parts[job_key(job)].append(job)
    advice = []
    for speed in speeds:
        nodes = sorted(parts.get(speed.key, ()), key=lambda job: (-(_share(job, "data") or 0.0), job.host))
        if len(speed.reporting_hosts) < 2 or not nodes:
            continue
        worst = nodes[0]
        share = _share(worst, "data") or 0.0
        if share < threshold:
            continue
        key, host = safe_text(speed.key, KEY_WIDTH), safe_text(worst.host, KEY_WIDTH)
        waits = listed([f"{safe_text(job.host, KEY_WIDTH)} {_share(job, 'data'):.0f}%" for job in nodes])
        comm = listed([f"{safe_text(job.host, KEY_WIDTH)} {_share(job, 'communication') or 0.0:.0f}%" for job in nodes])
        advice.append(Advice(
            id=f"fleet_input_bound:{speed.key}", severity=Severity.WARN, scope=speed.key,
            title=f"{key} is input-bound: {host} waits {share:.0f}% of each step for data: {gain_text(share)}",
            evidence=f"step time measured by gpusight.torch: data wait {waits}; communication {comm}; the job runs "
                     f"{steps_text(speed.steps_per_second)}, {job_utilization(speed)} across "
                     f"{len(speed.reporting_hosts)} nodes",
            action=f"Feed {host} first (more DataLoader workers, pin_memory, prefetching; gpusight on that node shows "
                   "its DataLoader): every other node waits for it in its collectives.",
        ))
    return advice
