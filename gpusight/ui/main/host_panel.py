"""The host panel: a summary line (CPU, iowait, load, memory, swap) and a per-core CPU grid.

The grid adapts from 2 to 256+ cores: labelled bars when they fit, one glyph per core when
they do not, and one glyph per group of cores when even that needs too many lines.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import ClassVar

from rich.style import Style
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget

from gpusight.sampling.frame import Frame
from gpusight.snapshot.model import HostSample
from gpusight.ui.main.panel import PanelContext
from gpusight.ui.terminal.line_diff import ChangedLinesRefresh
from gpusight.ui.widgets.chart import ASCII_LEVELS, UNICODE_LEVELS
from gpusight.ui.widgets.format import (
    CachedStyles,
    LineBuilder,
    bar_text,
    memory_pair,
    percent_of,
)
from gpusight.units import fmt_percent

BUSY_PERCENT = 60.0
"""Core load drawn in the 'busy' colour."""

SATURATED_PERCENT = 90.0
"""Core load drawn in the 'saturated' colour."""

LABELLED_BAR_MIN = 6
"""Narrowest bar in the labelled-bars grid."""

LABELLED_BAR_MAX = 14
"""Widest bar in the labelled-bars grid."""



def average_host(samples: list[HostSample]) -> HostSample:
    """The newest of ``samples`` with per-core CPU and iowait averaged over all of them.

    Each sample covers one polling interval, so the mean of their percentages is the load over the
    whole span. Samples with a different core count than the newest (a CPU went offline) are left out.
    """
    newest = samples[-1]
    cores = [s.cpu_percent_per_core for s in samples if len(s.cpu_percent_per_core) == len(newest.cpu_percent_per_core)]
    iowaits = [s.iowait_percent for s in samples if s.iowait_percent is not None]
    return dataclasses.replace(
        newest,
        cpu_percent_per_core=tuple(sum(column) / len(cores) for column in zip(*cores, strict=False)),
        iowait_percent=sum(iowaits) / len(iowaits) if iowaits else None,
    )


@dataclass(frozen=True, slots=True)
class GridLayout:
    """How the per-core grid is drawn."""

    kind: str
    """``"bars"`` (index, bar, percent per core) or ``"glyphs"`` (one glyph per core or group)."""
    columns: int
    """Cells per line."""
    rows: int
    """Lines used."""
    bar_width: int = 0
    """Bar cells per core, for ``"bars"``."""
    group: int = 1
    """Cores averaged into one glyph, for ``"glyphs"``."""


GLYPH_PREFIX = "cores   "
"""Label in front of the glyph grid (its width is the label column's)."""


def grid_layout(cores: int, width: int, max_rows: int) -> GridLayout:
    """The richest per-core grid that shows ``cores`` cores in ``width`` x ``max_rows`` cells."""
    if cores <= 0 or max_rows <= 0 or width <= len(GLYPH_PREFIX) + 1:
        return GridLayout("glyphs", 0, 0)
    label = len(str(cores - 1))
    for bar_width in range(LABELLED_BAR_MAX, LABELLED_BAR_MIN - 1, -1):
        cell = label + 1 + bar_width + 5
        columns = (width + 1) // (cell + 1)
        if columns and math.ceil(cores / columns) <= max_rows:
            return GridLayout("bars", columns, math.ceil(cores / columns), bar_width=bar_width)
    per_line = width - len(GLYPH_PREFIX) - 1
    group = 1
    while math.ceil(cores / group / per_line) > max_rows:
        group += 1
    cells = math.ceil(cores / group)
    return GridLayout("glyphs", per_line, math.ceil(cells / per_line), group=group)


def host_height(cores: int, width: int, max_grid_rows: int) -> int:
    """Lines the host panel takes for ``cores`` cores at ``width`` when the grid may take ``max_grid_rows`` lines."""
    return 1 + grid_layout(cores, width - 1, max_grid_rows).rows


class HostPanel(ChangedLinesRefresh, CachedStyles, Widget):
    """Host CPU (per core), iowait, load average, memory and swap, drawn with the line API."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "host-panel--label",
        "host-panel--value",
        "host-panel--dim",
        "host-panel--idle",
        "host-panel--busy",
        "host-panel--saturated",
        "host-panel--mem",
        "host-panel--swap",
    }
    """Styles of the panel's parts (set in gpusight.tcss)."""

    def __init__(self, *, ascii_mode: bool = False, id: str | None = None) -> None:
        super().__init__(id=id)
        self.ascii_mode = ascii_mode
        """Draw bars with ASCII only."""
        self.host: HostSample | None = None
        """Latest host sample."""
        self.max_grid_rows = 2
        """Most lines the per-core grid may take (the app sets it from the screen size)."""
        self._lines: list[Strip] | None = None
        self._lines_width = -1
        self._pending: list[HostSample] = []
        self._shown_at: float | None = None

    def show_frame(self, frame: Frame, context: PanelContext) -> None:
        """Take the frame's host sample (the panel interface; see :meth:`show` for the panel's pace)."""
        self.show(frame.snapshot.host, frame.snapshot.timestamp)

    def show(self, host: HostSample, timestamp: float) -> None:
        """Take the host sample of the snapshot taken at ``timestamp``.

        The panel redraws once per second of snapshot time, when a snapshot starts a new second of
        the clock (in step with the header's clock), or when time went backwards (a replay loops).
        It shows the average of the samples taken since its last redraw (see :func:`average_host`):
        per-core load over 0.25 s is mostly noise, and a 128-core grid redrawn at 4 Hz would be
        most of the bytes sent to the terminal.
        """
        self._pending.append(host)
        shown_at = self._shown_at
        if shown_at is not None and 0 <= timestamp - shown_at and int(timestamp) == int(shown_at):
            return
        averaged = average_host(self._pending)
        self._pending = []
        self._shown_at = timestamp
        if averaged == self.host:
            return
        cores = self._cores()
        self.host = averaged
        if self._cores() != cores:
            self.refresh(layout=True)  # the core grid may take more or fewer lines
        self._update_changed_lines()

    def _cores(self) -> int:
        return len(self.host.cpu_percent_per_core) if self.host else 0

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """The lines the panel draws at ``width``: the summary and the core grid (its CSS height is ``auto``)."""
        return self.height_for(width, self.max_grid_rows)

    def height_for(self, width: int, max_grid_rows: int) -> int:
        """Lines the panel needs at ``width`` when the grid may take ``max_grid_rows`` lines."""
        return host_height(self._cores(), width, max_grid_rows)

    def set_max_grid_rows(self, rows: int) -> None:
        """Limit the grid to ``rows`` lines."""
        if rows != self.max_grid_rows:
            self.max_grid_rows = rows
            self._lines = None
            self.refresh(layout=True)  # the panel's height follows

    def _style(self, name: str) -> Style:
        return self.component_style(f"host-panel--{name}")

    def _load_style(self, percent: float) -> Style:
        if percent >= SATURATED_PERCENT:
            return self._style("saturated")
        return self._style("busy" if percent >= BUSY_PERCENT else "idle")

    def render_line(self, y: int) -> Strip:
        """One line of the panel."""
        width = self.size.width
        if self._lines is None or self._lines_width != width:
            self._lines = self._build(width)
            self._lines_width = width
        return self._lines[y] if y < len(self._lines) else Strip.blank(width, self.base_style)

    def _build(self, width: int) -> list[Strip]:
        host = self.host
        if host is None:
            line = LineBuilder(width, self.base_style)
            line.add_cut(" host: waiting for data", self._style("dim"), self.ascii_mode)
            return [line.strip()]
        return [self._summary(host, width), *self._grid(host.cpu_percent_per_core, width)]

    def _summary(self, host: HostSample, width: int) -> Strip:
        label, value, dim = self._style("label"), self._style("value"), self._style("dim")
        cores = host.cpu_percent_per_core
        mean = sum(cores) / len(cores) if cores else None
        bar_width = 10 if width >= 120 else 6
        line = LineBuilder(width, self.base_style)
        line.add(" CPU ", label)
        line.add(f"{fmt_percent(mean):>4}", value if mean is None else self._load_style(mean))
        line.add(f" ({len(cores)} cores)" if cores else "", dim)
        line.add("  iowait ", label)
        line.add(fmt_percent(host.iowait_percent), value)
        self._gauge(line, "MEM", host.memory_used_bytes, host.memory_total_bytes, bar_width, "mem")
        self._gauge(line, "SWAP", host.swap_used_bytes, host.swap_total_bytes, bar_width, "swap")
        if host.load_average is not None and line.room > 22:
            line.add("  load ", label)
            line.add(" ".join(f"{v:.2f}" for v in host.load_average), value)
        return line.strip()

    def _gauge(self, line: LineBuilder, name: str, used: int | None, total: int | None, width: int, colour: str) -> None:
        if total == 0:
            line.add(f"  {name} ", self._style("label"))
            line.add("none", self._style("dim"))
            return
        text = memory_pair(used, total)
        fraction = percent_of(used, total)
        bar = bar_text(None if fraction is None else fraction / 100, width, self.ascii_mode)
        open_, close = ("[", "]") if self.ascii_mode else ("▕", "▏")
        if line.room < len(name) + len(text) + width + 6:
            if line.room >= len(name) + len(text) + 3:
                line.add(f"  {name} ", self._style("label"))
                line.add(text, self._style("value"))
            return
        line.add(f"  {name} ", self._style("label"))
        line.add(open_, self._style("dim"))
        line.add(bar, self._style(colour))
        line.add(close, self._style("dim"))
        line.add(text, self._style("value"))

    def _grid(self, cores: tuple[float, ...], width: int) -> list[Strip]:
        layout = grid_layout(len(cores), width - 1, self.max_grid_rows)
        if layout.rows == 0:
            return []
        if layout.kind == "bars":
            return self._bar_grid(cores, width, layout)
        return self._glyph_grid(cores, width, layout)

    def _bar_grid(self, cores: tuple[float, ...], width: int, layout: GridLayout) -> list[Strip]:
        label_width = len(str(len(cores) - 1))
        dim, value = self._style("dim"), self._style("value")
        lines = []
        for row in range(layout.rows):
            line = LineBuilder(width, self.base_style)
            line.add(" ")
            for column in range(layout.columns):
                index = row * layout.columns + column
                if index >= len(cores):
                    break
                percent = cores[index]
                if column:
                    line.add(" ")
                line.add(f"{index:>{label_width}} ", dim)
                line.add(bar_text(percent / 100, layout.bar_width, self.ascii_mode), self._load_style(percent))
                line.add(f"{percent:>4.0f}%", value)
            lines.append(line.strip())
        return lines

    def _glyph_grid(self, cores: tuple[float, ...], width: int, layout: GridLayout) -> list[Strip]:
        levels = ASCII_LEVELS if self.ascii_mode else UNICODE_LEVELS
        group = layout.group
        cells = [sum(cores[i : i + group]) / len(cores[i : i + group]) for i in range(0, len(cores), group)]
        label = GLYPH_PREFIX if group == 1 else f"{group}/cell".ljust(len(GLYPH_PREFIX))[: len(GLYPH_PREFIX)]
        lines = []
        for row in range(layout.rows):
            line = LineBuilder(width, self.base_style)
            line.add(" " + (label if row == 0 else " " * len(label)), self._style("label"))
            chunk = cells[row * layout.columns : (row + 1) * layout.columns]
            run_text, run_style = "", None
            for percent in chunk:
                glyph = levels[max(1, min(8, round(percent / 100 * 8)))]
                style = self._load_style(percent)
                if style != run_style and run_text:
                    line.add(run_text, run_style)
                    run_text = ""
                run_text += glyph
                run_style = style
            if run_text:
                line.add(run_text, run_style)
            lines.append(line.strip())
        return lines
