"""Periodic stalls: a GPU whose utilization is a square wave, busy then idle for seconds at a time, at a regular period.

A 100 %/0 % wave of a few seconds each averages about 50 % over a window, which no mean-based rule
calls under-used; the stalls show only in the series itself. This module finds them in a
utilization series and measures what the CPU side did during the stalls and between them.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from itertools import pairwise
from statistics import mean, median, pstdev

from gpusight.advice.config import Thresholds


@dataclass(frozen=True, slots=True)
class Stalls:
    """Regular stalls found in a window of a GPU's utilization."""

    count: int
    """Stalls found (a stall at the window's start, whose beginning is unseen, is not counted)."""
    period_s: float
    """Median time from one stall's start to the next."""
    stall_s: float
    """Median length of a stall."""
    share_percent: float
    """Share of the window's samples that are stalled."""
    busy_util: float
    """Median utilization between stalls."""
    stalled: tuple[bool, ...]
    """Per sample of the window, True when it lies in a stall (the start-of-window stall included)."""


def find_stalls(times: list[float], utils: list[float | None], thresholds: Thresholds) -> Stalls | None:
    """Regular stalls in ``utils`` (sampled at ``times``), or None when there are none worth naming.

    A stall is a run of samples at or below ``stall_util_percent`` lasting ``stall_min_s`` or more
    (measured to the next sample). It takes ``stall_min_count`` stalls whose start-to-start times
    vary by at most ``stall_regularity`` (coefficient of variation), ``stall_share_percent`` of
    the samples stalled, and a median of ``stall_busy_percent`` or more between stalls.
    """
    stalled = [value is not None and value <= thresholds.stall_util_percent for value in utils]
    runs = _runs(stalled)
    starts: list[float] = []
    lengths: list[float] = []
    for first, last in runs:
        end = times[last + 1] if last + 1 < len(times) else times[last]
        if first == 0 or end - times[first] < thresholds.stall_min_s:
            continue
        starts.append(times[first])
        lengths.append(end - times[first])
    if len(starts) < max(2, thresholds.stall_min_count):
        return None
    periods = [b - a for a, b in pairwise(starts)]
    period = mean(periods)
    if period <= 0 or pstdev(periods) / period > thresholds.stall_regularity:
        return None
    share = 100.0 * sum(stalled) / len(stalled)
    busy = [value for value, down in zip(utils, stalled, strict=True) if value is not None and not down]
    if share < thresholds.stall_share_percent or not busy or median(busy) < thresholds.stall_busy_percent:
        return None
    return Stalls(len(starts), median(periods), median(lengths), share, median(busy), tuple(stalled))


def split_mean(values: list[float | None], stalled: tuple[bool, ...]) -> tuple[float | None, float | None]:
    """Mean of the known ``values`` during the stalls and between them (None where none is known)."""
    during = [value for value, down in zip(values, stalled, strict=True) if value is not None and down]
    between = [value for value, down in zip(values, stalled, strict=True) if value is not None and not down]
    return (exact_mean(during) if during else None, exact_mean(between) if between else None)


def exact_mean(values: list[float]) -> float:
    """The mean of ``values`` exactly as :func:`statistics.mean` gives it (the exact sum over the count, rounded once),
    at a fraction of its cost: a float is an integer over a power of two, so the exact sum is one integer over the
    largest of them, and Python divides two integers with one correct rounding."""
    try:
        numerators, denominators = zip(*map(float.as_integer_ratio, values), strict=True)
    except (OverflowError, ValueError, TypeError):  # an infinity, a NaN, or not a float
        return mean(values)
    scale: int = max(denominators)
    total: int = sum(map(operator.mul, numerators, map(scale.__floordiv__, denominators)))
    return total / (scale * len(values))


def _runs(flags: list[bool]) -> list[tuple[int, int]]:
    """(first, last) index of each run of True values."""
    runs = []
    first = None
    for position, flag in enumerate(flags):
        if flag and first is None:
            first = position
        elif not flag and first is not None:
            runs.append((first, position - 1))
            first = None
    if first is not None:
        runs.append((first, len(flags) - 1))
    return runs
