"""The process table's rows, without the widget: columns, grouping, sorting, filtering and each row's cell texts.

GPU processes are grouped with their DataLoader workers (:func:`build_groups`), filtered
(:func:`filter_groups`) and sorted (:func:`sort_groups`); a :class:`RowBuilder` turns the groups into
:class:`Row` values holding every cell as escaped text. :func:`columns_for` picks the columns a width has
room for. The widget (:mod:`gpusight.ui.main.process_table`) draws the rows and keeps the cursor.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rich.cells import cell_len

from gpusight.facts.speed import job_speed
from gpusight.job_text import container_labels, job_label
from gpusight.snapshot.model import ContainerSample, JobSample, ProcessRole, ProcessSample, Snapshot
from gpusight.speed_text import (
    fmt_count,
    process_utilization,
    reports_speed,
    throughput_text,
    utilization_reason,
    utilization_text,
)
from gpusight.textsafe import safe_text
from gpusight.ui.widgets.format import ASCII_ELLIPSIS
from gpusight.ui.widgets.gpu_hardware import process_instance
from gpusight.units import NA, fmt_bytes, fmt_duration, fmt_percent
from gpusight.vendor_text import gpu_usage_reason

SORT_KEYS = ("gpu", "pid", "user", "container", "job", "memory", "sm", "cpu", "elapsed")
"""Keys accepted by :meth:`ProcessTable.sort_by`."""

DESCENDING_FIRST = frozenset({"memory", "sm", "cpu", "elapsed"})
"""Sort keys whose first selection puts the largest values on top."""

RowKey = tuple[int, "int | None", str]
"""Identity of a row: (pid, device_index, role)."""


@dataclass(frozen=True, slots=True)
class Column:
    label: str
    width: int
    right: bool
    sort_key: str | None
    measured: bool = False
    """Shown only while some process reports values measured inside its training loop (``gpusight.torch``)."""
    job: bool = False
    """Shown only while the snapshot has jobs."""
    container: bool = False
    """Shown only while some process runs in a container, pod, Slurm job or PID namespace of its own."""
    speed: bool = False
    """Shown only while some process reports its training speed: throughput or FLOPs utilization."""


COLUMNS = (
    Column("GPU", 3, True, "gpu"),
    Column("PID", 10, False, "pid"),
    Column("USER", 10, False, "user"),
    Column("CONTAINER", 19, False, "container", container=True),
    Column("CONTAINER", 12, False, "container", container=True),
    Column("JOB", 16, False, "job", job=True),
    Column("JOB", 8, False, "job", job=True),
    Column("GPU MEM", 8, True, "memory"),
    Column("SM %", 5, True, "sm"),
    Column("CPU %", 6, True, "cpu"),
    Column("WAIT %", 6, True, None, measured=True),
    Column("STEP/S", 6, True, None, measured=True),
    Column("THRU/S", 8, True, None, speed=True),
    Column("MFU/HFU", 8, True, None, speed=True),
    Column("HOST MEM", 8, True, None),
    Column("ELAPSED", 9, True, "elapsed"),
)
JOB, JOB_COMPACT = (i for i, c in enumerate(COLUMNS) if c.job)
"""The JOB column in full (``job 3 · rank 5/8``) and compact (``3·5/8``) form; one of them at most is shown."""
CONTAINER, CONTAINER_COMPACT = (i for i, c in enumerate(COLUMNS) if c.container)
"""The CONTAINER column in full (``docker 3f2a9c1b4d5e``) and compact (``3f2a9c1b4d5e``) form; one at most is shown."""
USER, WAIT = (next(i for i, c in enumerate(COLUMNS) if c.label == label) for label in ("USER", "WAIT %"))
MIN_COMMAND_WIDTH = 10
WANTED_COMMAND_WIDTH = 30
"""Narrow terminals drop columns (in ``DROP_ORDER``) until the command column gets this many cells."""
DROP_ORDER = (
    *(next(i for i, c in enumerate(COLUMNS) if c.label == label)
      for label in ("HOST MEM", "ELAPSED", "STEP/S", "THRU/S")),
    JOB, USER, WAIT, CONTAINER, JOB_COMPACT,
)
"""Columns given up first when the table is narrow, least useful first; the full JOB and CONTAINER give way to
their compact forms; WAIT % goes only while MFU/HFU is shown (the trainer's speed says more than one of its
causes), and the compact JOB goes last, only while the CONTAINER column is shown (see ``columns_for``)."""


def wanted_columns(measured: bool, speed: bool, jobs: bool, containers: bool) -> tuple[int, ...]:
    """Every column worth showing when there is room: the measured ones, the speed ones, the full JOB and the full
    CONTAINER only while they have values."""
    return tuple(
        i for i, c in enumerate(COLUMNS)
        if (measured or not c.measured) and (speed or not c.speed) and (jobs or not c.job)
        and (containers or not c.container) and i not in (JOB_COMPACT, CONTAINER_COMPACT)
    )


def columns_for(width: int, measured: bool, speed: bool, jobs: bool, grouped: bool, containers: bool) -> tuple[int, ...]:
    """The columns to show at ``width`` cells: all that fit while leaving the command column room.

    The full JOB column gives way to the compact one only while some job has several processes or ranks
    (``grouped``: ranks are worth a column); lone processes' jobs tell nothing USER does not, so the column
    goes and USER stays. Where processes run in containers (``containers``), the container matters more than
    the user (often root for all) and the job: USER goes first, then the full CONTAINER gives way to its compact
    form, and at last the compact JOB goes, so that 80 columns show GPU, PID, CONTAINER, GPU MEM, SM % and CPU %.
    Where trainers report their speed (``speed``), WAIT % gives way before the MFU/HFU column does, so that 80
    columns show a trainer's MFU.
    """
    columns = list(wanted_columns(measured, speed, jobs, containers))
    compact = {JOB: JOB_COMPACT if grouped else None, CONTAINER: CONTAINER_COMPACT}
    skipped = {index for index, wanted in ((WAIT, speed), (JOB_COMPACT, containers)) if not wanted}
    for index in (index for index in DROP_ORDER if index not in skipped):
        if fixed_width(tuple(columns)) + WANTED_COMMAND_WIDTH <= width:
            break
        if index in columns:
            position = columns.index(index)
            replacement = compact.get(index)
            columns[position : position + 1] = [] if replacement is None else [replacement]
    return tuple(columns)


@dataclass(frozen=True, slots=True)
class Group:
    leader: ProcessSample
    workers: tuple[ProcessSample, ...]


@dataclass(frozen=True, slots=True)
class Row:
    key: RowKey
    process: ProcessSample
    cells: tuple[str, ...]
    """Fixed columns, then the command text, then its dimmed note."""
    worker: bool


def row_key(process: ProcessSample) -> RowKey:
    return (process.pid, process.device_index, process.role)


def is_worker(process: ProcessSample) -> bool:
    return process.role == ProcessRole.DATALOADER_WORKER


def build_groups(processes: tuple[ProcessSample, ...]) -> list[Group]:
    """Group GPU processes with their DataLoader workers; a worker whose trainer is absent stands alone."""
    leaders = [p for p in processes if not is_worker(p)]
    members: dict[RowKey, list[ProcessSample]] = {row_key(p): [] for p in leaders}
    by_device: dict[tuple[int | None, int | None], RowKey] = {
        (p.pid, p.device_index): row_key(p) for p in reversed(leaders)
    }
    by_pid: dict[int | None, RowKey] = {p.pid: row_key(p) for p in reversed(leaders)}
    orphans: list[ProcessSample] = []
    seen: set[tuple[int, RowKey]] = set()
    for worker in processes:
        if not is_worker(worker):
            continue
        owner = by_device.get((worker.trainer_pid, worker.device_index)) or by_pid.get(worker.trainer_pid)
        if owner is None:
            orphans.append(worker)
        elif (worker.pid, owner) not in seen:
            seen.add((worker.pid, owner))
            members[owner].append(worker)
    groups: list[Group] = []
    used: set[RowKey] = set()
    for leader in leaders:
        key = row_key(leader)
        if key not in used:
            used.add(key)
            groups.append(Group(leader, tuple(sorted(members[key], key=lambda w: w.pid))))
    for orphan in orphans:
        key = row_key(orphan)
        if key not in used:
            used.add(key)
            groups.append(Group(orphan, ()))
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


def sort_groups(groups: list[Group], key: str, reverse: bool) -> list[Group]:
    """Order groups by their leader's ``key``; unknown values always go last, ties by GPU then PID."""

    def tie(group: Group) -> tuple[int, int]:
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


def filter_groups(groups: list[Group], text: str) -> list[Group]:
    """Keep groups whose leader matches ``text`` (all workers kept) or some of whose workers match.

    A group kept only for its workers keeps its leader, so every worker stays under its trainer.
    """
    needle = text.strip().lower()
    if not needle:
        return groups
    kept: list[Group] = []
    for group in groups:
        if _matches(group.leader, needle):
            kept.append(group)
        else:
            workers = tuple(w for w in group.workers if _matches(w, needle))
            if workers:
                kept.append(Group(group.leader, workers))
    return kept



class RowBuilder:
    """Turns a snapshot's processes into table rows: grouped with their workers, filtered, sorted, cells as text."""

    def __init__(self, ascii_mode: bool = False) -> None:
        """``ascii_mode`` draws the worker tree and cut-off marks with ASCII only."""
        self.ascii_mode = ascii_mode
        """Whether glyphs are plain ASCII."""
        self.command_width = MIN_COMMAND_WIDTH
        """Cells the command column has; command lines are cut to it."""
        self._branch, self._last_branch = ("|- ", "`- ") if ascii_mode else ("├─ ", "└─ ")
        self._jobs: dict[int, JobSample] = {}
        self._job_speeds: dict[int, str] = {}
        """The speed of each job of several ranks, by the pid of the rank whose note shows it."""

    def rows(self, snapshot: Snapshot | None, jobs: dict[int, JobSample], filter_text: str, sort_key: str,
             reverse: bool, collapsed: bool) -> list[Row]:
        """The rows of ``snapshot`` (none before the first): each GPU process, then its workers unless ``collapsed``."""
        self._jobs = jobs
        if snapshot is None:
            return []
        self._job_speeds = job_speed_notes(snapshot)
        groups = build_groups(snapshot.processes)
        groups = sort_groups(filter_groups(groups, filter_text), sort_key, reverse)
        rows: list[Row] = []
        for group in groups:
            leader = group.leader
            count = leader.num_workers if leader.num_workers is not None else len(group.workers)
            rows.append(Row(row_key(leader), leader, self._leader_cells(leader, count), is_worker(leader)))
            if collapsed:
                continue
            last = len(group.workers) - 1
            for i, worker in enumerate(group.workers):
                glyph = self._last_branch if i == last else self._branch
                rows.append(Row(row_key(worker), worker, self._worker_cells(worker, glyph), True))
        return rows

    def _cut(self, text: str | None, width: int) -> str:
        cut = safe_text(text, max_length=max(1, width))
        if self.ascii_mode and cut.endswith("…"):
            cut = cut[:-1] + ASCII_ELLIPSIS
        return cut

    def _note(self, process: ProcessSample) -> str:
        return f" ({safe_text(process.note, 120)})" if process.note else ""

    def _speed_note(self, process: ProcessSample) -> str:
        """Why the process's GPU share is N/A, why its MFU (or HFU) is, and on the first rank of a job of several the
        job's speed (:func:`job_speed_notes`); "" when none applies."""
        reasons = (gpu_usage_reason(process), utilization_reason(process), self._job_speeds.get(process.pid))
        notes = [text for text in reasons if text]
        return "; ".join(notes)

    def _leader_cells(self, p: ProcessSample, workers: int) -> tuple[str, ...]:
        suffix = f" [{workers} worker{'s' if workers != 1 else ''}]" if workers else ""
        base = p.cmdline or p.name
        instance = process_instance(p)
        if instance is not None and base:  # the MIG instance it runs in leads: the GPU column holds only the GPU
            base = f"[{instance}] {base}"
        speed = self._speed_note(p)
        own = safe_text(p.note, 120) if p.note else ""
        note = f" ({'; '.join(text for text in (own, speed) if text)})" if own or speed else ""
        # The speed note is worth more than the end of a long command line: room is kept for it where the command
        # keeps MIN_COMMAND_WIDTH cells.
        width = self.command_width - len(suffix)
        if speed and width - len(speed) - 3 >= MIN_COMMAND_WIDTH:
            width -= len(speed) + 3
        if base:
            command = self._cut(base, width) + suffix
        elif suffix:
            command = suffix.lstrip()
        elif note:
            command, note = "", note.lstrip()
        else:
            command = NA
        return (
            NA if p.device_index is None else str(p.device_index),
            str(p.pid),
            self._cut(p.user, COLUMNS[USER].width) or NA,
            *self._container_cells(p),
            *self._job_cells(p),
            fmt_bytes(p.gpu_memory_bytes),
            fmt_percent(p.sm_percent),
            fmt_percent(p.cpu_percent),
            *_measured_cells(p),
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
            _first_fitting((full, "job " + compact, "job " + bare, bare), COLUMNS[JOB].width),
            _first_fitting((compact, bare), COLUMNS[JOB_COMPACT].width),
        )

    def _container_cells(self, p: ProcessSample) -> tuple[str, str]:
        """The full and the compact CONTAINER cell: the longest label that fits, else the shortest, cut and escaped."""
        if p.container is None:
            return "", ""
        labels = container_labels(p.container)
        full, compact = (COLUMNS[i].width for i in (CONTAINER, CONTAINER_COMPACT))
        return self._cut(_first_fitting(labels, full), full), self._cut(_first_fitting(labels, compact), compact)

    def _worker_cells(self, p: ProcessSample, glyph: str) -> tuple[str, ...]:
        state = f" ({safe_text(p.status, 20)})" if p.status else ""
        return (
            "",
            glyph + str(p.pid),
            self._cut(p.user, COLUMNS[USER].width) or NA,
            "",
            "",
            "",
            "",
            "",
            "",
            fmt_percent(p.cpu_percent),
            "",
            "",
            "",
            "",
            fmt_bytes(p.rss_bytes),
            fmt_duration(p.elapsed_seconds),
            self._cut(p.name or p.cmdline or "worker", self.command_width - len(state)) + state,
            self._note(p),
        )


def is_measured(process: ProcessSample) -> bool:
    """True when the process reports an input-wait share, a step rate or its speed from inside its training loop."""
    return process.input_wait_percent is not None or process.steps_per_second is not None or reports_speed(process)


def job_speed_notes(snapshot: Snapshot) -> dict[int, str]:
    """For each job of several GPU processes that report their speed, ``job: 37k tok/s`` (its throughput summed
    over the ranks), with ``, 45% MFU`` (its FLOP/s over its ranks' summed peaks) where that reads otherwise than
    the rank's own, keyed by the pid of its first rank (the lowest rank, else the lowest pid); empty, at no cost,
    while no process reports speed."""
    if not snapshot.jobs or not any(reports_speed(p) for p in snapshot.processes):
        return {}
    notes: dict[int, str] = {}
    for job in snapshot.jobs:
        members = [p for p in snapshot.processes if p.role == ProcessRole.GPU and p.pid in job.pids]
        if len(members) < 2 or not any(reports_speed(p) for p in members):
            continue
        speed = job_speed(job, members)
        first = min(members, key=lambda p: (p.rank is None, p.rank or 0, p.pid))
        note = f"job: {throughput_text(speed.tokens_per_second, speed.samples_per_second, compact=True)}/s"
        utilization = utilization_text(speed.flops_utilization_percent, speed.utilization_name)
        if utilization != process_utilization(first):
            note += f", {utilization}"
        notes[first.pid] = note
    return notes


def fixed_width(columns: tuple[int, ...]) -> int:
    """Cells taken by the fixed ``columns`` (by index into the column list) and their separators."""
    return sum(COLUMNS[i].width + 1 for i in columns)


def _measured_cells(p: ProcessSample) -> tuple[str, str, str, str]:
    """The WAIT %, STEP/S, THRU/S and MFU/HFU cells: what a trainer measured itself (``gpusight.torch``), N/A for
    what it does not report, all blank for a process that reports nothing."""
    if not is_measured(p):
        return "", "", "", ""
    return (
        fmt_percent(p.input_wait_percent),
        fmt_count(p.steps_per_second),
        throughput_text(p.tokens_per_second, p.samples_per_second, compact=True),
        process_utilization(p),
    )


def _first_fitting(texts: tuple[str, ...], width: int) -> str:
    """The first of ``texts`` that fits in ``width`` cells, else the last one."""
    return next((text for text in texts if cell_len(text) <= width), texts[-1])

