"""Reading one process's user, command line, CPU and memory through psutil, tolerating faults.

``psutil.Process`` objects are cached per pid with the process's start time, so that
``cpu_percent`` measures the interval since the previous read and a PID reused by a new process
starts afresh. Once read in full, a process's name, command line and user are kept too, and later
reads take only what changes. On Linux that is a read of ``/proc/PID/stat``, which confirms the
identity (start time) and gives the parent, the state and the CPU times, and one of
``/proc/PID/statm`` for the resident memory (as psutil reads it: the ``rss`` of ``stat`` can be
far off on machines with many cores), and one of ``/proc/PID/schedstat`` for the time the process
waited on a run queue for a CPU, with no psutil call at all; a changed ``comm`` (a rename or an
``exec``) makes the process read in full again. Those three files are kept open while the process is followed
(:mod:`~gpusight.backends.host.procfiles`), so each is one ``pread`` a second. Elsewhere psutil reads status, memory and CPU times,
and the run-queue wait is unknown.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass

import psutil

try:
    import pwd
except ImportError:  # not a POSIX system
    pwd = None  # type: ignore[assignment]

from gpusight.backends.host.procfiles import HeldProcFiles
from gpusight.backends.host.proctree import clean_text

NOTE_ACCESS_DENIED = "access denied"
"""Note for a process whose details this user may not read."""
NOTE_EXITED = "exited"
"""Note for a process that ended while or before it was read."""
NOTE_ZOMBIE = "zombie"
"""Note for a process that ended but was not yet reaped by its parent."""
NOTE_OTHER_NAMESPACE = "in another PID namespace (a host PID): run gpusight on the host, or with --pid=host / hostPID: true, to see it"
"""Note for a PID never seen here: NVML reports host PIDs, and gpusight runs in a container or a PID namespace of its
own that does not hold them. Its GPU memory and SM figures are still shown; what the host knows is not."""

_STATES = {
    b"R": "running",
    b"S": "sleeping",
    b"D": "disk-sleep",
    b"T": "stopped",
    b"t": "tracing-stop",
    b"Z": "zombie",
    b"X": "dead",
    b"x": "dead",
    b"K": "wake-kill",
    b"W": "waking",
    b"I": "idle",
    b"P": "parked",
}
"""psutil's status for each ``/proc/PID/stat`` state letter: what ``Process.status()`` answers on Linux."""


@dataclass(frozen=True, slots=True)
class ProcessFacts:
    """What psutil could tell about one process; unknown fields are None."""

    ppid: int | None = None
    """Parent process id."""
    name: str | None = None
    """Process name (``comm``)."""
    cmdline: str | None = None
    """Command line, arguments quoted as a shell would show them."""
    user: str | None = None
    """Owner's user name, or the numeric uid as text when it has no name."""
    cpu_percent: float | None = None
    """CPU use since the previous read of the same process (100 = one core); None on the first."""
    cpu_wait_percent: float | None = None
    """Time runnable but waiting for a CPU since the previous read (100 = one core's worth); None when unknown."""
    rss_bytes: int | None = None
    """Resident memory."""
    create_time: float | None = None
    """Start time, epoch seconds."""
    elapsed_seconds: float | None = None
    """Seconds since the start."""
    status: str | None = None
    """psutil status such as ``"running"`` or ``"zombie"``."""
    note: str | None = None
    """Why some fields are missing."""

    @property
    def found(self) -> bool:
        """True when the process exists in this PID namespace (even if little could be read)."""
        return self.note not in (NOTE_EXITED, NOTE_OTHER_NAMESPACE)


def _sysconf(name: str) -> int | None:
    """``os.sysconf(name)``, or None where the system does not say."""
    try:
        value = os.sysconf(name)
    except (AttributeError, ValueError, OSError):
        return None
    return value if value > 0 else None


_CLOCK_TICKS = _sysconf("SC_CLK_TCK")
"""Clock ticks per second of the CPU times in ``/proc/PID/stat``."""

_PAGE_SIZE = _sysconf("SC_PAGE_SIZE")
"""Bytes per page of the resident size in ``/proc/PID/statm``."""


def _read_pid_max() -> int | None:
    """The largest PID this kernel hands out, or None where unknown."""
    try:
        with open("/proc/sys/kernel/pid_max", "rb") as handle:
            return int(handle.read())
    except (OSError, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class _Stat:
    """The fields of ``/proc/PID/stat`` used to recognise a process and to follow what changes."""

    comm: bytes
    """Raw ``comm`` (the name, at most 15 bytes)."""
    state: bytes
    """One-letter state, e.g. ``b"S"``; ``b"Z"`` for a zombie."""
    ppid: int
    """Parent process id."""
    start_ticks: int
    """Start time in clock ticks since boot: with the pid, it names one process."""
    cpu_ticks: int
    """User plus system CPU time, in clock ticks."""


def _read_stat(files: HeldProcFiles, pid: int) -> _Stat | None:
    """``/proc/PID/stat`` of ``pid``, or None where it cannot be read (gone, hidden, not Linux)."""
    if not psutil.LINUX or _CLOCK_TICKS is None or _PAGE_SIZE is None:
        return None
    data = files.read(pid, "stat")
    if data is None:
        return None
    open_paren, close_paren = data.find(b"("), data.rfind(b")")
    fields = data[close_paren + 2 :].split()
    try:
        return _Stat(
            data[open_paren + 1 : close_paren], fields[0], int(fields[1]), int(fields[19]),
            int(fields[11]) + int(fields[12]),
        )
    except (IndexError, ValueError):
        return None


def _read_resident(files: HeldProcFiles, pid: int) -> int | None:
    """Resident memory of ``pid`` in bytes from ``/proc/PID/statm``, or None where it cannot be read."""
    data = files.read(pid, "statm")
    try:
        return None if data is None else int(data.split()[1]) * (_PAGE_SIZE or 0)
    except (IndexError, ValueError):
        return None


def _read_run_wait(files: HeldProcFiles, pid: int) -> int | None:
    """Nanoseconds the main thread of ``pid`` has waited on a run queue, from ``/proc/PID/schedstat``.

    The file holds three numbers: nanoseconds on a CPU, nanoseconds runnable but waiting on a run
    queue, and timeslices (kernel ``Documentation/scheduler/sched-stats.rst``). It is absent on
    kernels built without ``CONFIG_SCHED_INFO``, and reads ``0 0 0`` where the kernel keeps no such
    figures (``sched_info_on()`` false); both give None. (A process in its first timeslice reads
    ``0 0 1``: known, nothing waited yet.) It covers the thread whose id is the PID, not the other
    threads, unlike the CPU times of ``/proc/PID/stat``.
    """
    data = files.read(pid, "schedstat")
    if data is None:
        return None
    fields = data.split()
    try:
        numbers = [int(field) for field in fields[:3]]
    except ValueError:
        return None
    return numbers[1] if len(numbers) == 3 and any(numbers) else None


class _Known:
    """A cached process: its psutil object, identity and, once read in full, its static facts."""

    __slots__ = ("comm", "cpu_mark", "create_time", "proc", "start_ticks", "static", "wait_mark")

    def __init__(self, proc: psutil.Process, create_time: float | None, start_ticks: int | None) -> None:
        """Remember ``proc``, started at ``create_time`` (``start_ticks`` from ``/proc`` when read)."""
        self.proc = proc
        """The psutil object, kept so ``cpu_percent`` spans polls."""
        self.create_time = create_time
        """psutil's start time, epoch seconds."""
        self.start_ticks = start_ticks
        """Start time from ``/proc/PID/stat``; None where it could not be read."""
        self.comm: bytes | None = None
        """Raw ``comm`` when ``static`` was read; a different one invalidates ``static``."""
        self.static: tuple[str | None, str | None, str | None] | None = None
        """(name, cmdline, user) once all three were read without a fault."""
        self.cpu_mark: tuple[int, float] | None = None
        """(CPU ticks, monotonic time) of the previous ``/proc/PID/stat`` read, for the CPU percent."""
        self.wait_mark: tuple[int, float] | None = None
        """(run-queue wait in ns, monotonic time) of the previous ``/proc/PID/schedstat`` read."""

    def cpu_percent(self, stat: _Stat, now: float) -> float | None:
        """CPU use since the previous call, as psutil computes it (100 = one core); None on the first call."""
        before, self.cpu_mark = self.cpu_mark, (stat.cpu_ticks, now)
        if before is None or _CLOCK_TICKS is None:
            return None
        return _rate((stat.cpu_ticks - before[0]) / _CLOCK_TICKS, now - before[1])

    def cpu_wait_percent(self, waited_ns: int | None, now: float) -> float | None:
        """Run-queue wait since the previous call (100 = one core's worth); None on the first call or when unknown."""
        before, self.wait_mark = self.wait_mark, None if waited_ns is None else (waited_ns, now)
        if before is None or waited_ns is None:
            return None
        return _rate((waited_ns - before[0]) / 1e9, now - before[1])


def _moving(files: HeldProcFiles, known: _Known, pid: int, stat: _Stat) -> tuple[str, int | None, float | None, float | None]:
    """What changes from one read of a process to the next, given its ``/proc/PID/stat``: its status (psutil's word,
    ``"?"`` for a letter it does not know), resident memory, CPU and run-queue wait percents."""
    now = time.monotonic()
    return (_STATES.get(stat.state, "?"), _read_resident(files, pid), known.cpu_percent(stat, now),
            known.cpu_wait_percent(_read_run_wait(files, pid), now))


def _elapsed(create_time: float | None) -> float | None:
    """Seconds since ``create_time`` to 0.01 s, the resolution of a start time (clock ticks): finer digits are
    only the moment of the read; None when the start is unknown."""
    return None if create_time is None else round(max(0.0, time.time() - create_time), 2)


def _rate(seconds: float, elapsed: float) -> float:
    """``seconds`` of a resource used over ``elapsed`` seconds, in percent of one core (0 for no elapsed time)."""
    return round(seconds / elapsed * 100.0, 1) if elapsed > 0 else 0.0


def _join_cmdline(args: list[str]) -> str | None:
    """Join arguments with spaces, quoting as a shell would; None for an empty command line."""
    if not args:
        return None
    return shlex.join(clean_text(arg) for arg in args)


def _read_fields(proc: psutil.Process, readers: list[tuple[str, Callable[[], object]]], values: dict[str, object]) -> str | None:
    """Put each reader's answer into ``values`` under its field name, in order; returns the note for a fault.

    A zombie's refusal marks it a zombie; a process gone ends the read; a denied field is skipped.
    """
    note: str | None = None
    with proc.oneshot():
        for field, reader in readers:
            try:
                values[field] = reader()
            except psutil.ZombieProcess:
                values["status"] = psutil.STATUS_ZOMBIE
            except psutil.NoSuchProcess:
                return NOTE_EXITED
            except psutil.AccessDenied:
                note = NOTE_ACCESS_DENIED
    return note


class ProcessDetailsReader:
    """Reads process details, keeping psutil objects between polls. Use from one thread.

    Call ``read`` for every process of a poll, then ``forget_unseen`` to drop what was not read.
    """

    def __init__(self) -> None:
        """Create a reader with empty caches."""
        self._known: dict[int, _Known] = {}
        self._used: set[int] = set()
        self._alive: set[int] = set()
        self._asked: set[int] = set()
        self._user_names: dict[int, str] = {}
        self._pid_max = _read_pid_max()
        self._files = HeldProcFiles()

    def read(self, pid: int, ppid: int | None = None) -> ProcessFacts:
        """Return what can be read about ``pid`` now; never raises for expected faults.

        Pass ``ppid`` when it is already known (from a tree walk): psutil's ``ppid()`` re-checks
        the process identity each call, which costs as much as reading everything else.
        """
        self._asked.add(pid)
        if self._pid_max is not None and pid > self._pid_max:
            return ProcessFacts(note=NOTE_OTHER_NAMESPACE)
        stat = _read_stat(self._files, pid)
        known = self._known.get(pid)
        first = False
        if known is None or stat is None or known.start_ticks != stat.start_ticks:
            try:
                fresh = psutil.Process(pid)
            except psutil.NoSuchProcess:
                return ProcessFacts(note=NOTE_EXITED if pid in self._alive else NOTE_OTHER_NAMESPACE)
            try:
                create_time: float | None = fresh.create_time()
            except psutil.Error:
                create_time = None
            start_ticks = None if stat is None else stat.start_ticks
            if known is None or (known.create_time, known.start_ticks) != (create_time, start_ticks):
                known = self._known[pid] = _Known(fresh, create_time, start_ticks)
                first = True
        self._used.add(pid)
        self._alive.add(pid)
        if ppid is None and stat is not None:
            ppid = stat.ppid
        return self._facts(known, pid, first, ppid, stat)

    def forget_unseen(self) -> None:
        """Drop cached processes not read since the previous call; start a new poll."""
        for pid in self._known.keys() - self._used:
            del self._known[pid]
        self._files.keep_only(self._used)
        self._alive &= self._asked
        self._used = set()
        self._asked = set()

    def clear(self) -> None:
        """Drop every cached process and user name."""
        self._known.clear()
        self._used.clear()
        self._alive.clear()
        self._asked.clear()
        self._user_names.clear()
        self._files.close()

    def _facts(
        self,
        known: _Known,
        pid: int,
        first: bool,
        ppid: int | None,
        stat: _Stat | None,
    ) -> ProcessFacts:
        """Read each field separately so one denied field does not hide the others.

        With ``stat`` (Linux), status, memory and CPU come from it, and name, command line and user
        from the cache when they were read before and ``comm`` is unchanged: psutil is then not
        called at all. Whatever is left is read through psutil, in a fixed order, and a fault ends
        the read as it would.
        """
        proc, create_time = known.proc, known.create_time
        static = known.static
        if static is not None and (stat is None or stat.comm != known.comm or stat.state == b"Z"):
            static = None
        if static is not None and stat is not None:  # the common case: only what changes is read, psutil is not called
            status, rss, cpu, wait = _moving(self._files, known, pid, stat)
            return ProcessFacts(ppid, *static, cpu_percent=cpu, cpu_wait_percent=wait, rss_bytes=rss,
                                create_time=create_time, elapsed_seconds=_elapsed(create_time), status=status)
        values: dict[str, object] = {"ppid": ppid}
        note: str | None = None
        if create_time is not None:
            values["create_time"] = create_time
            values["elapsed_seconds"] = _elapsed(create_time)
        readers: list[tuple[str, Callable[[], object]]] = []
        if stat is None:
            readers.append(("status", proc.status))
            if ppid is None:
                readers.append(("ppid", proc.ppid))
        else:
            values["status"], values["rss_bytes"], values["cpu_percent"], values["cpu_wait_percent"] = _moving(
                self._files, known, pid, stat
            )
        if static is None:
            readers += [
                ("name", lambda: clean_text(proc.name())),
                ("cmdline", lambda: _join_cmdline(proc.cmdline())),
                ("user", lambda: self._user(proc)),
            ]
        else:
            values["name"], values["cmdline"], values["user"] = static
        if stat is None:
            readers += [
                ("rss_bytes", lambda: proc.memory_info().rss),
                ("cpu_percent", lambda: self._cpu_percent(proc, first)),
            ]
        if readers:
            note = _read_fields(proc, readers, values)
        if note == NOTE_ACCESS_DENIED and values.get("user") is None:
            values["user"] = self._owner_from_proc_dir(pid)
        if note is None and values.get("status") == psutil.STATUS_ZOMBIE:
            note = NOTE_ZOMBIE
        if note is None and static is None and stat is not None:
            known.comm = stat.comm
            known.static = (values.get("name"), values.get("cmdline"), values.get("user"))  # type: ignore[assignment]
        return ProcessFacts(note=note, **values)  # type: ignore[arg-type]

    @staticmethod
    def _cpu_percent(proc: psutil.Process, first: bool) -> float | None:
        """CPU percent since the previous call on ``proc``; None (after priming) on the first."""
        value = proc.cpu_percent(None)
        return None if first else value

    def _user(self, proc: psutil.Process) -> str:
        """The owner's name, looked up once per uid (name lookups can be slow with NSS/LDAP)."""
        if not hasattr(proc, "uids"):
            return clean_text(proc.username())
        return self._user_name(proc.uids().real)

    def _user_name(self, uid: int) -> str:
        """Name for ``uid`` from the password database, or the uid as text; cached."""
        name = self._user_names.get(uid)
        if name is None:
            try:
                name = clean_text(pwd.getpwuid(uid).pw_name) if pwd is not None else str(uid)
            except KeyError:
                name = str(uid)
            self._user_names[uid] = name
        return name

    def _owner_from_proc_dir(self, pid: int) -> str | None:
        """The owner of ``/proc/PID``, readable even when the files inside are not."""
        try:
            return self._user_name(os.stat(f"/proc/{pid}").st_uid)
        except OSError:
            return None
