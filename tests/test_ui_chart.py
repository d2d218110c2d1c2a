"""The fixed-scale line-API chart: scale, blanks, segment runs, ASCII mode, and the widget in an app."""

from __future__ import annotations

import asyncio

from rich.style import Style
from textual.app import App, ComposeResult

from gpusight.ui.widgets.chart import ASCII_LEVELS, UNICODE_LEVELS, Chart, chart_rows

GREEN = Style(color="green")
RED = Style(color="red")


def texts(values, width, height, maximum, style=GREEN, **kwargs) -> list[str]:
    return [strip.text for strip in chart_rows(values, width, height, maximum, style, **kwargs)]


def test_constant_half_draws_at_half_height_not_lowest_bar() -> None:
    assert texts([50.0] * 6, 6, 1, 100.0) == ["▄" * 6]
    assert texts([50.0] * 6, 6, 4, 100.0) == [" " * 6, " " * 6, "█" * 6, "█" * 6]
    assert texts([50.0] * 6, 6, 1, 100.0) != texts([10.0] * 6, 6, 1, 100.0)


def test_scale_is_fixed_by_the_caller_not_by_the_data() -> None:
    # The same values read lower on a larger scale; a stock Sparkline would draw both identically.
    assert texts([40.0, 80.0], 2, 1, 80.0) == ["▄█"]
    assert texts([40.0, 80.0], 2, 1, 160.0) == ["▂▄"]


def test_values_clamp_to_the_scale_and_zero_differs_from_missing() -> None:
    assert texts([500.0, -5.0, 0.0, None], 4, 1, 100.0) == ["█▁▁ "]


def test_none_draws_blank_in_every_row() -> None:
    rows = texts([100.0, None, 100.0], 3, 3, 100.0)
    assert rows == ["█ █"] * 3


def test_newest_samples_are_right_aligned_and_old_ones_dropped() -> None:
    assert texts([100.0, 50.0], 4, 1, 100.0) == ["  █▄"]
    assert texts([0.0, 0.0, 0.0, 100.0, 100.0], 2, 1, 100.0) == ["██"]


def test_without_a_scale_everything_is_blank() -> None:
    assert texts([10.0, 20.0], 2, 2, None) == ["  ", "  "]
    assert texts([10.0, 20.0], 2, 1, 0.0) == ["  "]


def test_a_scale_that_is_not_finite_draws_blank_and_nan_values_draw_as_missing() -> None:
    nan, inf = float("nan"), float("inf")
    # Each of these raised "cannot convert float NaN to integer" before.
    assert texts([10.0, 20.0], 2, 1, nan) == ["  "]
    assert texts([10.0, inf], 2, 1, inf) == ["  "]
    assert texts([10.0, 20.0], 2, 1, 100.0, minimum=nan) == ["  "]
    assert texts([nan, 100.0], 2, 1, 100.0) == [" █"]
    assert texts([inf, -inf], 2, 1, 100.0) == ["█▁"]


def test_one_segment_per_row_with_a_single_colour() -> None:
    strips = chart_rows([10.0, None, 90.0, 40.0, 70.0], 8, 3, 100.0, GREEN, blank=Style(bgcolor="black"))
    for strip in strips:
        assert len(list(strip)) == 1
        assert strip.cell_length == 8


def test_one_segment_per_colour_run() -> None:
    def hot(value: float) -> Style:
        return RED if value >= 80 else GREEN

    values = [10.0, 20.0, 90.0, 95.0, None, 30.0, 85.0]
    (strip,) = chart_rows(values, 7, 1, 100.0, hot, blank=Style())
    segments = list(strip)
    # runs: green(10,20) red(90,95,blank) green(30) red(85)
    assert [segment.style for segment in segments] == [GREEN, RED, GREEN, RED]
    assert "".join(segment.text for segment in segments) == strip.text


def test_ascii_mode_uses_only_ascii() -> None:
    values = [float(v) for v in range(0, 101, 5)] + [None]
    rows = texts(values, len(values), 3, 100.0, ascii_mode=True)
    assert all(text.isascii() for text in rows)
    assert rows[-1].strip()  # something is drawn
    assert not any(ch in UNICODE_LEVELS.strip() for text in rows for ch in text)
    assert set("".join(rows)) <= set(ASCII_LEVELS)


class ChartApp(App[None]):
    def compose(self) -> ComposeResult:
        chart = Chart(id="chart")
        chart.styles.height = 2
        chart.styles.width = 5
        yield chart


def test_chart_widget_draws_the_series_it_is_given() -> None:
    asyncio.run(_chart_widget())


async def _chart_widget() -> None:
    app = ChartApp()
    async with app.run_test(size=(20, 5)) as pilot:
        chart = app.query_one(Chart)
        chart.set_series([50.0, 100.0, None, 25.0], 100.0)
        await pilot.pause()
        assert [chart.render_line(y).text for y in range(2)] == ["  █  ", " ██ ▄"]
        chart.set_series([100.0] * 10, 100.0)
        await pilot.pause()
        assert [chart.render_line(y).text for y in range(2)] == ["█████", "█████"]
