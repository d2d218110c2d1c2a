"""Two runs side by side (``gpusight --report A B``): their main training jobs matched, figures as A, B and B/A.

The main job of a run is its training job that reports speed with the most GPU-hours (any job reporting speed when
none is labelled training; without speed, the training job with the most GPU-hours). The rows are plain text, so the
HTML and the Markdown of the comparison print the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpusight.run_report.markup import hours
from gpusight.run_report.speed_html import ROWS, flops_text, job_title, number
from gpusight.run_report.summary import GpuSummary, JobRun, RunSummary
from gpusight.run_report.training import BREAKDOWN_LABELS
from gpusight.units import NA, fmt_duration


@dataclass(frozen=True, slots=True)
class Row:
    """One line of the comparison: a label, A's and B's figures as text, and B/A where both are numbers."""

    label: str
    """What is compared."""
    a: str
    """A's figure."""
    b: str
    """B's figure."""
    ratio: float | None
    """B over A; None where either is unknown or A is 0."""
    numeric: bool = True
    """False for a row of names (sources, math modes), which has no ratio."""


@dataclass(frozen=True, slots=True)
class Comparison:
    """Everything the comparison page shows."""

    names: tuple[str, str]
    """The recordings' file names (safe text)."""
    summaries: tuple[RunSummary, RunSummary]
    """A's and B's run summaries."""
    jobs: tuple[JobRun | None, JobRun | None]
    """The matched main job of each run."""
    matching: tuple[str, str]
    """Why each job was picked, or why there is none."""
    job_rows: tuple[Row, ...]
    """Speed, MFU and breakdown of the matched jobs."""
    run_rows: tuple[Row, ...]
    """Time, GPU-hours and busy figures of the whole runs."""
    warnings: tuple[str, ...]
    """What makes the two less comparable (another GPU, MFU against HFU, other FLOPs per step, ...)."""


def main_job(summary: RunSummary) -> tuple[JobRun | None, str]:
    """The run's main training job and why it was picked (or why there is none)."""
    timed = [j for j in summary.jobs if j.speed is not None]
    training = [j for j in timed if j.kind == "training"]
    if training or timed:
        job = max(training or timed, key=lambda j: j.gpu_hours)
        return job, (f"{job_title(job)}: the {'training ' if training else ''}job reporting speed with the most "
                     f"GPU-hours ({len(timed)} reporting speed)")
    trainers = [j for j in summary.jobs if j.kind == "training"]
    if trainers:
        job = max(trainers, key=lambda j: j.gpu_hours)
        return job, f"{job_title(job)}: no job reports its training speed; the training job with the most GPU-hours"
    return None, "no job reports its training speed, and no training job was recognised"


def ratio(a: float | None, b: float | None) -> float | None:
    """``b / a``; None where either is unknown or ``a`` is 0."""
    return None if a is None or b is None or a == 0 else b / a


def ratio_text(row: Row) -> str:
    """``1.32x``; N/A where a figure is unknown; empty for a row of names."""
    if not row.numeric:
        return ""
    return NA if row.ratio is None else f"{row.ratio:.2f}x"


def _number_row(label: str, a: float | None, b: float | None, unit: str = "") -> Row:
    def text(v: float | None) -> str:
        return NA if v is None else f"{number(v)}{unit}"

    return Row(label, text(a), text(b), ratio(a, b))


def _job_rows(a: JobRun | None, b: JobRun | None) -> list[Row]:
    sa, sb = (None if j is None else j.speed for j in (a, b))
    rows = [_number_row("Job GPU-hours", None if a is None else a.gpu_hours, None if b is None else b.gpu_hours)]
    names = list(dict.fromkeys(s.utilization_name for s in (sa, sb) if s is not None))  # A's, then B's if other
    for figure, label, unit in ROWS:
        name = label.format(name="/".join(names) or "MFU")
        for statistic in ("median", "p10", "p90"):
            va, vb = (None if s is None else getattr(s.figures[figure], statistic) for s in (sa, sb))
            if va is not None or vb is not None:
                rows.append(_number_row(f"{name} {statistic}", va, vb, unit))
    fa, fb = (None if s is None else s.flops_per_step for s in (sa, sb))
    rows.append(Row("FLOPs per step (per rank)", flops_text(fa), flops_text(fb), ratio(fa, fb)))
    for label, attribute in (("FLOPs source", "flops_sources"), ("Peak source", "peak_sources"),
                             ("Math mode", "math_modes"), ("Breakdown measured from", "breakdown_sources")):
        na, nb = (NA if s is None else ", ".join(getattr(s, attribute)) or NA for s in (sa, sb))
        rows.append(Row(label, na, nb, None, numeric=False))
    rows.append(_number_row("Peak TFLOP/s (summed over ranks)", None if sa is None else sa.peak_tflops,
                            None if sb is None else sb.peak_tflops))
    shares = [dict(s.breakdown) if s is not None and s.breakdown is not None else {} for s in (sa, sb)]
    for part in BREAKDOWN_LABELS:
        if shares[0] or shares[1]:
            rows.append(_number_row(f"Step time: {part}", shares[0].get(part), shares[1].get(part), "%"))
    return rows


def _mean_over_gpus(gpus: tuple[GpuSummary, ...], attribute: str) -> float | None:
    """A GPU figure averaged over the GPUs that reported it, weighted by their reported hours."""
    weighted = [(getattr(g, attribute), g.reported_hours) for g in gpus if getattr(g, attribute) is not None]
    total = sum(w for _, w in weighted)
    return sum(v * w for v, w in weighted) / total if total > 0 else None


def _run_rows(a: RunSummary, b: RunSummary) -> list[Row]:
    rows = [
        Row("Recorded", fmt_duration(a.covered_seconds), fmt_duration(b.covered_seconds),
            ratio(a.covered_seconds, b.covered_seconds)),
        Row("GPUs", str(len(a.gpus)), str(len(b.gpus)), ratio(len(a.gpus), len(b.gpus))),
    ]
    held = [sum(p.gpu_hours for p in s.processes) for s in (a, b)]
    rows.append(Row("GPU-hours held by processes", hours(held[0]), hours(held[1]), ratio(*held)))
    rows.append(Row("Idle GPU-hours", hours(a.idle_gpu_hours), hours(b.idle_gpu_hours),
                    ratio(a.idle_gpu_hours, b.idle_gpu_hours)))
    for label, attribute in (("Mean util", "mean_util"), ("Mean SM active", "mean_sm_active"),
                             ("Mean tensor active", "mean_tensor_active")):
        rows.append(_number_row(f"{label} (over GPUs)", _mean_over_gpus(a.gpus, attribute),
                                _mean_over_gpus(b.gpus, attribute), "%"))
    rows.append(_number_row("Highest p95 util", max((g.p95_util for g in a.gpus if g.p95_util is not None),
                                                    default=None),
                            max((g.p95_util for g in b.gpus if g.p95_util is not None), default=None), "%"))
    return rows


def _warnings(a: RunSummary, b: RunSummary, ja: JobRun | None, jb: JobRun | None) -> list[str]:
    warnings = []
    names = [{g.name for g in s.gpus if g.name} for s in (a, b)]
    if names[0] and names[1] and names[0] != names[1]:
        warnings.append(f"the GPUs differ: A {', '.join(sorted(names[0]))}; B {', '.join(sorted(names[1]))}")
    sa, sb = (None if j is None else j.speed for j in (ja, jb))
    if sa is not None and sb is not None:
        if sa.utilization_name != sb.utilization_name:
            warnings.append(f"A's utilization is {sa.utilization_name} and B's {sb.utilization_name}: counted FLOPs "
                            "include recomputation, so the two are not the same measure")
        fa, fb = sa.flops_per_step, sb.flops_per_step
        if fa and fb and abs(fb / fa - 1) > 0.01:
            warnings.append(f"FLOPs per step differ ({flops_text(fa)} and {flops_text(fb)}): another model, batch or "
                            "sequence length, so steps/s alone does not compare the two")
        if sa.math_modes != sb.math_modes:
            warnings.append(f"math modes differ (A {', '.join(sa.math_modes) or NA}, B {', '.join(sb.math_modes) or NA})"
                            ": the peaks the utilization divides by differ")
    for label, job in (("A", ja), ("B", jb)):
        if job is None or job.speed is None:
            warnings.append(f"{label}: no job reports its training speed (instrument the loop with gpusight.torch); "
                            "only the busy figures compare")
    return warnings


def compare(a: RunSummary, b: RunSummary, names: tuple[str, str]) -> Comparison:
    """The comparison of run ``a`` with run ``b`` (``names``: their file names, made safe by the caller)."""
    (ja, why_a), (jb, why_b) = main_job(a), main_job(b)
    return Comparison(names, (a, b), (ja, jb), (why_a, why_b), tuple(_job_rows(ja, jb)), tuple(_run_rows(a, b)),
                      tuple(_warnings(a, b, ja, jb)))
