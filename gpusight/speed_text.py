"""How a trainer's or a job's speed is written: throughput, MFU or HFU, and the step-time breakdown.

The process table, ``gpusight --once`` and other text views write speed with these functions, so they agree.
Pure text: this module imports neither Textual nor Rich. The values come from outside (a trainer's status
record); they are numbers, checked finite here, and the one free text shown (why a utilization is unknown)
goes through :func:`~gpusight.textsafe.safe_text`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from gpusight.facts.speed import BREAKDOWN_FIELDS, JobSpeed, utilization_name
from gpusight.snapshot.model import BreakdownSource, ProcessSample
from gpusight.textsafe import safe_text
from gpusight.units import NA

_SCALES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def fmt_count(value: float | None) -> str:
    """A count (per second) with an SI suffix and about two significant figures: ``980``, ``9.3k``, ``37k``,
    ``1.2M``; ``N/A`` for None, a negative or a non-finite value."""
    if value is None or not math.isfinite(value) or value < 0:
        return NA
    for scale, suffix in _SCALES:
        if value >= scale * 0.9995:
            scaled = value / scale
            return f"{scaled:.1f}{suffix}" if scaled < 9.95 else f"{scaled:.0f}{suffix}"
    return f"{value:.1f}" if value < 9.95 else f"{value:.0f}"


def fmt_share(value: float | None) -> str:
    """A utilization or share in percent: one decimal below 10 (``4.8%``), whole above (``45%``)."""
    if value is None or not math.isfinite(value):
        return NA
    return f"{value:.1f}%" if abs(value) < 9.95 else f"{value:.0f}%"


def throughput_text(tokens_per_second: float | None, samples_per_second: float | None, compact: bool = False) -> str:
    """Tokens per second where the batch holds token ids, else samples per second, saying which:
    ``9.3k tokens/s`` or ``980 samples/s`` (``compact``: ``9.3k tok``, ``980 smp``); ``N/A`` when neither is a
    known figure."""
    for value, unit, short in ((tokens_per_second, " tokens/s", " tok"), (samples_per_second, " samples/s", " smp")):
        text = fmt_count(value)
        if text != NA:
            return text + (short if compact else unit)
    return NA


def utilization_text(percent: float | None, name: str) -> str:
    """``45% MFU`` or ``4.8% HFU``; ``N/A`` when unknown."""
    return NA if percent is None or not math.isfinite(percent) else f"{fmt_share(percent)} {name}"


def process_utilization(process: ProcessSample) -> str:
    """The process's FLOPs utilization named as its FLOPs source names it (``45% MFU``, ``12% HFU``), or ``N/A``."""
    return utilization_text(process.flops_utilization_percent, utilization_name(process))


def utilization_reason(process: ProcessSample) -> str:
    """Why the process's MFU (or HFU) is unknown, e.g. ``MFU N/A: no peak for 'GPU X'``; "" when it is known or
    the process reports nothing about it."""
    if process.flops_utilization_percent is not None or not process.flops_utilization_note:
        return ""
    return f"{utilization_name(process)} N/A: {safe_text(process.flops_utilization_note, 80)}"


def breakdown_text(parts: Sequence[tuple[str, float]]) -> str:
    """A step-time breakdown on one line: ``data wait 2%, compute 89%, communication 6%, H2D copy 1%, idle 2%``."""
    return ", ".join(f"{label} {fmt_share(value)}" for label, value in parts)


def process_breakdown(process: ProcessSample) -> tuple[tuple[str, float], ...] | None:
    """The process's step-time breakdown as (label, percent) pairs; None when no step was profiled."""
    values = [getattr(process, name) for name, _ in BREAKDOWN_FIELDS]
    if any(value is None for value in values):
        return None
    return tuple((label, value) for (_, label), value in zip(BREAKDOWN_FIELDS, values, strict=True))


BREAKDOWN_SOURCES: dict[BreakdownSource | None, str] = {
    BreakdownSource.DEVICE: "step on the GPU",
    BreakdownSource.HOST: "step as the host sees it (no CUDA)",
    None: "step",
}
"""How a breakdown is introduced, by what it was measured from (None: a job's ranks averaged)."""


def speed_line(
    steps_per_second: float | None,
    tokens_per_second: float | None,
    samples_per_second: float | None,
    utilization: str,
    breakdown: Sequence[tuple[str, float]] | None,
    source: BreakdownSource | None = None,
) -> str:
    """One line of speed: ``1.1 steps/s, 37k tokens/s, 45% MFU; step on the GPU: data wait 2%, compute 89%, ...``."""
    parts = [f"{fmt_count(steps_per_second)} steps/s"]
    if tokens_per_second is not None or samples_per_second is not None:
        parts.append(throughput_text(tokens_per_second, samples_per_second))
    parts.append(utilization)
    line = ", ".join(parts)
    if breakdown:
        line += f"; {BREAKDOWN_SOURCES[source]}: {breakdown_text(breakdown)}"
    return line


def job_speed_line(speed: JobSpeed) -> str:
    """A job's speed on one line (:func:`speed_line`), its steps the slowest rank's and its throughput summed."""
    return speed_line(
        speed.steps_per_second, speed.tokens_per_second, speed.samples_per_second,
        utilization_text(speed.flops_utilization_percent, speed.utilization_name), speed.breakdown,
    )


def process_speed_line(process: ProcessSample) -> str:
    """A trainer's own speed on one line (:func:`speed_line`), its utilization's reason when unknown."""
    utilization = process_utilization(process)
    reason = utilization_reason(process)
    if reason:
        utilization = reason
    return speed_line(process.steps_per_second, process.tokens_per_second, process.samples_per_second, utilization,
                      process_breakdown(process), process.breakdown_source)


def reports_speed(process: ProcessSample) -> bool:
    """True when the process reports its throughput or its FLOPs utilization (or why that is unknown) from inside
    its training loop (``gpusight.torch``); a step rate alone is not enough."""
    return any(
        value is not None
        for value in (process.samples_per_second, process.tokens_per_second, process.flops_utilization_percent,
                      process.flops_utilization_note)
    )
