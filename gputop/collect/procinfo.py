"""Reading one process's user, command line, CPU and memory through psutil, tolerating faults.

``psutil.Process`` objects are cached under ``(pid, create_time)`` so that ``cpu_percent``
measures the interval since the previous poll, and a PID reused by a new process starts afresh.
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

from gputop.collect.proctree import clean_text

NOTE_ACCESS_DENIED = "access denied"
"""Note for a process whose details this user may not read."""
NOTE_EXITED = "exited"
"""Note for a process that ended while or before it was read."""
NOTE_ZOMBIE = "zombie"
"""Note for a process that ended but was not yet reaped by its parent."""
NOTE_OTHER_NAMESPACE = "not in this PID namespace"
"""Note for a PID never seen here, e.g. a host PID reported by NVML inside a container."""


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


def _read_pid_max() -> int | None:
    """The largest PID this kernel hands out, or None where unknown."""
    try:
        with open("/proc/sys/kernel/pid_max", "rb") as handle:
            return int(handle.read())
    except (OSError, ValueError):
        return None


def _join_cmdline(args: list[str]) -> str | None:
    """Join arguments with spaces, quoting as a shell would; None for an empty command line."""
    if not args:
        return None
    return shlex.join(clean_text(arg) for arg in args)


class ProcessReader:
    """Reads process details, keeping psutil objects between polls. Use from one thread.

    Call ``read`` for every process of a poll, then ``forget_unseen`` to drop what was not read.
    """

    def __init__(self) -> None:
        """Create a reader with empty caches."""
        self._procs: dict[tuple[int, float | None], psutil.Process] = {}
        self._used: set[tuple[int, float | None]] = set()
        self._alive: set[int] = set()
        self._asked: set[int] = set()
        self._user_names: dict[int, str] = {}
        self._pid_max = _read_pid_max()

    def read(self, pid: int, ppid: int | None = None) -> ProcessFacts:
        """Return what can be read about ``pid`` now; never raises for expected faults.

        Pass ``ppid`` when it is already known (from a tree walk): psutil's ``ppid()`` re-checks
        the process identity each call, which costs as much as reading everything else.
        """
        self._asked.add(pid)
        if self._pid_max is not None and pid > self._pid_max:
            return ProcessFacts(note=NOTE_OTHER_NAMESPACE)
        try:
            fresh = psutil.Process(pid)
        except psutil.NoSuchProcess:
            return ProcessFacts(note=NOTE_EXITED if pid in self._alive else NOTE_OTHER_NAMESPACE)
        try:
            create_time: float | None = fresh.create_time()
        except psutil.Error:
            create_time = None
        key = (pid, create_time)
        proc = self._procs.get(key)
        first = proc is None
        if proc is None:
            proc = self._procs[key] = fresh
        self._used.add(key)
        self._alive.add(pid)
        return self._facts(proc, pid, create_time, first, ppid)

    def forget_unseen(self) -> None:
        """Drop cached processes not read since the previous call; start a new poll."""
        for key in self._procs.keys() - self._used:
            del self._procs[key]
        self._alive &= self._asked
        self._used = set()
        self._asked = set()

    def clear(self) -> None:
        """Drop every cached process and user name."""
        self._procs.clear()
        self._used.clear()
        self._alive.clear()
        self._asked.clear()
        self._user_names.clear()

    def _facts(
        self,
        proc: psutil.Process,
        pid: int,
        create_time: float | None,
        first: bool,
        ppid: int | None,
    ) -> ProcessFacts:
        """Read each field separately so one denied field does not hide the others."""
        values: dict[str, object] = {"ppid": ppid}
        note: str | None = None
        if create_time is not None:
            values["create_time"] = create_time
            values["elapsed_seconds"] = max(0.0, time.time() - create_time)
        readers: list[tuple[str, Callable[[], object]]] = [
            ("status", proc.status),
            ("name", lambda: clean_text(proc.name())),
            ("cmdline", lambda: _join_cmdline(proc.cmdline())),
            ("user", lambda: self._user(proc)),
            ("rss_bytes", lambda: proc.memory_info().rss),
            ("cpu_percent", lambda: self._cpu_percent(proc, first)),
        ]
        if ppid is None:
            readers.insert(1, ("ppid", proc.ppid))
        with proc.oneshot():
            for field, reader in readers:
                try:
                    values[field] = reader()
                except psutil.ZombieProcess:
                    values["status"] = psutil.STATUS_ZOMBIE
                except psutil.NoSuchProcess:
                    note = NOTE_EXITED
                    break
                except psutil.AccessDenied:
                    note = note or NOTE_ACCESS_DENIED
        if note == NOTE_ACCESS_DENIED and values.get("user") is None:
            values["user"] = self._owner_from_proc_dir(pid)
        if note is None and values.get("status") == psutil.STATUS_ZOMBIE:
            note = NOTE_ZOMBIE
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
