"""The one-line header: host, driver and CUDA versions, data source, filters, polling interval (and the screen's
refresh period where it is longer) and PAUSED state."""

from __future__ import annotations

import time
from typing import ClassVar

from rich.cells import cell_len
from rich.segment import Segment
from textual.strip import Strip
from textual.widget import Widget

from gpusight import __version__
from gpusight.sampling.frame import Frame
from gpusight.snapshot.model import Snapshot, SourceKind
from gpusight.textsafe import safe_text
from gpusight.ui.main.panel import PanelContext
from gpusight.ui.terminal.draw_pacing import refresh_period
from gpusight.ui.terminal.line_diff import line_regions, refresh_regions
from gpusight.ui.widgets.format import CachedStyles
from gpusight.units import NA
from gpusight.vendor_text import driver_parts

SOURCE_LIVE = "live"
"""Header text of the NVML source."""

FILTERS_WIDTH = 48
"""Most cells the filter description takes in the header."""


def source_text(snapshot: Snapshot | None) -> str:
    """How the data source is named on screen: ``live``, the demo's label, or the replay's label."""
    if snapshot is None:
        return "waiting for data"
    if snapshot.source == SourceKind.NVML:
        return SOURCE_LIVE
    label = safe_text(snapshot.label, 60)
    if snapshot.source == SourceKind.DEMO:
        return label if "simulated" in label else f"demo (simulated){': ' + label if label else ''}"
    if snapshot.source == SourceKind.REPLAY:
        return label if label.startswith("replay") else f"replay{': ' + label if label else ''}"
    return label or safe_text(snapshot.source)


SHORTEN_PACE_BEFORE = 3
"""Items of this priority or a lower number (more important: the driver, the host, the interval) stay while the pace
drops its ``screen 1s`` part; the title and the clock go first."""


class HeaderBar(CachedStyles, Widget):
    """One line that says what is being shown, from where, filtered how, how often, and whether it is paused.

    Items that do not fit the width are dropped whole, least important first; the source, the
    filters in force and the PAUSED state always stay.
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "header--base",
        "header--title",
        "header--live",
        "header--demo",
        "header--replay",
        "header--paused",
        "header--filter",
        "header--dim",
    }
    """Styles of the header's parts (set in gpusight.tcss)."""

    def __init__(self, *, ascii_mode: bool = False, refresh: float = 0.0, id: str | None = None) -> None:
        super().__init__(id=id)
        self.ascii_mode = ascii_mode
        """Use ``|`` instead of box-drawing separators."""
        self.refresh_setting = refresh
        """The screen's refresh setting in seconds; shown beside the interval while it makes the period longer."""
        self._state: tuple[object, ...] | None = None
        self._strip: Strip | None = None
        self._snapshot: Snapshot | None = None
        self._interval = 0.0
        self._paused = False
        self._filters: str | None = None

    def show_filters(self, filters: str | None) -> None:
        """Name the filters in force (``GPUs 0,3, user alice``), or None when nothing is filtered."""
        if filters != self._filters:
            self._filters = filters
            self._state = None
            self.show(self._snapshot, self._interval, self._paused)

    def show_frame(self, frame: Frame, context: PanelContext) -> None:
        """Show the frame's source, host and clock with the sampler's interval and paused state (the panel interface)."""
        self.show(frame.snapshot, context.interval, context.paused)

    def show(self, snapshot: Snapshot | None, interval: float, paused: bool) -> None:
        """Update the header; it redraws only when something it shows changed."""
        state = (
            source_text(snapshot),
            None if snapshot is None else (snapshot.host.hostname, snapshot.driver, int(snapshot.timestamp)),
            interval,
            paused,
        )
        if state == self._state:
            return
        self._state = state
        self._snapshot, self._interval, self._paused = snapshot, interval, paused
        old, width = self._strip, self.size.width
        if old is None or old.cell_length != width or not self.is_mounted:
            self._strip = None
            self.refresh()
            return
        self._strip = self._build(width)
        refresh_regions(self, line_regions(0, old, self._strip, width))

    def notify_style_update(self) -> None:
        """Drop the cached line when the theme or CSS changes."""
        super().notify_style_update()
        self._strip = None

    def _items(self) -> list[tuple[int, str, str]]:
        """(priority, text, component) in display order; lower priority numbers are kept longer."""
        snapshot = self._snapshot
        items: list[tuple[int, str, str]] = [(4, f"gpusight {__version__}", "header--title")]
        if snapshot is not None:
            items.append((2, f"host {safe_text(snapshot.host.hostname, 40) or NA}", "header--base"))
            items += [(3, part, "header--base") for part in driver_parts(snapshot)]
        kind = "header--live"
        if snapshot is not None and snapshot.source in (SourceKind.DEMO, SourceKind.REPLAY):
            kind = f"header--{snapshot.source}"
        items.append((0, f" {source_text(snapshot)} ", kind))
        if self._filters:
            items.append((0, f" only {safe_text(self._filters, FILTERS_WIDTH)} ", "header--filter"))
        items.append((1, self._pace_text(), "header--base"))
        if snapshot is not None:
            items.append((5, time.strftime("%H:%M:%S", time.localtime(snapshot.timestamp)), "header--dim"))
        if self._paused:
            items.append((0, " PAUSED ", "header--paused"))
        return items

    def _pace_text(self, *, short: bool = False) -> str:
        """``every 0.5s``, or ``every 0.25s · screen 1s`` while the screen refreshes less often than it polls (unless
        ``short``)."""
        text = f"every {self._interval:g}s"
        screen = refresh_period(self.refresh_setting, self._interval)
        if screen != self._interval and not short:
            text += f"{', ' if self.ascii_mode else ' · '}screen {screen:g}s"
        return text

    def _build(self, width: int) -> Strip:
        sep = " | " if self.ascii_mode else " │ "
        items = self._items()
        pace, short_pace = self._pace_text(), self._pace_text(short=True)
        while len(items) > 1 and 1 + sum(cell_len(t) for _, t, _ in items) + cell_len(sep) * (len(items) - 1) > width:
            worst = max(range(len(items)), key=lambda i: (items[i][0], i))
            if items[worst][0] == 0:
                break
            if items[worst][0] <= SHORTEN_PACE_BEFORE and pace != short_pace:
                # the screen's period goes before the driver, the host or the interval itself
                items = [(rank, short_pace if text == pace else text, kind) for rank, text, kind in items]
                pace = short_pace
                continue
            del items[worst]
        base = self.component_style("header--base")
        segments = [Segment(" ", base)]
        for position, (_, text, component) in enumerate(items):
            if position:
                segments.append(Segment(sep, self.component_style("header--dim")))
            segments.append(Segment(text, self.component_style(component)))
        return Strip(segments).crop_extend(0, width, base)

    def render_line(self, y: int) -> Strip:
        """The header line."""
        width = self.size.width
        if self._strip is None or self._strip.cell_length != width:
            self._strip = self._build(width)
        return self._strip if y == 0 else Strip.blank(width, self.base_style)
