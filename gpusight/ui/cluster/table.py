"""The cluster table: one row per host, then a compact row per GPU, with utilization and memory sparklines.

A line-API widget (a :class:`~textual.scroll_view.ScrollView`) like the process table: each poll re-derives
the rows' cell values (plain tuples), and only the rows inside the viewport whose values changed are
re-rendered and refreshed cell by cell (:mod:`gpusight.ui.terminal.line_diff`); 800 GPU rows cost 800 small tuples per
poll, never 800 widgets. Hosts can be collapsed to their header row, filtered by name and sorted.
A host that is down is dimmed with its note; unknown values read N/A, never 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.geometry import Size
from textual.strip import Strip

from gpusight.cluster.counts import counted, node_gpus
from gpusight.cluster.frame import ClusterFrame, ClusterGpu, ClusterMig, ClusterNode
from gpusight.cluster.job_speed import job_key
from gpusight.cluster.job_speed_text import job_utilization
from gpusight.textsafe import safe_text
from gpusight.ui.cluster.text import (
    MEMORY,
    MIB,
    UTIL,
    history_by_metric,
    host_text,
    mean,
    series_of,
    severity_counts,
)
from gpusight.ui.terminal.line_diff import line_regions, refresh_regions
from gpusight.ui.widgets.chart import chart_rows
from gpusight.ui.widgets.format import LineBuilder, fit, fit_cell, memory_pair, short_gpu_name
from gpusight.ui.widgets.row_cursor import RowCursorView
from gpusight.units import NA, fmt_bytes, fmt_celsius, fmt_percent, fmt_watts

SORT_KEYS = ("name", "util", "memory", "free")
"""Host orders :meth:`ClusterTable.sort_by` accepts."""

DESCENDING_FIRST = frozenset({"util", "memory", "free"})
"""Sort keys whose first selection puts the largest values on top."""

SPARK_MIN = 8
"""Narrowest sparkline worth drawing."""

SPARK_MAX = 60
"""Widest sparkline; longer histories show their newest values."""

MFU_SHOWN = 3
"""Most jobs' MFU shown on a host's row."""

HOST_ROW = -1
"""GPU index of a host's header row in a row key."""

RowKey = tuple[str, int]
"""(host, GPU index), or (host, HOST_ROW) for the host's header row, or (host, :func:`mig_row`) for a MIG instance."""

MIG_ROWS = 1 << 16
"""MIG instance ids per GPU in a MIG row's number (GPU_I_ID is at most 14 today)."""


def mig_row(gpu: int, gpu_instance_id: int) -> int:
    """The second part of the row key of MIG instance ``gpu_instance_id`` of GPU ``gpu``: below ``HOST_ROW``."""
    return HOST_ROW - 1 - gpu * MIG_ROWS - gpu_instance_id


@dataclass(frozen=True, slots=True)
class _Column:
    label: str
    width: int
    right: bool


_COLUMNS = (
    _Column("GPU", 5, True),
    _Column("MODEL", 14, False),
    _Column("UTIL", 5, True),
    _Column("MEMORY", 14, True),
    _Column("POWER", 5, True),
    _Column("TEMP", 4, True),
    _Column("SM", 4, True),
)
_DROP_ORDER = (1, 6, 5, 4)
"""Columns given up first on narrow terminals (model, SM, temperature, power) before the sparklines go."""


@dataclass(frozen=True, slots=True)
class _Row:
    key: RowKey
    cells: tuple[object, ...]
    """Host rows: the texts of its header; GPU rows: the column texts, then the util and memory histories and the memory scale."""
    down: bool
    """The row's host is down (drawn dimmed)."""

    @property
    def host(self) -> str:
        return self.key[0]

    @property
    def is_host(self) -> bool:
        return self.key[1] == HOST_ROW

    @property
    def is_mig(self) -> bool:
        return self.key[1] < HOST_ROW


def _layout(width: int) -> tuple[tuple[int, ...], int, int]:
    """(columns, util sparkline width, memory sparkline width) for a table ``width`` cells wide."""
    columns = list(range(len(_COLUMNS)))
    for index in _DROP_ORDER:
        if _fixed_width(columns) + 2 * (SPARK_MIN + 1) <= width:
            break
        columns.remove(index)
    room = width - _fixed_width(columns)
    if room >= 2 * (SPARK_MIN + 1):
        spark = min(SPARK_MAX, (room - 2) // 2)
        return tuple(columns), spark, spark
    return tuple(columns), (room - 1 if room > SPARK_MIN else 0), 0


def _fixed_width(columns: Iterable[int]) -> int:
    return sum(_COLUMNS[i].width + 1 for i in columns)


def _sort_value(node: ClusterNode, key: str) -> object:
    if key == "util":
        return mean(gpu.utilization_percent for gpu in node.gpus)
    if key == "memory":
        used = [gpu.memory_used_bytes for gpu in node.gpus if gpu.memory_used_bytes is not None]
        return sum(used) if used else None
    if key == "free":
        return node.free_gpus
    return node.host.lower()


def sort_nodes(nodes: Iterable[ClusterNode], key: str, reverse: bool) -> list[ClusterNode]:
    """``nodes`` ordered by ``key``; unknown values go last, ties by host name."""
    known = [node for node in nodes if _sort_value(node, key) is not None]
    unknown = [node for node in nodes if _sort_value(node, key) is None]
    known.sort(key=lambda node: node.host)
    known.sort(key=lambda node: _sort_value(node, key), reverse=reverse)  # type: ignore[arg-type,return-value]
    return known + sorted(unknown, key=lambda node: node.host)


def filter_nodes(nodes: Iterable[ClusterNode], text: str) -> list[ClusterNode]:
    """The nodes whose name (or a GPU's model) holds ``text``, case-insensitively; all for empty text."""
    needle = text.strip().lower()
    if not needle:
        return list(nodes)
    return [
        node for node in nodes
        if needle in node.host.lower() or any(needle in (gpu.model or "").lower() for gpu in node.gpus)
    ]


class ClusterTable(RowCursorView[RowKey], can_focus=True):
    """Hosts and their GPUs, with a cursor (keys from :class:`~gpusight.ui.widgets.row_cursor.RowCursorView`); feed it frames
    with :meth:`show`."""

    CURSOR_COMPONENT: ClassVar[str] = "cluster-table--cursor"
    """The component class that styles the cursor row."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "cluster-table--header",
        "cluster-table--host",
        "cluster-table--down",
        "cluster-table--up",
        "cluster-table--note",
        "cluster-table--dim",
        "cluster-table--warn",
        "cluster-table--cursor",
        "cluster-table--util",
        "cluster-table--mem",
    }

    DEFAULT_CSS = """
    ClusterTable { overflow-x: hidden; overflow-y: auto; height: 1fr; scrollbar-size-vertical: 1; }
    ClusterTable > .cluster-table--header { text-style: bold; color: $text-muted; }
    ClusterTable > .cluster-table--host { text-style: bold; background: $primary 15%; }
    ClusterTable > .cluster-table--up { color: $success; }
    ClusterTable > .cluster-table--down { background: $error; color: $text; text-style: bold; }
    ClusterTable > .cluster-table--note { color: $warning; text-style: italic; }
    ClusterTable > .cluster-table--dim { color: $text-muted; text-style: dim; }
    ClusterTable > .cluster-table--warn { color: $warning; text-style: bold; }
    ClusterTable > .cluster-table--cursor { background: $block-cursor-blurred-background; }
    ClusterTable:focus > .cluster-table--cursor { background: $block-cursor-background; text-style: bold; }
    ClusterTable > .cluster-table--util { color: $success; }
    ClusterTable > .cluster-table--mem { color: $secondary-lighten-2; }
    """

    def __init__(self, *, ascii_mode: bool = False, id: str | None = None) -> None:
        super().__init__(id=id)
        self.ascii_mode = ascii_mode
        """Draw sparklines and arrows with ASCII only."""
        self._frame: ClusterFrame | None = None
        self._rows: list[_Row] = []
        self._cursor = 0
        self._cursor_key: RowKey | None = None
        self._collapsed: set[str] = set()
        self._filter = ""
        self._sort_key = "name"
        self._sort_reverse = False
        self._strips: dict[RowKey, tuple[tuple[object, ...], Strip]] = {}
        self._styles: dict[str, Style] = {}
        self._line_width = 80
        self._columns, self._spark_util, self._spark_mem = _layout(self._line_width)
        self.rows_rendered = 0
        """Row lines rendered since start (a measure of the work a poll causes)."""

    # -- state ------------------------------------------------------------------------------

    @property
    def row_count(self) -> int:
        """Rows in the table (host and GPU rows), not counting the column header."""
        return len(self._rows)

    @property
    def sort_key(self) -> str:
        """The host order in force (one of SORT_KEYS)."""
        return self._sort_key

    @property
    def sort_reverse(self) -> bool:
        """Whether the order is descending."""
        return self._sort_reverse

    @property
    def filter_text(self) -> str:
        """The host filter ("" for none)."""
        return self._filter

    def is_collapsed(self, host: str) -> bool:
        """Whether ``host`` shows only its header row."""
        return host in self._collapsed

    def selected_host(self) -> str | None:
        """The host of the row under the cursor."""
        return self._rows[self._cursor].host if self._rows else None

    def selected_key(self) -> RowKey | None:
        """The key of the row under the cursor: (host, GPU index) or (host, HOST_ROW)."""
        return self._cursor_key

    def show(self, frame: ClusterFrame) -> None:
        """Show ``frame``: rebuild the row values and refresh the visible cells that changed."""
        self._frame = frame
        self._apply()

    def sort_by(self, key: str) -> None:
        """Order the hosts by ``key`` (one of SORT_KEYS); the same key again reverses the order."""
        if key not in SORT_KEYS:
            raise ValueError(f"unknown sort key {key!r}; expected one of {', '.join(SORT_KEYS)}")
        if key == self._sort_key:
            self._sort_reverse = not self._sort_reverse
        else:
            self._sort_key, self._sort_reverse = key, key in DESCENDING_FIRST
        self._strips.pop(("", HOST_ROW), None)
        self._apply(header=True)

    def set_filter(self, text: str) -> None:
        """Show only the hosts whose name (or GPU model) holds ``text``."""
        self._filter = text
        self._apply()

    def toggle_host(self, host: str | None = None) -> None:
        """Collapse or expand ``host`` (default: the cursor's), keeping the cursor on its header row."""
        host = host if host is not None else self.selected_host()
        if host is None:
            return
        self._collapsed.symmetric_difference_update({host})
        self._cursor_key = (host, HOST_ROW)
        self._apply()

    def toggle_all(self) -> None:
        """Collapse every host, or expand them all when all shown ones are collapsed already."""
        hosts = {row.host for row in self._rows}
        if hosts and hosts <= self._collapsed:
            self._collapsed -= hosts
        else:
            self._collapsed |= hosts
        host = self.selected_host()
        self._cursor_key = None if host is None else (host, HOST_ROW)
        self._apply()

    # -- rows -------------------------------------------------------------------------------

    def _apply(self, *, header: bool = False) -> None:
        old = self._rows
        self._rows = self._build_rows()
        self._place_cursor()
        if not self.is_mounted:
            return
        self.virtual_size = Size(self._line_width, len(self._rows) + 1)
        if self._fit_width() or header or [row.key for row in old] != [row.key for row in self._rows]:
            live = {row.key for row in self._rows}
            self._strips = {key: value for key, value in self._strips.items() if key in live}
            self.refresh()
            return
        top = int(self.scroll_offset.y)
        height = self.scrollable_content_region.height
        for index in range(top, min(len(self._rows), top + height)):
            before_row, row = old[index], self._rows[index]
            if before_row.cells == row.cells and before_row.down == row.down:
                continue
            cached = self._strips.get(row.key)
            after = self._row_strip(row)
            y = index - top + 1
            if index == self._cursor:
                self._refresh_row(index)
            else:
                refresh_regions(self, line_regions(y, None if cached is None else cached[1], after, self._line_width))

    def _build_rows(self) -> list[_Row]:
        frame = self._frame
        if frame is None:
            return []
        histories = history_by_metric(frame)
        jobs: dict[str, int] = {}
        speeds = {speed.key: speed for speed in frame.job_speeds}
        mfu: dict[str, list[str]] = {}
        for job in frame.jobs:
            jobs[job.host] = jobs.get(job.host, 0) + 1
            speed = speeds.get(job_key(job))
            if speed is not None and speed.utilization_name is not None:
                mfu.setdefault(job.host, []).append(job_utilization(speed))
        by_instance: dict[tuple[str, int | None, int | None], list[str]] = {}
        for process in frame.processes:
            if process.gpu_instance_id is not None:
                by_instance.setdefault((process.host, process.gpu, process.gpu_instance_id), []).append(
                    f"{safe_text(process.name) or '?'} r{safe_text(process.rank)}")
        advice: dict[str, list[object]] = {}
        for host, item in frame.node_advice:
            advice.setdefault(host, []).append(item.severity)
        rows: list[_Row] = []
        nodes = sort_nodes(filter_nodes(frame.nodes, self._filter), self._sort_key, self._sort_reverse)
        for node in nodes:
            collapsed = node.host in self._collapsed
            cells = self._host_cells(node, collapsed, jobs, advice, mfu.get(node.host, []))
            rows.append(_Row((node.host, HOST_ROW), cells, not node.up))
            if collapsed:
                continue
            for gpu in node.gpus:
                util = series_of(histories, UTIL.metric, node.host, gpu.index)[-SPARK_MAX:]
                memory = series_of(histories, MEMORY.metric, node.host, gpu.index)[-SPARK_MAX:]
                rows.append(_Row((node.host, gpu.index), _gpu_cells(gpu, util, memory), not node.up))
                rows.extend(_Row((node.host, mig_row(gpu.index, mig.gpu_instance_id)),
                                 _mig_cells(mig, by_instance.get((node.host, gpu.index, mig.gpu_instance_id), [])),
                                 not node.up) for mig in gpu.mig)
        return rows

    def _host_cells(
        self, node: ClusterNode, collapsed: bool, jobs: dict[str, int], advice: dict[str, list[object]],
        mfu: list[str],
    ) -> tuple[object, ...]:
        arrow = (">" if collapsed else "v") if self.ascii_mode else ("▸" if collapsed else "▾")
        gpus = node_gpus(node)
        exporter = "gpusight" if node.exporter == "gpusight" else "dcgm only"
        job_count = jobs.get(node.host, 0)
        job_text = counted(job_count, "job") if node.exporter == "gpusight" else ""
        if mfu:  # each job's MFU across all its nodes, not this node's alone
            job_text += " " + ", ".join(mfu[:MFU_SHOWN]) + (", ..." if len(mfu) > MFU_SHOWN else "")
        util = mean(gpu.utilization_percent for gpu in node.gpus)
        util_text = f"util {fmt_percent(util)}" if node.up and node.gpus else ""
        if node.up and node.cpu_percent is not None:
            util_text += f"  cpu {fmt_percent(node.cpu_percent)}"
            if node.iowait_percent is not None:
                util_text += f" (iowait {fmt_percent(node.iowait_percent)})"
        counts = severity_counts(advice.get(node.host, ()))  # type: ignore[arg-type]
        advice_text = ("advice " + " ".join(f"{n} {s.value.upper()}" for s, n in counts)) if counts else ""
        state = "up" if node.up else "DOWN"
        note = safe_text(node.note, 120)
        drain = f"{counted(node.drain_gpus, 'GPU')} to drain" if node.drain_gpus else ""
        return (arrow, host_text(node.host), state, exporter, gpus, job_text, util_text, advice_text, note, drain)

    def _cursor_fallback(self, key: RowKey) -> RowKey:
        """A GPU row that is gone (its host collapsed or filtered) leaves the cursor on its host's row."""
        return (key[0], HOST_ROW)

    # -- rendering --------------------------------------------------------------------------

    def _style(self, *names: str) -> Style:
        """The widget's style with the component classes ``names`` laid over it, in order (cached)."""
        key = "+".join(names)
        style = self._styles.get(key)
        if style is None:
            style = self.rich_style
            for name in names:
                if name:
                    style += self.get_component_rich_style(name, partial=True)
            self._styles[key] = style
        return style

    def notify_style_update(self) -> None:
        """Drop cached styles and lines when the theme or focus changes."""
        super().notify_style_update()
        self._styles.clear()
        self._strips.clear()

    def on_resize(self, event: events.Resize) -> None:
        """Fit the columns and sparklines to the new width."""
        self._fit_width()
        self.refresh()

    def _fit_width(self) -> bool:
        """Fit the columns to the width left beside the scroll bar (which comes and goes without a resize);
        True when it changed."""
        width = max(1, self.scrollable_content_region.width)
        if width == self._line_width:
            return False
        self._line_width = width
        self._columns, self._spark_util, self._spark_mem = _layout(width)
        self._strips.clear()
        self.virtual_size = Size(width, len(self._rows) + 1)
        return True

    def _header_strip(self) -> Strip:
        style = self._style("cluster-table--header")
        arrow = ("v" if self._sort_reverse else "^") if self.ascii_mode else ("▼" if self._sort_reverse else "▲")
        text = "".join(fit_cell(_COLUMNS[i].label, _COLUMNS[i].width, _COLUMNS[i].right) + " " for i in self._columns)
        for caption, short, width in (("util history", "util", self._spark_util), ("memory history", "mem", self._spark_mem)):
            if width:
                text += fit_cell(caption if width > len(caption) else short, width, False) + " "
        line = LineBuilder(self._line_width, self._style(""))
        line.add_cut(text.rstrip(), style, self.ascii_mode)
        line.add_cut(f"  hosts by {self._sort_key}{arrow}", style, self.ascii_mode)
        return line.strip()

    def _empty_strip(self) -> Strip:
        """What the first row says while there is none."""
        if self._frame is None:
            text = "Waiting for the first poll."
        elif self._frame.nodes:
            text = f"No host matches the filter {safe_text(self._filter, 40)!r} (Esc clears it)."
        else:
            text = "No GPU nodes found: see the lines below."
        line = LineBuilder(self._line_width, self._style(""))
        line.add_cut(text, self._style("cluster-table--note"), self.ascii_mode)
        return line.strip()

    def _row_strip(self, row: _Row) -> Strip:
        cached = self._strips.get(row.key)
        if cached is not None and cached[0] == row.cells:
            return cached[1]
        self.rows_rendered += 1
        if row.is_host:
            strip = self._host_strip(row)
        else:
            strip = self._mig_strip(row) if row.is_mig else self._gpu_strip(row)
        self._strips[row.key] = (row.cells, strip)
        return strip

    def _host_strip(self, row: _Row) -> Strip:
        arrow, name, state, exporter, gpus, jobs, util, advice, note, drain = (str(cell) for cell in row.cells)
        host = self._style("cluster-table--host")
        line = LineBuilder(self._line_width, host)
        line.add(f"{arrow} ")
        line.add_cut(name, host, self.ascii_mode)
        line.add("  ")
        state_style = "cluster-table--down" if row.down else "cluster-table--up"
        line.add(f" {state} " if row.down else state, self._style("cluster-table--host", state_style))
        if note:  # what is wrong comes before the counts, which a narrow terminal drops
            line.add("  ")
            line.add_cut(note, self._style("cluster-table--host", "cluster-table--note"), self.ascii_mode)
        for part, style in ((drain, "cluster-table--warn"), (exporter, ""), (gpus, ""), (advice, "cluster-table--warn"),
                            (jobs, ""), (util, "")):
            if part and not line.add("  " + part, self._style("cluster-table--host", style)):
                break
        return line.strip()

    def _mig_strip(self, row: _Row) -> Strip:
        """A MIG instance under its GPU: its id and profile, memory, SM activity where served, its processes."""
        base = self._style("cluster-table--dim" if row.down else "")
        line = LineBuilder(self._line_width, base)
        line.add(("  '- " if self.ascii_mode else "  └ ") + " ".join(str(cell) for cell in row.cells if cell))
        return line.strip()

    def _gpu_strip(self, row: _Row) -> Strip:
        texts, util, memory, memory_scale = row.cells[:7], row.cells[7], row.cells[8], row.cells[9]
        base = self._style("cluster-table--dim" if row.down else "")
        text = "".join(fit_cell(str(texts[i]), _COLUMNS[i].width, _COLUMNS[i].right) + " " for i in self._columns)
        segments = [Segment(text, base if row.down or not row.cells[10] else self._style("cluster-table--warn"))]
        width = len(text)
        for values, spark, maximum, style in (
            (util, self._spark_util, 100.0, "cluster-table--util"),
            (memory, self._spark_mem, memory_scale, "cluster-table--mem"),
        ):
            if spark <= 0:
                continue
            bar_style = base if row.down else self._style(style)
            chart = chart_rows(values, spark, 1, maximum, bar_style, ascii_mode=self.ascii_mode, blank=base)[0]  # type: ignore[arg-type]
            segments.extend(chart)
            segments.append(Segment(" ", base))
            width += spark + 1
        return Strip(segments, width).adjust_cell_length(self._line_width, base)

    def render_line(self, y: int) -> Strip:
        """The column header on top, then the rows from the scroll position."""
        if self._fit_width():
            self.refresh()
        if y == 0:
            return self._header_strip()
        index = int(self.scroll_offset.y) + y - 1
        if not 0 <= index < len(self._rows):
            if index == 0:
                return self._empty_strip()
            return Strip.blank(self._line_width, self._style(""))
        return self._cursor_strip(index, self._row_strip(self._rows[index]))

    # -- clicks -----------------------------------------------------------------------------

    def on_click(self, event: events.Click) -> None:
        """A click on a row moves the cursor there."""
        offset = event.get_content_offset(self)
        if offset is not None and offset.y > 0:
            self.move_cursor(int(self.scroll_offset.y) + offset.y - 1)


def _gpu_cells(gpu: ClusterGpu, util: tuple[float | None, ...], memory: tuple[float | None, ...]) -> tuple[object, ...]:
    """A GPU row's values: the column texts, the two histories and the memory scale (MiB)."""
    state = "LOST" if gpu.lost else None
    drain = gpu.health is not None and gpu.health.needs_drain
    model = short_gpu_name(gpu.model)
    if drain and gpu.health is not None:  # the worst finding's name, e.g. "DRAIN Xid 79"
        model = "DRAIN " + gpu.health.findings[0].title.split(":")[0]
    return (
        str(gpu.index),
        fit(model, _COLUMNS[1].width),
        state or fmt_percent(gpu.utilization_percent),
        memory_pair(gpu.memory_used_bytes, gpu.memory_total_bytes) if gpu.memory_used_bytes is not None else NA,
        fmt_watts(gpu.power_watts),
        fmt_celsius(gpu.temperature_celsius),
        fmt_percent(gpu.sm_active_percent) if gpu.sm_active_percent is not None else "",
        util,
        memory,
        None if gpu.memory_total_bytes is None else gpu.memory_total_bytes / MIB,
        drain,
    )


def _mig_cells(mig: ClusterMig, processes: list[str]) -> tuple[object, ...]:
    """A MIG row's texts: instance id and profile, memory, SM activity (only where served), processes."""
    memory = (NA if mig.memory_used_bytes is None
              else memory_pair(mig.memory_used_bytes, mig.memory_total_bytes) if mig.memory_total_bytes is not None
              else fmt_bytes(mig.memory_used_bytes))
    activity = f"SM {fmt_percent(mig.sm_active_percent)}" if mig.sm_active_percent is not None else ""
    return (f"MIG {mig.gpu_instance_id}", safe_text(mig.profile, 16), memory, activity, safe_text("; ".join(processes), 80))
