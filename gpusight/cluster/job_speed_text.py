"""A job's speed across nodes as text, the same in ``--cluster --once``, the cluster view and fleet advice.

Written with :mod:`gpusight.speed_text`, as the process table and ``--once`` write one node's speed, so the figures
read alike everywhere; the job's key (from the exporters) goes through ``safe_text``.
"""

from __future__ import annotations

from gpusight.cluster.counts import counted
from gpusight.cluster.frame import ClusterJobSpeed
from gpusight.facts.speed import BREAKDOWN_FIELDS
from gpusight.speed_text import fmt_count, speed_line, utilization_text
from gpusight.textsafe import safe_text
from gpusight.trainer_record import BREAKDOWN_PARTS
from gpusight.units import NA

KEY_WIDTH = 40
"""Longest job key shown."""

PETA_FROM = 1e16
"""Peaks from this many FLOP/s up are written in PFLOP/s (``12 of 32 PFLOP/s``), smaller ones in TFLOP/s."""

PART_LABELS = {part: label for part, (_field, label) in zip(BREAKDOWN_PARTS, BREAKDOWN_FIELDS, strict=True)}
"""Step-time part (the ``part`` label) -> the label the breakdown is shown under (``data`` -> ``data wait``)."""


def steps_text(steps_per_second: float | None) -> str:
    """``1.6 steps/s``; ``N/A`` when unknown."""
    count = fmt_count(steps_per_second)
    return NA if count == NA else f"{count} steps/s"


def job_utilization(speed: ClusterJobSpeed) -> str:
    """The job's ``39% MFU`` (or HFU) across its nodes; ``N/A`` while no node reports FLOP/s and a peak."""
    return utilization_text(speed.flops_utilization_percent, speed.utilization_name or "MFU")


def labelled(parts: tuple[tuple[str, float], ...] | None) -> tuple[tuple[str, float], ...] | None:
    """Step-time parts under the labels a breakdown is shown with."""
    return None if parts is None else tuple((PART_LABELS.get(part, part), percent) for part, percent in parts)


def cluster_speed_line(speed: ClusterJobSpeed) -> str:
    """``slurm:77  3 nodes (2 reporting)  540 of 1.4k TFLOP/s  1.6 steps/s, 236k tokens/s, 39% MFU; step: ...``
    (FLOP/s achieved of the peak, summed over the nodes reporting both)."""
    nodes = counted(len(speed.hosts), "node")
    if len(speed.reporting_hosts) < len(speed.hosts):
        nodes += f" ({len(speed.reporting_hosts)} reporting)"
    flops = ""
    if speed.flops_per_second is not None and speed.peak_flops_per_second is not None:
        scale, unit = (1e15, "PFLOP/s") if speed.peak_flops_per_second >= PETA_FROM else (1e12, "TFLOP/s")
        flops = f"  {fmt_count(speed.flops_per_second / scale)} of {fmt_count(speed.peak_flops_per_second / scale)} {unit}"
    line = speed_line(speed.steps_per_second, speed.tokens_per_second, speed.samples_per_second,
                      job_utilization(speed), labelled(speed.step_time_percent))
    return f"{safe_text(speed.key, KEY_WIDTH)}  {nodes}{flops}  {line}"
