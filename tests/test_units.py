"""Units formatting: N/A for missing values, never 0."""

import pytest

from gpusight.units import NA, fmt_bytes, fmt_celsius, fmt_duration, fmt_mhz, fmt_percent, fmt_rate, fmt_watts


@pytest.mark.parametrize("fn", [fmt_bytes, fmt_rate, fmt_percent, fmt_watts, fmt_celsius, fmt_mhz, fmt_duration])
def test_missing_values_are_na(fn):
    assert fn(None) == NA


@pytest.mark.parametrize("value, text", [
    (0, "0B"), (512, "512B"), (1536, "1.5KiB"), (80 * 2**30, "80GiB"), (61.2 * 2**30, "61.2GiB"),
    (150 * 2**20, "150MiB"), (2000 * 2**50, "2000PiB"),
])
def test_bytes_use_binary_units(value, text):
    assert fmt_bytes(value) == text


@pytest.mark.parametrize("value, text", [(999, "999B/s"), (250e3, "250kB/s"), (1.234e9, "1.23GB/s"), (32e9, "32GB/s")])
def test_rates_use_decimal_units(value, text):
    assert fmt_rate(value) == text


@pytest.mark.parametrize("seconds, text", [(59, "0:59"), (3725, "1:02:05"), (90000, "1d 01:00"), (-1, NA)])
def test_durations(seconds, text):
    assert fmt_duration(seconds) == text


def test_simple_units():
    assert (fmt_percent(97.4), fmt_watts(612.2), fmt_celsius(71), fmt_mhz(1980)) == ("97%", "612W", "71C", "1980MHz")
