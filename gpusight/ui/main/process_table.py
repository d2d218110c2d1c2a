"""The process table: GPU processes with their DataLoader workers, sortable, filterable and cheap to refresh.

It is a line-API widget (a :class:`~textual.scroll_view.ScrollView`), not a ``DataTable``: the rows are
re-derived from the newest snapshot about once per second (:attr:`ProcessTable.APPLY_INTERVAL`), each
row's rendered line is cached by its cell values, and only the lines whose values changed are refreshed.
Untrusted text (names, command lines, users, notes) goes through :func:`~gpusight.textsafe.safe_text` and is
placed in plain-text segments that are never parsed as markup, so ``[red]`` is shown literally.
The WAIT % and STEP/S columns (input-wait share and step rate) and the THRU/S and MFU/HFU columns (tokens or
samples per second, and the FLOPs utilization named MFU or HFU by where the FLOPs come from), all measured inside
the training loop by ``gpusight.torch``, appear only while some process reports them, N/A for what a reporting
trainer does not know and blank for processes that report nothing; a trainer's dimmed note says why its MFU is
N/A, and the first rank of a job of several gives the job's throughput and MFU
(:func:`~gpusight.ui.main.process_rows.job_speed_notes`). The JOB column (``job 3 · rank 5/8``, see :mod:`gpusight.job_text`) appears while the snapshot has jobs (recordings
made before jobs have none); narrow terminals get its compact form (``3·5/8``). The CONTAINER column (the
container, pod or Slurm job a GPU process runs in, ``docker 3f2a9c1b4d5e``, see
:func:`~gpusight.job_text.container_labels`) appears while some process runs in one; on narrow terminals it
stays longer than USER and JOB, in a compact form (``3f2a9c1b4d5e``).
"""

from __future__ import annotations

import time
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.scrollbar import ScrollBarRender
from textual.strip import Strip
from textual.timer import Timer

from gpusight.job_text import jobs_by_id
from gpusight.sampling.frame import Frame
from gpusight.snapshot.model import JobSample, ProcessSample, Snapshot
from gpusight.speed_text import reports_speed
from gpusight.ui.main.panel import PanelContext
from gpusight.ui.main.process_rows import (
    COLUMNS,
    DESCENDING_FIRST,
    MIN_COMMAND_WIDTH,
    SORT_KEYS,
    Row,
    RowBuilder,
    RowKey,
    columns_for,
    fixed_width,
    is_measured,
    wanted_columns,
)
from gpusight.ui.terminal.line_diff import line_regions, refresh_regions
from gpusight.ui.widgets.format import fit_cell
from gpusight.ui.widgets.row_cursor import RowCursorView


class _BlanksScrollBarRender(ScrollBarRender):
    """Scroll bar drawn without block characters: partial thumb cells are left blank (for ASCII mode)."""

    VERTICAL_BARS: ClassVar[list[str]] = [" "] * 8
    HORIZONTAL_BARS: ClassVar[list[str]] = [" "] * 8


class ProcessTable(RowCursorView[RowKey], can_focus=True):
    """GPU processes, each followed by its DataLoader workers, with sort, filter and a collapse toggle.

    Feed it with :meth:`update_snapshot` every tick; it applies the newest snapshot once per
    :attr:`APPLY_INTERVAL` seconds (early, but at least half of it apart, when a snapshot starts a new
    second of the clock, so it changes in step with the header), and at once after :meth:`sort_by`, :meth:`set_filter` or
    :meth:`toggle_workers`. Enter on a row posts :class:`ProcessTable.ProcessSelected`. Clicking a
    column header sorts by that column.
    """

    CURSOR_COMPONENT: ClassVar[str] = "process-table--cursor"
    """The component class that styles the cursor row."""

    APPLY_INTERVAL = 1.0
    """Seconds between two applied snapshots (half of it at least, when aligning to the clock)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "process-table--header",
        "process-table--cursor",
        "process-table--worker",
        "process-table--note",
    }

    DEFAULT_CSS = """
    ProcessTable {
        overflow-x: hidden;
        overflow-y: auto;
        height: 1fr;
    }
    ProcessTable > .process-table--header { text-style: bold; }
    ProcessTable > .process-table--cursor { background: $block-cursor-blurred-background; }
    ProcessTable:focus > .process-table--cursor {
        background: $block-cursor-background;
        color: $block-cursor-foreground;
        text-style: bold;
    }
    ProcessTable > .process-table--worker { color: $text-muted; }
    ProcessTable > .process-table--note { text-style: dim italic; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "select", "Details", show=False)]
    """Enter selects; the cursor keys come from :class:`~gpusight.ui.widgets.row_cursor.RowCursorView`."""

    class ProcessSelected(Message):
        """Enter was pressed on a row."""

        def __init__(self, process: ProcessSample) -> None:
            """Carry the chosen ``process``."""
            super().__init__()
            self.process = process
            """The process under the cursor (a GPU process or a DataLoader worker)."""

    def __init__(self, ascii_mode: bool = False, id: str | None = None, classes: str | None = None) -> None:
        """Create an empty table; ``ascii_mode`` draws the worker tree and markers with ASCII only."""
        super().__init__(id=id, classes=classes)
        self.ascii_mode = ascii_mode
        """Whether glyphs are plain ASCII."""
        self._builder = RowBuilder(ascii_mode)
        self._snapshot: Snapshot | None = None
        self._pending: Snapshot | None = None
        self._last_apply = -float("inf")
        self._timer: Timer | None = None
        self._sort_key = "gpu"
        self._sort_reverse = False
        self._filter = ""
        self._collapsed = False
        self._rows: list[Row] = []
        self._cursor = 0
        self._cursor_key: RowKey | None = None
        self._strips: dict[RowKey, tuple[tuple[str, ...], Strip]] = {}
        self._base_style: Style | None = None
        self._jobs: dict[int, JobSample] = {}
        self._optional_shown = (False, False, False, False, False)
        """Whether the measured columns, the speed columns and the JOB column are among the wanted ones, whether a
        job has several processes, and whether the CONTAINER column is wanted."""
        self._shown = wanted_columns(False, False, False, False)
        self._fixed_width = fixed_width(self._shown)
        self._line_width = self._fixed_width + MIN_COMMAND_WIDTH

    @property
    def sort_key(self) -> str:
        """The current sort key (one of SORT_KEYS)."""
        return self._sort_key

    @property
    def sort_reverse(self) -> bool:
        """True when the current sort is descending."""
        return self._sort_reverse

    @property
    def filter_text(self) -> str:
        """The current filter text ("" when none)."""
        return self._filter

    @property
    def workers_collapsed(self) -> bool:
        """True when worker rows are hidden (trainers still show the count)."""
        return self._collapsed

    def show_frame(self, frame: Frame, context: PanelContext) -> None:
        """Take the frame's snapshot at the table's own pace, or now when ``context.at_once`` (the panel interface;
        see :meth:`update_snapshot`)."""
        self.update_snapshot(frame.snapshot, at_once=context.at_once)

    def update_snapshot(self, snapshot: Snapshot, *, at_once: bool = False) -> None:
        """Take the newest snapshot; it is shown now if the last update is old enough (or ``at_once``), else on a timer."""
        self._pending = snapshot
        now = time.monotonic()
        due = self._last_apply + self.APPLY_INTERVAL
        shown = self._snapshot
        # Snapshots that start a new second of the clock are shown early, so the table changes in the
        # same frame as the header's clock and the host panel instead of in frames of its own.
        new_second = shown is None or int(snapshot.timestamp) != int(shown.timestamp)
        if at_once or now >= due or not self.is_mounted or (new_second and now >= due - self.APPLY_INTERVAL / 2):
            self._apply()
        elif self._timer is None:
            self._timer = self.set_timer(due - now, self._on_apply_timer)

    def sort_by(self, key: str) -> None:
        """Sort the process groups by ``key`` (one of SORT_KEYS); the same key again reverses the order."""
        if key not in SORT_KEYS:
            raise ValueError(f"unknown sort key {key!r}; expected one of {', '.join(SORT_KEYS)}")
        if key == self._sort_key:
            self._sort_reverse = not self._sort_reverse
        else:
            self._sort_key = key
            self._sort_reverse = key in DESCENDING_FIRST
        self._apply()
        if self.is_mounted:
            self.refresh()  # the header's sort marker moved even when the row order did not

    def set_filter(self, text: str) -> None:
        """Show only rows whose pid, user, name, command line or container contains ``text`` (case-insensitive).

        A job's name, ``job 3`` (or ``job3``), shows the processes of job 3, each with its workers. A container
        matches by its label, id, host name, pod namespace or Slurm job (``docker``, ``ml-team``, ``4242``).
        """
        self._filter = text
        self._apply()

    def toggle_workers(self) -> None:
        """Hide or show the DataLoader worker rows."""
        self._collapsed = not self._collapsed
        self._apply()

    def selected_process(self) -> ProcessSample | None:
        """The process on the cursor row, or None when the table is empty."""
        if not self._rows:
            return None
        return self._rows[self._cursor].process

    def displayed_processes(self) -> tuple[ProcessSample, ...]:
        """The processes on the rows, top to bottom, as currently displayed."""
        return tuple(row.process for row in self._rows)

    # -- applying snapshots -------------------------------------------------------------------

    def _on_apply_timer(self) -> None:
        self._timer = None
        if self._pending is not None:
            self._apply()

    def _apply(self) -> None:
        """Rebuild the rows from the newest snapshot and refresh what changed."""
        if self._pending is not None:
            self._snapshot = self._pending
            self._pending = None
            self._last_apply = time.monotonic()
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        old_rows = self._rows
        if self._snapshot is not None:
            self._jobs = jobs_by_id(self._snapshot)
            grouped = any(len(job.pids) > 1 or (job.world_size or 1) > 1 for job in self._jobs.values())
            processes = self._snapshot.processes
            self._show_optional(any(is_measured(p) for p in processes), any(reports_speed(p) for p in processes),
                                bool(self._jobs), grouped, any(p.container is not None for p in processes))
        self._rows = self._builder.rows(self._snapshot, self._jobs, self._filter, self._sort_key, self._sort_reverse,
                                        self._collapsed)
        self._place_cursor()
        if not self.is_mounted:
            return
        self.virtual_size = Size(self._line_width, len(self._rows) + 1)
        if [r.key for r in old_rows] != [r.key for r in self._rows]:
            live = {row.key for row in self._rows}
            self._strips = {k: v for k, v in self._strips.items() if k in live}
            self.refresh()
            return
        top = int(self.scroll_offset.y)
        height = self.scrollable_content_region.height
        base = self._base_style or self.rich_style
        for index, (old, new) in enumerate(zip(old_rows, self._rows, strict=True)):
            if old.cells != new.cells and top <= index < top + height:
                before = self._strips.get(old.key)
                after = self._row_strip(new, base)
                # A change in a hidden column (ELAPSED at 80 columns) gives no regions and repaints nothing.
                y = index - top + 1
                refresh_regions(self, line_regions(y, None if before is None else before[1], after, self._line_width))

    def _show_optional(self, measured: bool, speed: bool, jobs: bool, grouped: bool, containers: bool) -> None:
        """Show or hide the measured columns (WAIT %, STEP/S), the speed columns (THRU/S, MFU/HFU), the JOB column (compact on narrow terminals only while a
        job has several processes, see ``columns_for``) and the CONTAINER column; the command column takes up
        the difference."""
        if (measured, speed, jobs, grouped, containers) == self._optional_shown:
            return
        self._optional_shown = (measured, speed, jobs, grouped, containers)
        if self.is_mounted:
            self._fit_columns(self.scrollable_content_region.width)
        else:
            self._shown = wanted_columns(measured, speed, jobs, containers)
            self._fixed_width = fixed_width(self._shown)
        self._strips.clear()
        self.refresh()

    def _fit_columns(self, width: int) -> None:
        """Pick the columns for ``width`` cells and give the command column the rest."""
        self._shown = columns_for(width, *self._optional_shown)
        self._fixed_width = fixed_width(self._shown)
        self._builder.command_width = max(MIN_COMMAND_WIDTH, width - self._fixed_width)

    # -- rendering ----------------------------------------------------------------------------

    def on_mount(self) -> None:
        """In ASCII mode, draw the scroll bar without block characters."""
        if self.ascii_mode:
            # Textual types ScrollBar.renderer as a ClassVar, yet documents setting it on one scroll bar
            # (``widget.vertical_scrollbar.renderer = ...``); the instance attribute affects this table only.
            self.vertical_scrollbar.renderer = _BlanksScrollBarRender  # type: ignore[misc]

    def on_resize(self, event: events.Resize) -> None:
        """Fit the command column to the new width and re-cut the command lines."""
        width = self.scrollable_content_region.width
        self._fit_columns(width)
        self._line_width = max(width, 1)
        self._strips.clear()
        self._apply()

    def notify_style_update(self) -> None:
        """Drop cached lines when the theme or focus styles change."""
        super().notify_style_update()
        self._strips.clear()
        self._base_style = None

    def on_focus(self, event: events.Focus) -> None:
        """Redraw the cursor in its focused style."""
        self._refresh_row(self._cursor)

    def on_blur(self, event: events.Blur) -> None:
        """Redraw the cursor in its unfocused style."""
        self._refresh_row(self._cursor)

    def _header_strip(self, base: Style) -> Strip:
        style = base + self.get_component_rich_style("process-table--header", partial=True)
        arrow = ("v" if self._sort_reverse else "^") if self.ascii_mode else ("▼" if self._sort_reverse else "▲")
        parts = []
        for column in (COLUMNS[i] for i in self._shown):
            label = column.label + (arrow if column.sort_key == self._sort_key else "")
            parts.append(fit_cell(label, column.width, column.right) + " ")
        parts.append("COMMAND")
        return _line([Segment("".join(parts), style)], self._line_width, base)

    def _row_strip(self, row: Row, base: Style) -> Strip:
        cached = self._strips.get(row.key)
        if cached is not None and cached[0] == row.cells:
            return cached[1]
        style = base
        if row.worker:
            style = base + self.get_component_rich_style("process-table--worker", partial=True)
        fixed = "".join(fit_cell(row.cells[i], COLUMNS[i].width, COLUMNS[i].right) + " " for i in self._shown)
        command, note = row.cells[len(COLUMNS)], row.cells[len(COLUMNS) + 1]
        segments = [Segment(fixed + command, style)]
        if note:
            note_style = style + self.get_component_rich_style("process-table--note", partial=True)
            segments.append(Segment(note, note_style))
        strip = _line(segments, self._line_width, base)
        self._strips[row.key] = (row.cells, strip)
        return strip

    def render_line(self, y: int) -> Strip:
        """Line ``y`` of the viewport: the header on top, then the rows from the scroll position."""
        base = self._base_style
        if base is None:
            base = self._base_style = self.rich_style
        if y == 0:
            return self._header_strip(base)
        index = int(self.scroll_offset.y) + y - 1
        if not 0 <= index < len(self._rows):
            return Strip.blank(self._line_width, base)
        return self._cursor_strip(index, self._row_strip(self._rows[index], base))

    # -- selection ----------------------------------------------------------------------------

    def action_select(self) -> None:
        """Post :class:`ProcessSelected` for the cursor row."""
        process = self.selected_process()
        if process is not None:
            self.post_message(self.ProcessSelected(process))

    def on_click(self, event: events.Click) -> None:
        """A click on the header sorts by that column; a click on a row moves the cursor there."""
        offset = event.get_content_offset(self)
        if offset is None:
            return
        if offset.y == 0:
            x = 0
            for column in (COLUMNS[i] for i in self._shown):
                if x <= offset.x < x + column.width + 1:
                    if column.sort_key is not None:
                        self.sort_by(column.sort_key)
                    return
                x += column.width + 1
            return
        self.move_cursor(int(self.scroll_offset.y) + offset.y - 1)


def _line(segments: list[Segment], width: int, base: Style) -> Strip:
    """One screen line from segments of plain (already escaped) text, cropped or padded to ``width`` cells."""
    return Strip(segments).adjust_cell_length(width, base)
