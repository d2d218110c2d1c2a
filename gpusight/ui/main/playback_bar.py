"""The replay position bar: one line with the playback state, the recording's span and where we are in it.

Advice raised in the recording ticks the bar; the Xid events of the snapshots played so far mark it too (each
snapshot carries a GPU's latest Xid events, so the events before the first snapshot shown are marked as well),
and the latest one is named in the bar's label.
"""

from __future__ import annotations

import time

from rich.text import Text
from textual.widgets import Static

from gpusight.sampling.frame import Frame
from gpusight.sampling.steering import PlaybackState
from gpusight.snapshot.model import Severity, Snapshot, XidEvent
from gpusight.ui.main.panel import PanelContext

XidMark = tuple[int, XidEvent]
"""An Xid event of the recording and the index of the GPU it hit."""

XID_STYLE = "bold reverse red"
"""Colour of an Xid mark on the bar and of the label naming the latest one."""

TICK_STYLES: dict[Severity, str] = {Severity.CRITICAL: "bold red", Severity.WARN: "yellow", Severity.INFO: "cyan"}
"""Colour of an advice tick by the worst severity raised in its cell."""

_SEVERITY_RANK = {severity: rank for rank, severity in enumerate(Severity)}


def _clock(timestamp: float, with_date: bool) -> str:
    """Local time of ``timestamp``: ``03:10:30``, or ``11-23 03:10:30`` when the recording spans days."""
    return time.strftime("%m-%d %H:%M:%S" if with_date else "%H:%M:%S", time.localtime(timestamp))


def bar_text(state: PlaybackState, width: int, ascii_mode: bool = False, xids: tuple[XidMark, ...] = ()) -> Text:
    """The bar for ``state`` in ``width`` cells, e.g. ``▶ x10 03:10:30  00:00:00 ━━━●━━┃━━✕━ 23:59:59``.

    The marker is the position; ticks are cells where advice was raised, coloured by severity; crosses are cells
    where an Xid of ``xids`` (oldest first) arrived, and the latest is named after the position
    (``Xid 94 gpu0 03:09:12``).
    """
    days = state.end is not None and time.localtime(state.start)[:3] != time.localtime(state.end)[:3]
    status = ("||" if ascii_mode else "❚❚") + " PAUSED" if state.paused else (">" if ascii_mode else "▶") + " playing"
    text = Text()
    text.append(status, style="bold reverse" if state.paused else "bold")
    text.append(f" x{state.speed:<3}", style="bold")
    text.append(f" {_clock(state.position, days)}", style="bold")
    if state.loop:
        text.append(" loop", style="dim")
    if xids:
        index, latest = xids[-1]
        text.append(" ")
        text.append(f"Xid {latest.code} gpu{index} {_clock(latest.timestamp, days)}", style=XID_STYLE)
    end = "indexing..." if state.end is None else _clock(state.end, days)
    start = _clock(state.start, days)
    track = width - text.cell_len - len(start) - len(end) - 4
    if track < 5:
        return text
    text.append(f"  {start} ", style="dim")
    text.append_text(_track(state, track, ascii_mode, xids))
    text.append(f" {end}", style="dim")
    return text


def _track(state: PlaybackState, cells: int, ascii_mode: bool, xids: tuple[XidMark, ...]) -> Text:
    """The bar itself: a line with advice ticks, Xid crosses and the position marker."""
    line, tick, marker, cross = ("-", "|", "#", "x") if ascii_mode else ("━", "┃", "●", "✕")
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
    crossed = {cell(event.timestamp) for _, event in xids if event.timestamp >= state.start}
    text = Text()
    for position in range(cells):
        if position == here:
            text.append(marker, style="bold")
        elif position in crossed:
            text.append(cross, style=XID_STYLE)
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
        self._xids: dict[tuple[int, float, int], XidMark] = {}

    @property
    def xids(self) -> tuple[XidMark, ...]:
        """The Xid events marked so far, oldest first, each once."""
        return tuple(sorted(self._xids.values(), key=lambda mark: (mark[1].timestamp, mark[0], mark[1].code)))

    def show_frame(self, frame: Frame, context: PanelContext) -> None:
        """Draw the frame's playback state and mark its Xid events (the panel interface)."""
        self.show(frame.playback, frame.snapshot)

    def show(self, state: PlaybackState | None, snapshot: Snapshot | None = None) -> None:
        """Draw ``state``, marking the Xid events ``snapshot`` carries besides those of the snapshots before it."""
        self.state = state
        if state is not None and snapshot is not None:
            for device in snapshot.devices:
                for event in () if device.health is None else device.health.xid_recent:
                    self._xids.setdefault((device.index, event.timestamp, event.code), (device.index, event))
        self._draw()

    def on_resize(self) -> None:
        """Redraw for the new width."""
        self._draw()

    def _draw(self) -> None:
        if self.state is not None:
            self.update(bar_text(self.state, self.size.width or 80, self.ascii_mode, self.xids))
