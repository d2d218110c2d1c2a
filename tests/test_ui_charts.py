"""The GPU charts on screen: all five histories in every layout, on the time grid, zoom and metric keys.

Runs the real app headless over demo data that moves (waves and noise per GPU), with two minutes
of history polled on a stepping clock, and reads what the panels drew.
"""

from __future__ import annotations

import re

from test_ui_app import demo_sampler, run_app, screen_text
from textual.pilot import Pilot

from gpusight.ui.detail.gpu_detail import GpuDetailScreen
from gpusight.ui.main.app import GpusightApp
from gpusight.ui.main.gpu_panel import MODE_LINE, MODE_STRIP, STRIP_GUTTER, GpuArea, GpuPanel, chart_width
from gpusight.ui.widgets.chart_choice import HISTORIES

CHART_CELLS = set(" ▁▂▃▄▅▆▇█")
"""What a chart cell may hold."""

BARS = set("▁▂▃▄▅▆▇█")
"""A drawn chart cell."""

PREFILL = 240
"""Polls of history before the app starts: two minutes at the stepping clock's 0.5 s."""


def area(app: GpusightApp) -> GpuArea:
    return app.query_one("#gpus", GpuArea)


def test_eight_gpus_at_160x45_chart_all_six_histories_at_least_20_columns_wide() -> None:
    app = GpusightApp(demo_sampler("mixed", prefill=PREFILL))

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        panels = list(app.query(GpuPanel))
        assert len(panels) == 8
        for panel in panels:
            assert panel.mode == MODE_STRIP
            width = chart_width(MODE_STRIP, panel.size.width)
            assert width >= 20
            labels, charts = (panel.render_line(y).text for y in range(2))
            for position, history in enumerate(HISTORIES):
                start = STRIP_GUTTER + position * (width + 1)
                assert labels[start:].startswith(f"{history.label} "), (position, labels)
                cells = charts[start : start + width]
                assert set(cells) <= CHART_CELLS and len(set(cells) & BARS) >= 1, (history.label, cells)
                # two minutes of history fill at least the first three quarters of a paged chart
                assert sum(cell in BARS for cell in cells) >= width * 3 // 4 - 1, (history.label, cells)
        title = str(area(app).border_title)
        assert re.search(r"last \d+s · 1s/column · z zoom", title), title

    run_app(app, (160, 45), body)


def test_eight_gpus_at_80x24_take_one_line_each_and_v_cycles_the_charted_metric() -> None:
    app = GpusightApp(demo_sampler("mixed", prefill=PREFILL))

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        panels = list(app.query(GpuPanel))
        assert [panel.mode for panel in panels] == [MODE_LINE] * 8
        assert all(panel.size.height == 1 for panel in panels)
        seen = []
        for _ in HISTORIES:
            label = area(app).choice.history.label
            seen.append(label)
            assert f"v chart: {label}" in str(area(app).border_title)
            for panel in panels:
                line = panel.render_line(0).text
                chart = line.rstrip().rsplit(" ", 1)[-1]
                assert f" {label} " in line and len(chart) >= 8 and set(chart) <= BARS | {" "}, line
            await pilot.press("v")
            await pilot.pause()
        assert seen == [history.label for history in HISTORIES]
        assert area(app).choice.history.label == "util"  # around and back
        text = screen_text(app)
        assert "Processes" in text

    run_app(app, (80, 24), body)


def test_z_zooms_every_chart_to_longer_columns_and_back() -> None:
    app = GpusightApp(demo_sampler("healthy", prefill=PREFILL))

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        periods = []
        for _ in range(4):
            match = re.search(r"last (\S+) · (\S+)/column", str(area(app).border_title))
            assert match, area(app).border_title
            periods.append(match.group(2))
            await pilot.press("z")
            await pilot.pause()
        assert periods == ["1s", "10s", "1m", "1s"]

    run_app(app, (160, 45), body)


def test_a_few_gpus_keep_the_full_layout_and_advice_sits_beside_them() -> None:
    app = GpusightApp(demo_sampler("input-bound", gpus=2, prefill=PREFILL))

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        panels = list(app.query(GpuPanel))
        assert [panel.mode for panel in panels] == ["full", "full"]
        assert all(panel.chart_rows_count >= 3 for panel in panels)
        advice = app.query_one("#advice")
        assert advice.display and advice.region.x > 0 and advice.region.width == 44

    run_app(app, (160, 45), body)


def test_advice_sits_below_many_gpus_and_takes_no_room_when_there_is_none() -> None:
    busy = GpusightApp(demo_sampler("mixed", prefill=PREFILL))

    async def below(app: GpusightApp, pilot: Pilot) -> None:
        advice, gpus = app.query_one("#advice"), app.query_one("#gpus")
        assert app.snapshot is not None and app.snapshot.advice
        assert advice.display and advice.region.width == 160
        assert advice.region.y >= gpus.region.bottom and advice.region.bottom <= 44  # in view, above the footer

    run_app(busy, (160, 45), below)
    calm = GpusightApp(demo_sampler("healthy", prefill=PREFILL))

    async def hidden(app: GpusightApp, pilot: Pilot) -> None:
        assert app.snapshot is not None and app.snapshot.advice and not app.snapshot.errors  # only "nothing looks wrong"
        assert all(advice.id.startswith("healthy:") for advice in app.snapshot.advice)
        assert not app.query_one("#advice").display
        summary = app.query_one("#advice-summary")
        assert summary.display and summary.region.height == 1 and "nothing looks wrong" in screen_text(app)

    run_app(calm, (160, 45), hidden)


def test_the_detail_screen_charts_the_six_histories_wide() -> None:
    app = GpusightApp(demo_sampler("mixed", prefill=PREFILL))

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        await app.run_action("gpu_detail(2)")
        await pilot.pause(0.2)
        assert isinstance(app.screen, GpuDetailScreen)
        text = screen_text(app)
        for history, title in zip(HISTORIES, ("GPU util", "memory used", "power", "temperature", "PCIe RX", "PCIe TX"),
                                  strict=True):
            assert title in text
            assert app.screen.query_one(f"#chart-{history.metric}").size.width >= 60
        assert re.search(r"last \d+m?\d*s?\)", text), text

    run_app(app, (160, 45), body)
