"""A training job's speed over a run: throughput, MFU (or HFU) and the step-time breakdown, in bounded structures.

Per snapshot the job's figures are those of :func:`gpusight.facts.speed.job_speed` (steps per second of the
slowest rank, samples, tokens and FLOP/s summed over the ranks, utilization as summed achieved over summed peak,
the ranks' breakdowns averaged); nothing here aggregates ranks another way. Over the run each figure is kept as a
time-weighted mean, a time-weighted histogram in bins 1 % wide (for the median, p10 and p90) and a
:class:`~gpusight.run_report.series.BucketSeries` on the report's shared grid (for the charts).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from gpusight.facts.speed import BREAKDOWN_FIELDS, JobSpeed, utilization_name
from gpusight.run_report.series import BucketGrid
from gpusight.snapshot.model import ProcessSample
from gpusight.textsafe import safe_text

SPEED_SERIES = ("steps_per_second", "samples_per_second", "tokens_per_second", "flops_utilization_percent",
                "achieved_tflops")
"""The :class:`~gpusight.facts.speed.JobSpeed` figures kept per job (summarised and plotted)."""

BREAKDOWN_LABELS = tuple(label for _, label in BREAKDOWN_FIELDS)
"""The step-time parts, in stacking order."""

MAX_SPEED_JOBS = 16
"""Jobs whose speed is kept (in the order they first report it); later ones are counted."""

MAX_NAMES = 4
"""Distinct sources, math modes and notes kept per job."""

HISTOGRAM_RATIO = 1.01
"""Neighbouring histogram bins differ by this factor, so a percentile is within 1 % of the true value."""

_SMALLEST, _LARGEST = 1e-9, 1e18
"""Values are clamped into this range before binning, which bounds the bins (about 6,300)."""


@dataclass(frozen=True, slots=True)
class Figures:
    """One speed figure over the run, weighted by time; None where it was never reported."""

    mean: float | None
    """Time-weighted mean."""
    p10: float | None
    """10th percentile (to 1 %): the slow stretches."""
    median: float | None
    """Median (to 1 %)."""
    p90: float | None
    """90th percentile (to 1 %)."""
    seconds: float
    """Time it was reported."""


@dataclass(frozen=True, slots=True)
class JobSpeedRun:
    """A job's speed over the run (``JobRun.speed``)."""

    seconds: float
    """Time any speed figure was reported."""
    figures: dict[str, Figures]
    """Per :data:`SPEED_SERIES` name."""
    utilization_name: str
    """``MFU``, or ``HFU`` when the job's FLOPs were ever counted as they ran."""
    flops_per_step: float | None
    """The latest FLOPs per step a rank reported (per rank: each rank works on its own batch)."""
    flops_sources: tuple[str, ...]
    """Where the FLOPs per step came from (``counted``, ``given``, ``6N``)."""
    peak_tflops: float | None
    """The latest peak TFLOP/s summed over the ranks (what the utilization divides by)."""
    peak_sources: tuple[str, ...]
    """Where the peaks came from (safe text: a datasheet, ``given``)."""
    math_modes: tuple[str, ...]
    """Math modes the ranks reported."""
    batch_size_sources: tuple[str, ...]
    """How the samples per step were known (``batch``, ``given``)."""
    utilization_notes: tuple[str, ...]
    """Why the utilization was N/A, as the ranks said (safe text)."""
    breakdown: tuple[tuple[str, float], ...] | None
    """The step-time parts averaged over the time they were measured, (label, percent) in stacking order."""
    breakdown_seconds: float
    """Time the breakdown was measured."""
    breakdown_sources: tuple[str, ...]
    """``device`` (profiler's GPU activities) or ``host`` (no CUDA)."""
    series: dict[str, tuple[list[float | None], list[float | None], list[float | None]]]
    """Per speed figure and per breakdown label that was reported: (min, mean, max) per bucket of the grid."""


class TimeHistogram:
    """Time-weighted values in logarithmic bins :data:`HISTOGRAM_RATIO` apart (zero and below in a bin of their own);
    each bin keeps its time and the time-weighted sum of its values, so a percentile is the mean of its bin's values
    (exact for a steady figure, within 1 % otherwise)."""

    __slots__ = ("_bins", "_sums", "_zero", "_total")

    def __init__(self) -> None:
        self._bins: dict[int, float] = {}
        self._sums: dict[int, float] = {}
        self._zero = 0.0
        self._total = 0.0

    def add(self, value: float, seconds: float) -> None:
        """Count ``value`` for ``seconds``."""
        self._total += seconds
        if value <= 0:
            self._zero += seconds
            return
        index = math.floor(math.log(min(max(value, _SMALLEST), _LARGEST), HISTOGRAM_RATIO))
        self._bins[index] = self._bins.get(index, 0.0) + seconds
        self._sums[index] = self._sums.get(index, 0.0) + value * seconds

    def quantile(self, share: float) -> float | None:
        """The value at or below which ``share`` of the time falls (its bin's mean value); None when empty."""
        if self._total <= 0:
            return None
        target, running = share * self._total - 1e-9, self._zero
        if running >= target:
            return 0.0
        for index in sorted(self._bins):
            running += self._bins[index]
            if running >= target:
                break
        return self._sums[index] / self._bins[index]  # the last bin when rounding left the target just above the total


@dataclass(slots=True)
class _Figure:
    total: float = 0.0
    seconds: float = 0.0
    histogram: TimeHistogram = field(default_factory=TimeHistogram)

    def add(self, value: float, seconds: float) -> None:
        self.total += value * seconds
        self.seconds += seconds
        self.histogram.add(value, seconds)

    def figures(self) -> Figures:
        mean = self.total / self.seconds if self.seconds > 0 else None
        h = self.histogram
        return Figures(mean, h.quantile(0.1), h.quantile(0.5), h.quantile(0.9), self.seconds)


def _note(names: dict[str, None], value: object) -> None:
    """Keep ``value`` (made safe) among at most :data:`MAX_NAMES` distinct names."""
    if value is not None and len(names) < MAX_NAMES:
        names.setdefault(safe_text(str(value), 120))


class JobSpeedAccumulator:
    """One job's speed, snapshot by snapshot."""

    def __init__(self, grid: BucketGrid) -> None:
        self._figures = {name: _Figure() for name in SPEED_SERIES}
        self._series = {name: grid.series() for name in (*SPEED_SERIES, *BREAKDOWN_LABELS)}
        self._parts = {label: 0.0 for label in BREAKDOWN_LABELS}
        self._seconds = 0.0
        self._breakdown_seconds = 0.0
        self._hfu = False
        self._flops_per_step: float | None = None
        self._peak: float | None = None
        self._names: dict[str, dict[str, None]] = {
            key: {} for key in ("flops", "peak", "math", "batch", "note", "breakdown")}
        self._seen: set[tuple[object, ...]] = set()
        """Ranks' sources already noted (at most :data:`MAX_NAMES` kept): noting them again would change nothing."""

    def add(self, speed: JobSpeed, ranks: Sequence[ProcessSample], seconds: float, bucket: int) -> None:
        """Count the job's ``speed`` (from ``job_speed``) and its ``ranks``' sources for ``seconds`` in ``bucket``."""
        self._seconds += seconds
        for name in SPEED_SERIES:
            value = getattr(speed, name)
            if value is not None and math.isfinite(value):
                self._figures[name].add(value, seconds)
                self._series[name].add(bucket, value)
        if speed.flops_utilization_percent is not None:
            self._peak = speed.peak_tflops
        # Named by the FLOPs' source even where the peak is unknown (job_speed names only the ranks it rates).
        self._hfu = self._hfu or speed.utilization_name == "HFU" or any(
            utilization_name(rank) == "HFU" for rank in ranks if rank.flops_source is not None)
        if speed.breakdown is not None:
            self._breakdown_seconds += seconds
            for label, percent in speed.breakdown:
                self._parts[label] += percent * seconds
                self._series[label].add(bucket, percent)
        seen = self._seen
        for rank in ranks:
            self._flops_per_step = rank.flops_per_step if rank.flops_per_step is not None else self._flops_per_step
            sources = (rank.flops_source, rank.peak_source, rank.math_mode, rank.batch_size_source,
                       rank.flops_utilization_note, rank.breakdown_source)
            if sources in seen:  # noted already: the same names again change nothing
                continue
            if len(seen) < MAX_NAMES:
                seen.add(sources)
            for key, value in zip(("flops", "peak", "math", "batch", "note", "breakdown"), sources, strict=True):
                _note(self._names[key], value)

    def run(self, rows: list[int | None]) -> JobSpeedRun:
        """The job's speed over the run, its series read at the report's ``rows``."""
        measured = self._breakdown_seconds
        names = {key: tuple(values) for key, values in self._names.items()}
        return JobSpeedRun(
            seconds=self._seconds,
            figures={name: figure.figures() for name, figure in self._figures.items()},
            utilization_name="HFU" if self._hfu else "MFU",
            flops_per_step=self._flops_per_step,
            flops_sources=names["flops"],
            peak_tflops=self._peak,
            peak_sources=names["peak"],
            math_modes=names["math"],
            batch_size_sources=names["batch"],
            utilization_notes=names["note"],
            breakdown=tuple((label, total / measured) for label, total in self._parts.items()) if measured else None,
            breakdown_seconds=measured,
            breakdown_sources=names["breakdown"],
            series={name: s.columns(rows) for name, s in self._series.items() if s.known},
        )


def reports_speed(speed: JobSpeed) -> bool:
    """True when any rank of the job reported a speed figure or a breakdown."""
    return speed.breakdown is not None or any(getattr(speed, name) is not None for name in SPEED_SERIES)


def publishes_speed(process: ProcessSample) -> bool:
    """True when the process reports any figure ``job_speed`` sums or averages (the others add nothing to a job's
    speed, so the report passes only these to it: a snapshot of many processes without speed costs one check each)."""
    return (process.steps_per_second is not None or process.samples_per_second is not None
            or process.tokens_per_second is not None or process.achieved_tflops is not None
            or process.step_data_percent is not None)

