"""The main screen's panels: each is built from its one registration, placed in its area and drawn from every frame
through one interface (``show_frame``), and the layout sizes them to what they draw."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Callable

import pytest
from test_ui_app import demo_sampler, screen_text, wait_for
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Static

from gpusight.sampling.frame import Frame
from gpusight.sampling.sampler import MIN_INTERVAL
from gpusight.ui.main.app import GpusightApp
from gpusight.ui.main.gpu_panel import GpuArea, GpuPanel
from gpusight.ui.main.host_panel import HostPanel
from gpusight.ui.main.panel import PanelContext, PanelEntry, PanelOptions, Place
from gpusight.ui.main.registry import MAIN_PANELS


class FrameCounter(Static):
    """A panel registered by a test: notes each frame and context it is given and says how many on screen."""

    def __init__(self, options: PanelOptions) -> None:
        super().__init__("no frame yet", id="frame-counter")
        self.options = options
        self.drawn: list[tuple[Frame, PanelContext]] = []

    def show_frame(self, frame: Frame, context: PanelContext) -> None:
        self.drawn.append((frame, context))
        self.update(f"frames drawn here: {len(self.drawn)}")


class CountingApp(GpusightApp):
    """The app with one more panel, registered by one line below the others."""

    PANELS = (*MAIN_PANELS, PanelEntry(Place.BOTTOM, FrameCounter))


def run(app: GpusightApp, size: tuple[int, int], body: Callable[[GpusightApp, Pilot], Awaitable[None]]) -> None:
    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await body(app, pilot)

    asyncio.run(main())


def test_a_registered_panel_is_placed_and_gets_every_frame_with_the_samplers_state() -> None:
    app = CountingApp(demo_sampler("mixed", interval=MIN_INTERVAL, live_clock=True), ascii_mode=True, refresh=MIN_INTERVAL)

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        counter = app.query_one(FrameCounter)
        await wait_for(pilot, lambda: app.snapshots_applied >= 3)
        await pilot.press("p")  # paused: no frame is drawn after this one
        await wait_for(pilot, lambda: app.sampler.paused and f"frames drawn here: {len(counter.drawn)}" in screen_text(app))
        frames = [frame for frame, _ in counter.drawn]
        assert len(frames) == app.snapshots_applied and frames[-1] is app.frame
        assert len({id(frame) for frame in frames}) == len(frames), "each frame once"
        assert all(context == PanelContext(app.sampler.interval, False) for _, context in counter.drawn)
        assert counter.options == PanelOptions(ascii_mode=True, refresh=MIN_INTERVAL, paged_charts=True)
        # its area: below the body, after the playback bar, above the footer
        lines = screen_text(app).split("\n")
        assert lines[-2].strip() == f"frames drawn here: {len(frames)}"
        assert counter.region.y == app.size.height - 2 and counter.region.height == 1

    run(app, (120, 40), body)


def test_every_panel_of_the_main_screen_is_drawn_through_the_interface() -> None:
    """Each registered panel's ``show_frame`` gets every frame the app draws; ``o`` (only my processes) has the
    panels draw the new view at once (the process table not at its own once-a-second pace)."""
    calls: dict[str, list[tuple[Frame, PanelContext]]] = defaultdict(list)

    def watched(entry: PanelEntry) -> PanelEntry:
        def make(options: PanelOptions) -> Widget:
            panel = entry.make(options)
            assert isinstance(panel, Widget) and panel.id
            show_frame = panel.show_frame

            def noting(frame: Frame, context: PanelContext) -> Awaitable[None] | None:
                calls[str(panel.id)].append((frame, context))
                return show_frame(frame, context)

            panel.show_frame = noting  # type: ignore[method-assign]
            return panel

        return PanelEntry(entry.place, make)

    class WatchedApp(GpusightApp):
        PANELS = tuple(watched(entry) for entry in MAIN_PANELS)

    app = WatchedApp(demo_sampler("mixed"))

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        await wait_for(pilot, lambda: app.snapshots_applied >= 2)
        ids = ["gpus", "host", "processes", "advice", "advice-summary", "header", "playback"]
        assert sorted(calls) == sorted(ids)
        for panel_id in ids:
            assert app.screen.query_one(f"#{panel_id}").is_mounted
            frames = [frame for frame, _ in calls[panel_id]]
            assert len(frames) == app.snapshots_applied and frames[-1] is app.frame, panel_id
            assert not any(context.at_once for _, context in calls[panel_id])
        before = {panel_id: len(calls[panel_id]) for panel_id in ids}
        await pilot.press("o")
        await wait_for(pilot, lambda: any(context.at_once for _, context in calls["processes"]))
        at_once = {panel_id: [frame for frame, context in calls[panel_id][before[panel_id]:] if context.at_once]
                   for panel_id in ids}
        assert all(len(frames) == 1 for frames in at_once.values()), at_once
        assert len({id(frames[0]) for frames in at_once.values()}) == 1, "the same frame, the new view, everywhere"
        assert app.sampler.filters.user is not None

    run(app, (160, 45), body)


def area_and_panels(app: GpusightApp) -> tuple[GpuArea, list[GpuPanel]]:
    return app.query_one("#gpus", GpuArea), list(app.query(GpuPanel))


@pytest.mark.parametrize(("size", "gpus"), [((80, 24), 8), ((160, 45), 8), ((160, 45), 2), ((120, 60), 4), ((90, 16), 8)])
def test_the_gpu_area_and_the_host_panel_are_as_tall_as_what_they_draw(size: tuple[int, int], gpus: int) -> None:
    app = GpusightApp(demo_sampler("mixed", gpus=gpus))

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        await wait_for(pilot, lambda: app.snapshots_applied >= 2)
        for filtering in (False, True):
            if filtering:
                await pilot.press("slash")
                await wait_for(pilot, lambda: app.query_one("#filter").display)
            await pilot.pause()
            area, panels = area_and_panels(app)
            tall = sum(panel.region.height for panel in panels) + 1  # its top border names the charts' span
            if area.max_scroll_y:  # even one line per GPU does not fit: it scrolls
                assert area.region.height < tall
            else:
                assert area.region.height == tall
            host = app.query_one(HostPanel)
            lines = [host.render_line(y).text for y in range(host.region.height)]
            assert len(lines) == host.height_for(host.region.width, host.max_grid_rows)
            assert all(line.strip() for line in lines), "no blank line below the core grid"
            assert app.query_one("#processes").region.height >= 4

    run(app, size, body)
