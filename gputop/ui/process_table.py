"""The process table: GPU processes with their DataLoader workers, sortable, filterable and cheap to refresh.

It is a line-API widget (a :class:`~textual.scroll_view.ScrollView`), not a ``DataTable``: the rows are
re-derived from the newest snapshot about once per second (:attr:`ProcessTable.APPLY_INTERVAL`), each
row's rendered line is cached by its cell values, and only the lines whose values changed are refreshed.
Untrusted text (names, command lines, users, notes) goes through :func:`~gputop.textsafe.safe_text` and is
placed in plain-text segments that are never parsed as markup, so ``[red]`` is shown literally.
The WAIT % and STEP/S columns (input-wait share and step rate measured inside the training loop by
``gputop.torch``) appear only while some process reports them, blank for the others. The JOB column
(``job 3 · rank 5/8``, see :mod:`gputop.ui.job_text`) appears while the snapshot has jobs (recordings
made before jobs have none); narrow terminals get its compact form (``3·5/8``). The CONTAINER column (the
container, pod or Slurm job a GPU process runs in, ``docker 3f2a9c1b4d5e``, see
:func:`~gputop.ui.job_text.container_labels`) appears while some process runs in one; on narrow terminals it
stays longer than USER and JOB, in a compact form (``3f2a9c1b4d5e``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.scrollbar import ScrollBarRender
from textual.strip import Strip
from textual.timer import Timer

from gputop.collect.model import ContainerSample, JobSample, ProcessRole, ProcessSample, Snapshot
from gputop.textsafe import safe_text
from gputop.ui.format import ASCII_ELLIPSIS, fit_cell
from gputop.ui.job_text import container_labels, job_label, jobs_by_id
from gputop.ui.line_diff import line_regions, refresh_regions
from gputop.ui.row_cursor import RowCursorView
from gputop.units import NA, fmt_bytes, fmt_duration, fmt_percent

SORT_KEYS = ("gpu", "pid", "user", "container", "job", "memory", "sm", "cpu", "elapsed")
"""Keys accepted by :meth:`ProcessTable.sort_by`."""

DESCENDING_FIRST = frozenset({"memory", "sm", "cpu", "elapsed"})
"""Sort keys whose first selection puts the largest values on top."""

RowKey = tuple[int, "int | None", str]
"""Identity of a row: (pid, device_index, role)."""


@dataclass(frozen=True, slots=True)
class _Column:
    label: str
    width: int
    right: bool
    sort_key: str | None
    measured: bool = False
    """Shown only while some process reports values measured inside its training loop (``gputop.torch``)."""
    job: bool = False
    """Shown only while the snapshot has jobs."""
    container: bool = False
    """Shown only while some process runs in a container, pod, Slurm job or PID namespace of its own."""


_COLUMNS = (
    _Column("GPU", 3, True, "gpu"),
    _Column("PID", 10, False, "pid"),
    _Column("USER", 10, False, "user"),
    _Column("CONTAINER", 19, False, "container", container=True),
    _Column("CONTAINER", 12, False, "container", container=True),
    _Column("JOB", 16, False, "job", job=True),
    _Column("JOB", 8, False, "job", job=True),
    _Column("GPU MEM", 8, True, "memory"),
    _Column("SM %", 5, True, "sm"),
    _Column("CPU %", 6, True, "cpu"),
    _Column("WAIT %", 6, True, None, measured=True),
    _Column("STEP/S", 6, True, None, measured=True),
    _Column("HOST MEM", 8, True, None),
    _Column("ELAPSED", 9, True, "elapsed"),
)
_JOB, _JOB_COMPACT = (i for i, c in enumerate(_COLUMNS) if c.job)
"""The JOB column in full (``job 3 · rank 5/8``) and compact (``3·5/8``) form; one of them at most is shown."""
_CONTAINER, _CONTAINER_COMPACT = (i for i, c in enumerate(_COLUMNS) if c.container)
"""The CONTAINER column in full (``docker 3f2a9c1b4d5e``) and compact (``3f2a9c1b4d5e``) form; one at most is shown."""
_USER = next(i for i, c in enumerate(_COLUMNS) if c.label == "USER")
_MIN_COMMAND_WIDTH = 10
_WANTED_COMMAND_WIDTH = 30
"""Narrow terminals drop columns (in ``_DROP_ORDER``) until the command column gets this many cells."""
_DROP_ORDER = (
    *(next(i for i, c in enumerate(_COLUMNS) if c.label == label) for label in ("HOST MEM", "ELAPSED", "STEP/S")),
    _JOB, _USER, _CONTAINER, _JOB_COMPACT,
)
"""Columns given up first when the table is narrow, least useful first; the full JOB and CONTAINER give way to
their compact forms, and the compact JOB goes last, only while the CONTAINER column is shown (see
``_columns_for``)."""


def _wanted_columns(measured: bool, jobs: bool, containers: bool) -> tuple[int, ...]:
    """Every column worth showing when there is room: the measured ones, the full JOB and the full CONTAINER only
    while they have values."""
    return tuple(
        i for i, c in enumerate(_COLUMNS)
        if (measured or not c.measured) and (jobs or not c.job) and (containers or not c.container)
        and i not in (_JOB_COMPACT, _CONTAINER_COMPACT)
    )


def _columns_for(width: int, measured: bool, jobs: bool, grouped: bool, containers: bool) -> tuple[int, ...]:
    """The columns to show at ``width`` cells: all that fit while leaving the command column room.

    The full JOB column gives way to the compact one only while some job has several processes or ranks
    (``grouped``: ranks are worth a column); lone processes' jobs tell nothing USER does not, so the column
    goes and USER stays. Where processes run in containers (``containers``), the container matters more than
    the user (often root for all) and the job: USER goes first, then the full CONTAINER gives way to its compact
    form, and at last the compact JOB goes, so that 80 columns show GPU, PID, CONTAINER, GPU MEM, SM % and CPU %.
    """
    columns = list(_wanted_columns(measured, jobs, containers))
    compact = {_JOB: _JOB_COMPACT if grouped else None, _CONTAINER: _CONTAINER_COMPACT}
    for index in _DROP_ORDER if containers else _DROP_ORDER[:-1]:
        if _fixed_width(tuple(columns)) + _WANTED_COMMAND_WIDTH <= width:
            break
        if index in columns:
            position = columns.index(index)
            replacement = compact.get(index)
            columns[position : position + 1] = [] if replacement is None else [replacement]
    return tuple(columns)


@dataclass(frozen=True, slots=True)
class _Group:
    leader: ProcessSample
    workers: tuple[ProcessSample, ...]


@dataclass(frozen=True, slots=True)
class _Row:
    key: RowKey
    process: ProcessSample
    cells: tuple[str, ...]
    """Fixed columns, then the command text, then its dimmed note."""
    worker: bool


def _row_key(process: ProcessSample) -> RowKey:
    return (process.pid, process.device_index, process.role)


def _is_worker(process: ProcessSample) -> bool:
    return process.role == ProcessRole.DATALOADER_WORKER


def build_groups(processes: tuple[ProcessSample, ...]) -> list[_Group]:
    """Group GPU processes with their DataLoader workers; a worker whose trainer is absent stands alone."""
    leaders = [p for p in processes if not _is_worker(p)]
    members: dict[RowKey, list[ProcessSample]] = {_row_key(p): [] for p in leaders}
    by_device: dict[tuple[int | None, int | None], RowKey] = {
        (p.pid, p.device_index): _row_key(p) for p in reversed(leaders)
    }
    by_pid: dict[int | None, RowKey] = {p.pid: _row_key(p) for p in reversed(leaders)}
    orphans: list[ProcessSample] = []
    seen: set[tuple[int, RowKey]] = set()
    for worker in processes:
        if not _is_worker(worker):
            continue
        owner = by_device.get((worker.trainer_pid, worker.device_index)) or by_pid.get(worker.trainer_pid)
        if owner is None:
            orphans.append(worker)
        elif (worker.pid, owner) not in seen:
            seen.add((worker.pid, owner))
            members[owner].append(worker)
    groups: list[_Group] = []
    used: set[RowKey] = set()
    for leader in leaders:
        key = _row_key(leader)
        if key not in used:
            used.add(key)
            groups.append(_Group(leader, tuple(sorted(members[key], key=lambda w: w.pid))))
    for orphan in orphans:
        key = _row_key(orphan)
        if key not in used:
            used.add(key)
            groups.append(_Group(orphan, ()))
    return groups


def _sort_value(process: ProcessSample, key: str) -> object:
    if key == "gpu":
        return process.device_index
    if key == "pid":
        return process.pid
    if key == "user":
        return None if process.user is None else process.user.lower()
    if key == "job":
        return None if process.job is None else (process.job, -1 if process.rank is None else process.rank)
    if key == "container":
        return _container_order(process.container)
    if key == "memory":
        return process.gpu_memory_bytes
    if key == "sm":
        return process.sm_percent
    if key == "cpu":
        return process.cpu_percent
    return process.elapsed_seconds


def sort_groups(groups: list[_Group], key: str, reverse: bool) -> list[_Group]:
    """Order groups by their leader's ``key``; unknown values always go last, ties by GPU then PID."""

    def tie(group: _Group) -> tuple[int, int]:
        p = group.leader
        return (-1 if p.device_index is None else p.device_index, p.pid)

    known = [g for g in groups if _sort_value(g.leader, key) is not None]
    unknown = [g for g in groups if _sort_value(g.leader, key) is None]
    known.sort(key=lambda g: (_sort_value(g.leader, key), tie(g)), reverse=reverse)
    unknown.sort(key=tie)
    return known + unknown


_JOB_NEEDLE = re.compile(r"job ?([0-9]+)")
"""A filter naming a job, ``job 3`` or ``job3``: it keeps that job's processes (with their workers)."""


def _container_order(container: ContainerSample | None) -> tuple[str, ...] | None:
    """Where a container sorts: by runtime, then pod namespace and name, container id or Slurm job; None on the host."""
    if container is None:
        return None
    named = container.name if container.pod_uid is not None else None
    return (container.runtime.value, container.pod_namespace or "", named or container.id or "",
            container.slurm_job_id or "")


def _container_texts(container: ContainerSample | None) -> tuple[str | None, ...]:
    """The texts of a container a filter looks at: its label, id, name, pod namespace and Slurm job."""
    if container is None:
        return ()
    return (container_labels(container)[0], container.id, container.name, container.pod_namespace,
            container.slurm_job_id)


def _matches(process: ProcessSample, needle: str) -> bool:
    job = _JOB_NEEDLE.fullmatch(needle)
    if job is not None and process.job == int(job.group(1)):
        return True
    if needle in str(process.pid):
        return True
    texts = (process.user, process.name, process.cmdline, *_container_texts(process.container))
    return any(needle in value.lower() for value in texts if value)


def filter_groups(groups: list[_Group], text: str) -> list[_Group]:
    """Keep groups whose leader matches ``text`` (all workers kept) or some of whose workers match.

    A group kept only for its workers keeps its leader, so every worker stays under its trainer.
    """
    needle = text.strip().lower()
    if not needle:
        return groups
    kept: list[_Group] = []
    for group in groups:
        if _matches(group.leader, needle):
            kept.append(group)
        else:
            workers = tuple(w for w in group.workers if _matches(w, needle))
            if workers:
                kept.append(_Group(group.leader, workers))
    return kept


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
    """Enter selects; the cursor keys come from :class:`~gputop.ui.row_cursor.RowCursorView`."""

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
        self._branch, self._last_branch = ("|- ", "`- ") if ascii_mode else ("├─ ", "└─ ")
        self._snapshot: Snapshot | None = None
        self._pending: Snapshot | None = None
        self._last_apply = -float("inf")
        self._timer: Timer | None = None
        self._sort_key = "gpu"
        self._sort_reverse = False
        self._filter = ""
        self._collapsed = False
        self._rows: list[_Row] = []
        self._cursor = 0
        self._cursor_key: RowKey | None = None
        self._strips: dict[RowKey, tuple[tuple[str, ...], Strip]] = {}
        self._base_style: Style | None = None
        self._jobs: dict[int, JobSample] = {}
        self._optional_shown = (False, False, False, False)
        """Whether the measured columns and the JOB column are among the wanted ones, whether a job has several
        processes, and whether the CONTAINER column is wanted."""
        self._shown = _wanted_columns(False, False, False)
        self._fixed_width = _fixed_width(self._shown)
        self._command_width = _MIN_COMMAND_WIDTH
        self._line_width = self._fixed_width + _MIN_COMMAND_WIDTH

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
            self._show_optional(any(_is_measured(p) for p in processes), bool(self._jobs), grouped,
                                any(p.container is not None for p in processes))
        self._rows = self._build_rows()
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

    def _show_optional(self, measured: bool, jobs: bool, grouped: bool, containers: bool) -> None:
        """Show or hide the WAIT % and STEP/S columns, the JOB column (compact on narrow terminals only while a
        job has several processes, see ``_columns_for``) and the CONTAINER column; the command column takes up
        the difference."""
        if (measured, jobs, grouped, containers) == self._optional_shown:
            return
        self._optional_shown = (measured, jobs, grouped, containers)
        if self.is_mounted:
            self._fit_columns(self.scrollable_content_region.width)
        else:
            self._shown = _wanted_columns(measured, jobs, containers)
            self._fixed_width = _fixed_width(self._shown)
        self._strips.clear()
        self.refresh()

    def _fit_columns(self, width: int) -> None:
        """Pick the columns for ``width`` cells and give the command column the rest."""
        self._shown = _columns_for(width, *self._optional_shown)
        self._fixed_width = _fixed_width(self._shown)
        self._command_width = max(_MIN_COMMAND_WIDTH, width - self._fixed_width)

    def _build_rows(self) -> list[_Row]:
        if self._snapshot is None:
            return []
        groups = build_groups(self._snapshot.processes)
        groups = sort_groups(filter_groups(groups, self._filter), self._sort_key, self._sort_reverse)
        rows: list[_Row] = []
        for group in groups:
            leader = group.leader
            count = leader.num_workers if leader.num_workers is not None else len(group.workers)
            rows.append(_Row(_row_key(leader), leader, self._leader_cells(leader, count), _is_worker(leader)))
            if self._collapsed:
                continue
            last = len(group.workers) - 1
            for i, worker in enumerate(group.workers):
                glyph = self._last_branch if i == last else self._branch
                rows.append(_Row(_row_key(worker), worker, self._worker_cells(worker, glyph), True))
        return rows

    def _cut(self, text: str | None, width: int) -> str:
        cut = safe_text(text, max_length=max(1, width))
        if self.ascii_mode and cut.endswith("…"):
            cut = cut[:-1] + ASCII_ELLIPSIS
        return cut

    def _note(self, process: ProcessSample) -> str:
        return f" ({safe_text(process.note, 120)})" if process.note else ""

    def _leader_cells(self, p: ProcessSample, workers: int) -> tuple[str, ...]:
        suffix = f" [{workers} worker{'s' if workers != 1 else ''}]" if workers else ""
        base = p.cmdline or p.name
        note = self._note(p)
        if base:
            command = self._cut(base, self._command_width - len(suffix)) + suffix
        elif suffix:
            command = suffix.lstrip()
        elif note:
            command, note = "", note.lstrip()
        else:
            command = NA
        return (
            NA if p.device_index is None else str(p.device_index),
            str(p.pid),
            self._cut(p.user, _COLUMNS[_USER].width) or NA,
            *self._container_cells(p),
            *self._job_cells(p),
            fmt_bytes(p.gpu_memory_bytes),
            fmt_percent(p.sm_percent),
            fmt_percent(p.cpu_percent),
            _measured(p.input_wait_percent, fmt_percent),
            _measured(p.steps_per_second, _fmt_rate),
            fmt_bytes(p.rss_bytes),
            fmt_duration(p.elapsed_seconds),
            command,
            note,
        )

    def _job_cells(self, p: ProcessSample) -> tuple[str, str]:
        """The full and the compact JOB cell; text too long for its column gives way to a shorter form, never cut."""
        if p.job is None:
            return "", ""
        compact = job_label(p, self._jobs, compact=True, ascii_mode=self.ascii_mode)
        full = job_label(p, self._jobs, ascii_mode=self.ascii_mode)
        bare = str(p.job)
        return (
            _first_fitting((full, "job " + compact, "job " + bare, bare), _COLUMNS[_JOB].width),
            _first_fitting((compact, bare), _COLUMNS[_JOB_COMPACT].width),
        )

    def _container_cells(self, p: ProcessSample) -> tuple[str, str]:
        """The full and the compact CONTAINER cell: the longest label that fits, else the shortest, cut and escaped."""
        if p.container is None:
            return "", ""
        labels = container_labels(p.container)
        full, compact = (_COLUMNS[i].width for i in (_CONTAINER, _CONTAINER_COMPACT))
        return self._cut(_first_fitting(labels, full), full), self._cut(_first_fitting(labels, compact), compact)

    def _worker_cells(self, p: ProcessSample, glyph: str) -> tuple[str, ...]:
        state = f" ({safe_text(p.status, 20)})" if p.status else ""
        return (
            "",
            glyph + str(p.pid),
            self._cut(p.user, _COLUMNS[_USER].width) or NA,
            "",
            "",
            "",
            "",
            "",
            "",
            fmt_percent(p.cpu_percent),
            "",
            "",
            fmt_bytes(p.rss_bytes),
            fmt_duration(p.elapsed_seconds),
            self._cut(p.name or p.cmdline or "worker", self._command_width - len(state)) + state,
            self._note(p),
        )

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
        for column in (_COLUMNS[i] for i in self._shown):
            label = column.label + (arrow if column.sort_key == self._sort_key else "")
            parts.append(fit_cell(label, column.width, column.right) + " ")
        parts.append("COMMAND")
        return _line([Segment("".join(parts), style)], self._line_width, base)

    def _row_strip(self, row: _Row, base: Style) -> Strip:
        cached = self._strips.get(row.key)
        if cached is not None and cached[0] == row.cells:
            return cached[1]
        style = base
        if row.worker:
            style = base + self.get_component_rich_style("process-table--worker", partial=True)
        fixed = "".join(fit_cell(row.cells[i], _COLUMNS[i].width, _COLUMNS[i].right) + " " for i in self._shown)
        command, note = row.cells[len(_COLUMNS)], row.cells[len(_COLUMNS) + 1]
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
            for column in (_COLUMNS[i] for i in self._shown):
                if x <= offset.x < x + column.width + 1:
                    if column.sort_key is not None:
                        self.sort_by(column.sort_key)
                    return
                x += column.width + 1
            return
        self.move_cursor(int(self.scroll_offset.y) + offset.y - 1)


def _is_measured(process: ProcessSample) -> bool:
    """True when the process reports an input-wait share or a step rate from inside its training loop."""
    return process.input_wait_percent is not None or process.steps_per_second is not None


def _fixed_width(columns: tuple[int, ...]) -> int:
    """Cells taken by the fixed ``columns`` (by index into the column list) and their separators."""
    return sum(_COLUMNS[i].width + 1 for i in columns)


def _measured(value: float | None, fmt: Callable[[float | None], str]) -> str:
    """A value a trainer measured itself (``gputop.torch``), or blank for a process that reports none."""
    return "" if value is None else fmt(value)


def _fmt_rate(value: float | None) -> str:
    """Steps per second with two significant digits below 10, whole numbers above."""
    if value is None:
        return NA
    return f"{value:.1f}" if value < 10 else f"{value:.0f}"


def _line(segments: list[Segment], width: int, base: Style) -> Strip:
    """One screen line from segments of plain (already escaped) text, cropped or padded to ``width`` cells."""
    return Strip(segments).adjust_cell_length(width, base)


def _first_fitting(texts: tuple[str, ...], width: int) -> str:
    """The first of ``texts`` that fits in ``width`` cells, else the last one."""
    return next((text for text in texts if cell_len(text) <= width), texts[-1])

