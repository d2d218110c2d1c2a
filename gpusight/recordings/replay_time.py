"""Reading a time in a recording as a person writes it: ``03:10``, ``2026-11-23 03:10:30``, ``+1h20m`` or ``90s``."""

from __future__ import annotations

import re
import time
from datetime import date, datetime, timedelta

_CLOCK = re.compile(r"(\d{1,2}):(\d{2})(?::(\d{2}(?:\.\d+)?))?")
_DATE_TIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})[ T](.+)")
_UNITS = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?")

START_TOLERANCE_S = 1.0
"""A time this much before the first snapshot still means the start (a recording rarely starts on a whole second)."""

WHEN_HELP = "a clock time (03:10, 03:10:30), a date and time (2026-11-23 03:10) or an offset from the start (+1h20m, 90s, +1:20:00)"
"""What a time in a recording may look like, for help texts and errors."""


def span_text(first: float, last: float) -> str:
    """The recording's span in local time, e.g. ``2026-11-23 00:00:00 to 23:59:59``; dates repeated when they differ."""
    start, end = time.localtime(first), time.localtime(last)
    end_format = "%H:%M:%S" if start[:3] == end[:3] else "%Y-%m-%d %H:%M:%S"
    return f"{time.strftime('%Y-%m-%d %H:%M:%S', start)} to {time.strftime(end_format, end)}"


def parse_when(text: str, first: float, last: float) -> float:
    """The epoch time ``text`` names in a recording spanning ``first``..``last`` (epoch seconds, local time zone).

    An offset is ``+`` followed by ``1h20m``-style units or ``H:MM:SS``, or units alone (``90s``, ``20m``).
    A bare clock time means its first occurrence within the recording, on whichever day. Raises
    ``ValueError`` with a one-line message when the text means nothing or a time outside the recording.
    """
    spec = text.strip()
    when = _offset(spec, first)
    if when is None:
        when = _date_time(spec)
    if when is None:
        clock = _clock_seconds(spec)
        if clock is None:
            raise ValueError(f"cannot read time {text!r}: give {WHEN_HELP}")
        when = _first_occurrence(clock, first, last)
    if first - START_TOLERANCE_S <= when <= last:
        return max(when, first)
    raise ValueError(f"{text.strip()} is outside the recording ({span_text(first, last)})")


def _offset(spec: str, first: float) -> float | None:
    """``first`` plus the offset ``spec`` names, or None when it is no offset."""
    body = spec[1:] if spec.startswith("+") else spec
    if spec.startswith("+"):
        clock = _clock_seconds(body)
        if clock is not None:
            return first + clock
    match = _UNITS.fullmatch(body)
    if body and match is not None and any(match.groups()):
        hours, minutes, seconds = (float(part or 0) for part in match.groups())
        return first + hours * 3600 + minutes * 60 + seconds
    return None


def _clock_seconds(spec: str) -> float | None:
    """Seconds since midnight of ``H:MM`` or ``H:MM:SS[.f]``, or None."""
    match = _CLOCK.fullmatch(spec)
    if match is None:
        return None
    hours, minutes, seconds = int(match[1]), int(match[2]), float(match[3] or 0)
    if hours > 23 or minutes > 59 or seconds >= 60:
        return None
    return hours * 3600 + minutes * 60 + seconds


def _date_time(spec: str) -> float | None:
    """Epoch seconds of ``YYYY-MM-DD H:MM[:SS]`` (or with ``T``), or None."""
    match = _DATE_TIME.fullmatch(spec)
    if match is None:
        return None
    clock = _clock_seconds(match[4])
    if clock is None:
        return None
    try:
        day = date(int(match[1]), int(match[2]), int(match[3]))
    except ValueError:
        return None
    return _local(day, clock)


def _first_occurrence(clock: float, first: float, last: float) -> float:
    """The first time of day ``clock`` at or after the recording's start (minus the tolerance); else on its last day."""
    day = datetime.fromtimestamp(first).date()
    last_day = datetime.fromtimestamp(last).date()
    while True:
        when = _local(day, clock)
        if when >= first - START_TOLERANCE_S or day >= last_day:
            return when
        day += timedelta(days=1)


def _local(day: date, clock: float) -> float:
    """Epoch seconds of ``clock`` seconds after local midnight of ``day`` (the daylight-saving flag as local time has it)."""
    whole = int(clock)
    midnight = (day.year, day.month, day.day, whole // 3600, whole % 3600 // 60, whole % 60, 0, 0, -1)
    return time.mktime(midnight) + (clock - whole)
