"""The replay position bar: one line with the playback state, the recording's span and where we are in it."""

from __future__ import annotations

import time

from rich.text import Text
from textual.widgets import Static

from gpusight.collect.model import Severity
from gpusight.collect.steering import PlaybackState

TICK_STYLES: dict[Severity, str] = {Severity.CRITICAL: "bold red", Severity.WARN: "yellow", Severity.INFO: "cyan"}
"""Colour of an advice tick by the worst severity raised in its cell."""

_SEVERITY_RANK = {severity: rank for rank, severity in enumerate(Severity)}


def _clock(timestamp: float, with_date: bool) -> str:
    """Local time of ``timestamp``: ``03:10:30``, or ``11-23 03:10:30`` when the recording spans days."""
    return time.strftime("%m-%d %H:%M:%S" if with_date else "%H:%M:%S", time.localtime(timestamp))


def bar_text(state: PlaybackState, width: int, ascii_mode: bool = False) -> Text:
    """The bar for ``state`` in ``width`` cells, e.g. ``▶ x10 03:10:30  00:00:00 ━━━●━━┃━━ 23:59:59``.

    The marker is the position; ticks are cells where advice was raised, coloured by severity.
    """
    days = state.end is not None and time.localtime(state.start)[:3] != time.localtime(state.end)[:3]
    status = ("||" if ascii_mode else "❚❚") + " PAUSED" if state.paused else (">" if ascii_mode else "▶") + " playing"
    text = Text()
    text.append(status, style="bold reverse" if state.paused else "bold")
    text.append(f" x{state.speed:<3}", style="bold")
    text.append(f" {_clock(state.position, days)}", style="bold")
    if state.loop:
        text.append(" loop", style="dim")
    end = "indexing..." if state.end is None else _clock(state.end, days)
    start = _clock(state.start, days)
    track = width - text.cell_len - len(start) - len(end) - 4
    if track < 5:
        return text
    text.append(f"  {start} ", style="dim")
    text.append_text(_track(state, track, ascii_mode))
    text.append(f" {end}", style="dim")
    return text


def _track(state: PlaybackState, cells: int, ascii_mode: bool) -> Text:
    """The bar itself: a line with advice ticks and the position marker."""
    line, tick, marker = ("-", "|", "#") if ascii_mode else ("━", "┃", "●")
    span = (state.end or state.position) - state.start

    def cell(timestamp: float) -> int:
        fraction = (timestamp - state.start) / span if span > 0 else 0.0
        return max(0, min(cells - 1, int(fraction * cells)))

    worst: dict[int, Severity] = {}
    for event in state.events:
        if event.raised:
            at = cell(event.timestamp)
            if at not in worst or _SEVERITY_RANK[event.severity] < _SEVERITY_RANK[worst[at]]:
                worst[at] = event.severity
    here = cell(state.position)
    text = Text()
    for position in range(cells):
        if position == here:
            text.append(marker, style="bold")
        elif position in worst:
            text.append(tick, style=TICK_STYLES[worst[position]])
        else:
            text.append(line, style="dim")
    return text


class PlaybackBar(Static):
    """Shows the frame's playback state; hidden for live and demo data (no state)."""

    DEFAULT_CSS = """
    PlaybackBar { height: 1; width: 100%; background: $panel; }
    """

    def __init__(self, *, ascii_mode: bool = False, id: str | None = None) -> None:
        super().__init__(id=id)
        self.ascii_mode = ascii_mode
        """Draw with ASCII only."""
        self.state: PlaybackState | None = None
        """The state drawn."""

    def show(self, state: PlaybackState | None) -> None:
        """Draw ``state``."""
        self.state = state
        self._draw()

    def on_resize(self) -> None:
        """Redraw for the new width."""
        self._draw()

    def _draw(self) -> None:
        if self.state is not None:
            self.update(bar_text(self.state, self.size.width or 80, self.ascii_mode))
