"""Times typed for ``--at`` and the go-to dialog: clock times, dates, offsets, and the errors for the rest."""

from __future__ import annotations

import pytest

from gpusight.recordings.replay_time import parse_when, span_text
from support.timezone import utc  # noqa: F401 - autouse: local time is UTC here

START = 1_763_856_000.0 + 30.5  # 2025-11-23 00:00:30.5 UTC
DAY_END = START + 2 * 86400  # runs into 2025-11-25


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("03:10", 3 * 3600 + 600),
        ("3:10", 3 * 3600 + 600),
        ("03:10:30", 3 * 3600 + 630),
        ("00:00:45.25", 45.25),
        ("2025-11-24 03:10", 86400 + 3 * 3600 + 600),
        ("2025-11-24T03:10:05", 86400 + 3 * 3600 + 605),
    ],
)
def test_clock_times_and_dates_are_local_times_of_the_recording(text, expected):
    assert parse_when(text, START, DAY_END) == 1_763_856_000.0 + expected


@pytest.mark.parametrize(
    ("text", "offset"),
    [("+1h20m", 4800), ("1h20m", 4800), ("90s", 90), ("+20m", 1200), ("+1:20:00", 4800), ("+0:00:10", 10),
     ("2h30m15s", 9015), ("+1.5h", 5400)],
)
def test_offsets_count_from_the_first_snapshot(text, offset):
    assert parse_when(text, START, DAY_END) == START + offset


def test_a_clock_time_is_its_first_occurrence_inside_the_recording():
    # 00:00:10 on the first day is before the start (00:00:30.5), so the next day's is meant.
    assert parse_when("00:00:10", START, DAY_END) == 1_763_856_000.0 + 86400 + 10


def test_a_time_just_before_the_first_snapshot_means_the_start():
    assert parse_when("00:00:30", START, DAY_END) == START


@pytest.mark.parametrize("text", ["2025-11-30 03:10", "+3d", "+49h", "2025-11-22 23:00"])
def test_a_time_outside_the_recording_names_its_span(text):
    with pytest.raises(ValueError) as caught:
        parse_when(text, START, DAY_END)
    message = str(caught.value)
    assert "\n" not in message
    assert "2025-11-23 00:00:30 to 2025-11-25 00:00:30" in message or "cannot read" in message


def test_outside_a_one_day_recording():
    with pytest.raises(ValueError, match=r"^05:00 is outside the recording \(2025-11-23 00:00:30 to 04:00:30\)$"):
        parse_when("05:00", START, START + 4 * 3600)


@pytest.mark.parametrize("text", ["", "soon", "25:00", "03:61", "2025-13-01 00:00", "1:2:3:4", "+", "h"])
def test_nonsense_says_what_a_time_looks_like(text):
    with pytest.raises(ValueError, match="cannot read time .*clock time"):
        parse_when(text, START, DAY_END)


def test_span_text_repeats_the_date_only_when_it_changes():
    assert span_text(START, START + 60) == "2025-11-23 00:00:30 to 00:01:30"
    assert span_text(START, DAY_END) == "2025-11-23 00:00:30 to 2025-11-25 00:00:30"
