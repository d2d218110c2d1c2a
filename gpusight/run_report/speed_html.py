"""The report's "Training speed" section: per job its throughput, MFU (or HFU) and step-time breakdown over the run."""

from __future__ import annotations

from typing import Any

from gpusight.run_report.markup import chart, chart_slot, esc, rounded
from gpusight.run_report.summary import JobRun, RunSummary
from gpusight.run_report.training import BREAKDOWN_LABELS, Figures, JobSpeedRun
from gpusight.snapshot.model import FlopsSource
from gpusight.units import NA

PART_COLOURS = dict(zip(BREAKDOWN_LABELS, ("#c53030", "#2f855a", "#2b6cb0", "#b7791f", "#a0aec0"), strict=True))
"""The colour of each step-time part, in the charts and the bars."""

ROWS = (  # (figure, label, unit)
    ("steps_per_second", "Steps/s", ""),
    ("samples_per_second", "Samples/s", ""),
    ("tokens_per_second", "Tokens/s", ""),
    ("flops_utilization_percent", "{name}", "%"),
    ("achieved_tflops", "Achieved TFLOP/s", ""),
)
"""The figures of a job's table, in order; ``{name}`` is MFU or HFU."""

_CHARTS = (  # (id suffix, figure, title, unit, colour, decimals)
    ("steps", "steps_per_second", "Steps per second", "steps/s", "#2b6cb0", 3),
    ("samples", "samples_per_second", "Samples per second", "samples/s", "#2f855a", 1),
    ("tokens", "tokens_per_second", "Tokens per second", "tokens/s", "#6b46c1", 0),
    ("utilization", "flops_utilization_percent", "{name}", "%", "#c53030", 2),
)

FLOPS_SOURCES = {
    str(FlopsSource.COUNTED): "counted by FlopCounterMode, recomputation included: HFU",
    str(FlopsSource.GIVEN): "given by the user: MFU",
    str(FlopsSource.ESTIMATE_6N): "the 6·N·tokens estimate: MFU",
}
"""How each FLOPs source reads, with the utilization it names."""

NO_SPEED = ("No job in this run reports its training speed. Instrument the training loop with gpusight.torch "
            "(watch(loader), or its Hugging Face or Lightning callback) and record again.")
"""What the section says when no job reported speed."""


def number(value: float | None) -> str:
    """A speed figure: three significant figures below 1,000, whole numbers with thousands separators above."""
    if value is None:
        return NA
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def flops_text(value: float | None) -> str:
    """FLOPs per step in scientific notation, e.g. ``1.23e+12``."""
    return NA if value is None else f"{value:.3g}"


def shown_charts(speed: JobSpeedRun) -> list[tuple[str, str, str, str, str, int]]:
    """The charts of a job: steps/s and the utilization always (N/A says why), samples/s and tokens/s when reported."""
    return [c for c in _CHARTS if c[1] in speed.series or c[0] in ("steps", "utilization")]


def speed_jobs(summary: RunSummary) -> list[tuple[int, JobRun, JobSpeedRun]]:
    """The jobs with speed, with their position in ``summary.jobs`` (which names their charts)."""
    return [(n, job, job.speed) for n, job in enumerate(summary.jobs) if job.speed is not None]


def job_title(job: JobRun) -> str:
    """``Job 3 (training) on GPUs 0,1, ranks 0,1``."""
    gpus = ",".join(map(str, job.devices)) or NA
    ranks = f", ranks {','.join(map(str, job.ranks))}" if job.ranks else ""
    return f"Job {job.id} ({job.kind}) on GPUs {gpus}{ranks}"


def sources_line(speed: JobSpeedRun) -> str:
    """FLOPs per step, peak and math mode with their sources, as HTML."""
    def names(values: tuple[str, ...]) -> str:
        return esc(", ".join(values)) if values else NA

    peak = NA if speed.peak_tflops is None else f"{number(speed.peak_tflops)} TFLOP/s summed over the ranks"
    parts = [
        f"FLOPs per step (per rank): <b>{esc(flops_text(speed.flops_per_step))}</b> (source: "
        f"{esc(', '.join(FLOPS_SOURCES.get(n, n) for n in speed.flops_sources) or NA)})",
        f"peak: <b>{esc(peak)}</b> (source: {names(speed.peak_sources)})",
        f"math mode: <b>{names(speed.math_modes)}</b>",
        f"batch size from: {names(speed.batch_size_sources)}",
    ]
    if speed.figures["flops_utilization_percent"].mean is None:
        parts.append(f"{esc(speed.utilization_name)} N/A: {names(speed.utilization_notes)}")
    return "; ".join(parts) + "."


def breakdown_bar(breakdown: tuple[tuple[str, float], ...]) -> str:
    """The average step-time breakdown as one stacked bar with its shares written out."""
    spans = "".join(
        f'<span class="part" style="width:{percent:.2f}%;background:{PART_COLOURS[label]}" '
        f'title="{esc(label)} {percent:.1f}%"></span>'
        for label, percent in breakdown
    )
    legend = " ".join(
        f'<span class="item"><span class="swatch" style="background:{PART_COLOURS[label]}"></span>{esc(label)} '
        f"{percent:.1f}%</span>"
        for label, percent in breakdown
    )
    return f'<div class="stack">{spans}</div><p class="legend">{legend}</p>'


def _figures_row(label: str, unit: str, figures: Figures) -> str:
    cells = "".join(f"<td>{esc(number(v))}{unit if v is not None else ''}</td>"
                    for v in (figures.mean, figures.median, figures.p10, figures.p90))
    return f"<tr><th>{esc(label)}</th>{cells}</tr>"


def _job_block(n: int, job: JobRun, speed: JobSpeedRun) -> str:
    rows = "".join(
        _figures_row(label.format(name=speed.utilization_name), unit, speed.figures[name])
        for name, label, unit in ROWS if speed.figures[name].seconds > 0
        or name in ("steps_per_second", "flops_utilization_percent")
    )
    if speed.breakdown is not None:
        source = ", ".join(speed.breakdown_sources) or NA
        breakdown = (f"<h4>Step-time breakdown, averaged over the run (measured from: {esc(source)})</h4>"
                     f"{breakdown_bar(speed.breakdown)}")
    else:
        breakdown = "<p>Step-time breakdown: not measured (the profiler sampling of gpusight.torch was off).</p>"
    charts = "".join(chart_slot(f"job{n}-{suffix}") for suffix, *_ in shown_charts(speed)) + chart_slot(f"job{n}-breakdown")
    return (f'<div class="job" id="speed-job{n}"><h3>{esc(job_title(job))}</h3>'
            f"<table class=\"figures\"><thead><tr><th></th><th>Mean</th><th>Median</th><th>p10</th><th>p90</th></tr>"
            f"</thead><tbody>{rows}</tbody></table><p>{sources_line(speed)}</p>{breakdown}"
            f'<div class="charts">{charts}</div></div>')


def speed_section(summary: RunSummary) -> str:
    """The section's HTML."""
    blocks = "".join(_job_block(n, job, speed) for n, job, speed in speed_jobs(summary))
    omitted = summary.speed_jobs_omitted
    more = f'<p class="note">{omitted} more jobs reported speed; not kept.</p>' if omitted else ""
    return f"""<section id="speed"><h2>Training speed</h2>
<p class="note">Per job, as its ranks report it through gpusight.torch: steps/s of the slowest rank, samples/s and
tokens/s summed over the ranks, and MFU (HFU when the FLOPs were counted as they ran): the ranks' achieved FLOP/s
over their peak FLOP/s. Means and percentiles are weighted by time (percentiles to 1 %).</p>
{blocks or f"<p>{esc(NO_SPEED)}</p>"}{more}</section>"""


def speed_charts(summary: RunSummary) -> list[dict[str, Any]]:
    """The charts of the section, as the page's script reads them (a stacked chart for the breakdown)."""
    charts = []
    for n, _, speed in speed_jobs(summary):
        for suffix, figure, title, unit, colour, decimals in shown_charts(speed):
            name = title.format(name=speed.utilization_name)
            charts.append(chart(f"job{n}-{suffix}", name, unit, ((figure, name, colour),), speed.series, 1.0,
                                decimals))
        charts.append(_stacked(f"job{n}-breakdown", speed))
    return charts


def _stacked(chart_id: str, speed: JobSpeedRun) -> dict[str, Any]:
    """The breakdown over the run: each part's mean share per bucket, stacked in ``BREAKDOWN_LABELS`` order."""
    layers = []
    below: list[float | None] | None = None
    for label in BREAKDOWN_LABELS:
        if label not in speed.series:
            continue
        share = speed.series[label][1]
        top = share if below is None else [None if a is None or b is None else a + b for a, b in zip(below, share,
                                                                                                     strict=True)]
        layers.append({"label": label, "colour": PART_COLOURS[label], "share": rounded(share, 1.0, 1),
                       "top": rounded(top, 1.0, 2)})
        below = top
    missing = [] if layers else ["breakdown"]
    return {"id": chart_id, "title": "Step-time breakdown", "unit": "%", "stacked": True, "series": layers,
            "missing": missing, "percent": True}
