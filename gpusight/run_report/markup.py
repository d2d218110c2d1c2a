"""Pieces of the report's HTML shared by its sections: escaping, times, GPU-hours and the charts' JSON."""

from __future__ import annotations

import html
import math
from datetime import datetime, timezone
from typing import Any

from gpusight.units import NA

TEXT_LENGTH = 300
"""Command lines, titles, evidence and notes are cut to this many characters when taken in from a recording."""

Columns = tuple[list[float | None], list[float | None], list[float | None]]
"""A series' (min, mean, max) per bucket."""


def esc(text: object) -> str:
    """Text for HTML content or a quoted attribute."""
    return html.escape(str(text), quote=True)


def when(timestamp: float | None) -> str:
    """A time in UTC, e.g. ``2026-11-23 19:42:05``."""
    if timestamp is None:
        return NA
    return datetime.fromtimestamp(timestamp, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def hours(value: float) -> str:
    """GPU-hours with a precision that suits their size."""
    return f"{value:.2f}" if value >= 0.1 else f"{value:.3f}"


def percentile_text(value: float | None) -> str:
    """A percentile of utilization, to 0.1 %."""
    return NA if value is None else f"{value:.1f}%"


def rounded(values: list[float | None], divisor: float, decimals: int) -> list[float | None]:
    """``values`` divided by ``divisor`` and rounded to ``decimals``; None for unknown and non-finite ones."""
    return [None if v is None or not math.isfinite(v) else round(v / divisor, decimals) for v in values]


def chart(chart_id: str, title: str, unit: str, lines: tuple[tuple[str, str, str], ...],
           metrics: dict[str, Columns],
           divisor: float, decimals: int) -> dict[str, Any]:
    """A chart as the page's script reads it: per line of ``lines`` (metric, label, colour) its (min, mean, max)
    columns from ``metrics``, scaled; lines whose metric is absent are named as not reported."""
    shown, missing = [], []
    for metric, label, colour in lines:
        if metric in metrics:
            low, mean, high = metrics[metric]
            shown.append({"label": label, "colour": colour, "min": rounded(low, divisor, decimals),
                          "mean": rounded(mean, divisor, decimals), "max": rounded(high, divisor, decimals)})
        else:
            missing.append(label)
    return {"id": chart_id, "title": title, "unit": unit, "series": shown, "missing": missing,
            "percent": unit == "%"}


def chart_slot(chart_id: str) -> str:
    """The element a chart is drawn into."""
    return f'<div class="chart" id="chart-{esc(chart_id)}"></div>'
