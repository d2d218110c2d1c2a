"""Reads made once a period, in step: the NVML process lists and the processes' ``/proc`` details.

Each is read again when the monotonic clock enters a new period (a whole multiple of the period since the
clock's zero), not a period after its own last read. Two such reads in different places then fall due at the
same poll, and the host joins the fresh NVML rows to fresh details once a period instead of twice.
"""

from __future__ import annotations

import math


def period_of(now: float, period: float) -> int:
    """Which ``period``-long slice of the clock holds ``now`` (seconds); a period of 0 or less is a slice per call."""
    return math.floor(now / period) if period > 0 else -1


def same_period(earlier: float, now: float, period: float) -> bool:
    """True while ``now`` is in the slice of ``earlier`` (``period`` seconds long; never for a period of 0 or less)."""
    return period > 0 and earlier <= now and period_of(earlier, period) == period_of(now, period)
