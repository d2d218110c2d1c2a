"""A training job's speed from its ranks' own figures: throughput, achieved and peak FLOP/s, and MFU (or HFU).

Each rank instrumented with ``gpusight.torch`` reports its steps, samples and tokens per second, its FLOP/s and
the peak of its GPU. A job's samples, tokens and FLOP/s are the sums over its reporting ranks (each rank works on
its own batch); its steps per second are the slowest rank's (in data-parallel training every rank makes the same
steps, and the slowest sets the pace); its utilization is the summed FLOP/s over the summed peaks of the ranks that
report both. Pure functions over snapshot rows; nothing here reads a process.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gpusight.snapshot.model import FlopsSource, JobSample, ProcessRole, ProcessSample

BREAKDOWN_FIELDS: tuple[tuple[str, str], ...] = (
    ("step_data_percent", "data wait"),
    ("step_compute_percent", "compute"),
    ("step_comm_percent", "communication"),
    ("step_copy_percent", "H2D copy"),
    ("step_idle_percent", "idle"),
)
"""The step-time breakdown's ``ProcessSample`` fields in stacking order, with the label each part is shown under."""


@dataclass(frozen=True, slots=True)
class JobSpeed:
    """What a job's ranks report about its speed; every figure is None where no rank reports it."""

    ranks: int
    """GPU processes in the job."""
    reporting: int
    """Ranks that report steps per second (instrumented and iterating)."""
    steps_per_second: float | None
    """The slowest reporting rank's steps per second."""
    samples_per_second: float | None
    """Samples per second summed over the reporting ranks."""
    tokens_per_second: float | None
    """Tokens per second summed over the ranks that count tokens."""
    achieved_tflops: float | None
    """TFLOP/s summed over the ranks that report both FLOP/s and a peak."""
    peak_tflops: float | None
    """The same ranks' peaks, summed."""
    flops_utilization_percent: float | None
    """``achieved_tflops`` over ``peak_tflops``, in percent."""
    utilization_name: str
    """``"MFU"``, or ``"HFU"`` when any rank's FLOPs were counted as they ran (recomputation included)."""
    breakdown: tuple[tuple[str, float], ...] | None
    """The ranks' step-time breakdowns averaged part by part, as (label, percent) in ``BREAKDOWN_FIELDS`` order."""


def sum_known(values: Iterable[float | None]) -> float | None:
    """The sum of the known values; None when none is known."""
    known = [value for value in values if value is not None]
    return sum(known) if known else None


def speed_of(ranks: Sequence[ProcessSample]) -> JobSpeed:
    """The speed of a job made of the GPU processes ``ranks``."""
    rates = [rank.steps_per_second for rank in ranks if rank.steps_per_second is not None]
    rated = [rank for rank in ranks if rank.achieved_tflops is not None and rank.peak_tflops]
    achieved = sum_known(rank.achieved_tflops for rank in rated)
    peak = sum_known(rank.peak_tflops for rank in rated)
    counted = any(rank.flops_source is FlopsSource.COUNTED for rank in rated)
    profiled = [rank for rank in ranks if rank.step_data_percent is not None]
    breakdown = None
    if profiled:
        breakdown = tuple(
            (label, sum(getattr(rank, name) or 0.0 for rank in profiled) / len(profiled))
            for name, label in BREAKDOWN_FIELDS
        )
    return JobSpeed(
        ranks=len(ranks),
        reporting=len(rates),
        steps_per_second=min(rates) if rates else None,
        samples_per_second=sum_known(rank.samples_per_second for rank in ranks),
        tokens_per_second=sum_known(rank.tokens_per_second for rank in ranks),
        achieved_tflops=achieved,
        peak_tflops=peak,
        flops_utilization_percent=None if achieved is None or not peak else achieved / peak * 100.0,
        utilization_name="HFU" if counted else "MFU",
        breakdown=breakdown,
    )


def job_speed(job: JobSample, processes: Iterable[ProcessSample]) -> JobSpeed:
    """The speed of ``job`` from the GPU rows of ``processes`` that belong to it (one row per pid)."""
    members = set(job.pids)
    seen: set[int] = set()
    ranks = []
    for process in processes:
        if process.role == ProcessRole.GPU and process.pid in members and process.pid not in seen:
            seen.add(process.pid)
            ranks.append(process)
    return speed_of(ranks)


def utilization_name(process: ProcessSample) -> str:
    """``"HFU"`` when the process's FLOPs were counted as they ran, ``"MFU"`` otherwise."""
    return "MFU" if process.flops_source is None else process.flops_source.utilization_name
