"""The config file's ``[charts]`` section: how long one chart column lasts and how the charts move."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from gpusight.facts.gpu_selection import cut_text
from gpusight.sampling.timegrid import DEFAULT_COLUMN_SECONDS, MAX_COLUMN_SECONDS, MIN_COLUMN_SECONDS

MOTIONS = ("page", "scroll")
"""Ways the charts move: ``page`` jumps a quarter of the width when full, ``scroll`` moves every column."""

DEFAULT_MOTION = "page"
"""How the charts move unless the config says otherwise."""


@dataclass(frozen=True, slots=True)
class ChartSettings:
    """The chart options of the config file."""

    column_seconds: float = DEFAULT_COLUMN_SECONDS
    """Period of one chart column at the closest zoom level, in seconds."""
    motion: str = DEFAULT_MOTION
    """One of :data:`MOTIONS`."""


def chart_settings_from_config(document: dict[str, object], where: str) -> tuple[ChartSettings, list[str]]:
    """The ``[charts]`` table of a parsed config file, and one warning per bad entry (which keeps its default).

    Keys: ``column_seconds`` (a number from :data:`MIN_COLUMN_SECONDS` to :data:`MAX_COLUMN_SECONDS`)
    and ``motion`` (``"page"`` or ``"scroll"``). ``where`` names the file in warnings.
    """
    section = document.get("charts", {})
    if not isinstance(section, dict):
        return ChartSettings(), [f"{where}: [charts] must be a table; chart defaults used"]
    settings, warnings = ChartSettings(), []
    for key, value in section.items():
        problem: str | None = None
        if key == "column_seconds":
            seconds, problem = _column_seconds(value)
            if seconds is not None:
                settings = dataclasses.replace(settings, column_seconds=seconds)
        elif key == "motion":
            if value in MOTIONS:
                settings = dataclasses.replace(settings, motion=str(value))
            else:
                shown = repr(cut_text(value)) if isinstance(value, str) else type(value).__name__
                problem = f"motion must be \"page\" or \"scroll\", not {shown}; default \"{DEFAULT_MOTION}\" kept"
        else:
            problem = f"unknown key {cut_text(str(key))!r}; ignored"
        if problem is not None:
            warnings.append(f"{where}: [charts] {problem}")
    return settings, warnings


def _column_seconds(value: object) -> tuple[float | None, str | None]:
    """``(seconds, None)`` for a usable ``column_seconds``, else ``(None, why not)``."""
    default = f"default {DEFAULT_COLUMN_SECONDS:g} s kept"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None, f"column_seconds must be a number of seconds, not {type(value).__name__}; {default}"
    if not (math.isfinite(value) and MIN_COLUMN_SECONDS <= value <= MAX_COLUMN_SECONDS):
        return None, (
            f"column_seconds must be from {MIN_COLUMN_SECONDS:g} to {MAX_COLUMN_SECONDS:g} seconds, not {value!r}; "
            f"{default}"
        )
    return float(value), None
