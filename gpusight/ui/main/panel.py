"""The one interface of the main screen's panels: each is a widget drawn from the frame, and registered once.

A panel implements :class:`FramePanel` (one method, :meth:`~FramePanel.show_frame`) and is listed once, as a
:class:`PanelEntry` (how to build it and where on the screen it goes), in
:data:`~gpusight.ui.main.registry.MAIN_PANELS`. The app composes the screen from that list and draws every frame by
one loop over it, in its order; what a panel needs besides the frame comes in a :class:`PanelContext`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from gpusight.sampling.frame import Frame


class Place(Enum):
    """Where on the main screen a panel goes (the app's ``compose`` lays out these areas)."""

    TOP = "top"
    """Above the body (the header)."""
    MAIN = "main"
    """The main column, above the process filter (the GPUs and the host)."""
    TABLE = "table"
    """The main column, below the process filter (the process table, which takes the rows left)."""
    SIDE = "side"
    """Beside the main column, or below it (the advice panel)."""
    BOTTOM = "bottom"
    """Below the body, above the footer (the advice summary, the playback bar)."""


@dataclass(frozen=True, slots=True)
class PanelContext:
    """What a panel may need to draw a frame besides the frame itself."""

    interval: float
    """The sampler's polling interval in seconds (the header names it)."""
    paused: bool
    """Whether the sampler is paused (the header says so)."""
    at_once: bool = False
    """Draw this frame now rather than at the panel's own pace (the process table's once a second): the user just
    changed what the frame holds (``m`` shows only their processes)."""


@dataclass(frozen=True, slots=True)
class PanelOptions:
    """The app's settings a panel is built with."""

    ascii_mode: bool
    """Draw with ASCII only."""
    refresh: float
    """The screen's refresh setting in seconds (the header shows it beside the interval)."""
    paged_charts: bool
    """Move the GPU charts a quarter of their width at a time rather than one column (the GPU area's chart choice)."""


class FramePanel(Protocol):
    """A widget of the main screen drawn from each frame."""

    def show_frame(self, frame: Frame, context: PanelContext) -> Awaitable[None] | None:
        """Draw ``frame`` (or keep it for the panel's own pace); may return an awaitable the app awaits before the
        next panel draws (the GPU area mounts its panels)."""
        ...


@dataclass(frozen=True, slots=True)
class PanelEntry:
    """One panel of the main screen: how to build it and where it goes."""

    place: Place
    """The area of the screen it goes in (after the panels listed before it there)."""
    make: Callable[[PanelOptions], FramePanel]
    """Builds the panel widget (with its CSS id) from the app's settings."""
