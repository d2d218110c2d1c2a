"""Reading the hints that group GPU processes into jobs: whitelisted environment, parent, container, listening ports.

A process's environment holds secrets (tokens, passwords), so only the keys of
:data:`gpusight.facts.jobs.ENV_KEYS` are ever kept from ``/proc/PID/environ``; every other value is
dropped as the file is parsed and never stored or logged. The environment, the container, pod or
Slurm job (:mod:`gpusight.backends.host.containers`) and the parent's name and command line are read once per
process (pid and start time; the parent once per pid and start ticks) and cached. Where the environment may not be read (another user's process) the process simply
has no environment hints: that is not an error. The listening-socket probe (``/proc/PID/net/tcp``
and ``tcp6`` LISTEN entries matched against the process's ``/proc/PID/fd`` socket links) runs only
when asked, for processes whose kind nothing else tells, at most every ``probe_seconds`` per process;
the tables, slow to read, only for a process that has sockets, at most every ``probe_seconds`` per
network namespace.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable

from gpusight.backends.host.containers import read_container
from gpusight.backends.host.proctree import clean_text, read_proc_file
from gpusight.facts.jobs import ENV_KEYS, ProcessHints

PROBE_SECONDS = 30.0
"""Least time between two listening-socket probes of one process."""

_ENV_KEYS = frozenset(key.encode() for key in ENV_KEYS)
_LONGEST_VALUE = 256
"""Longer values of a whitelisted key are cut (they are addresses, ports and numbers)."""
_TCP_LISTEN = b"0A"
"""The state column of a listening socket in ``/proc/net/tcp``."""


def read_env(pid: int) -> dict[str, str] | None:
    """The whitelisted variables of ``pid``'s environment; None when it cannot be read (another user's process)."""
    data = read_proc_file(f"/proc/{pid}/environ")
    if data is None:
        return None
    kept: dict[str, str] = {}
    for entry in data.split(b"\0"):
        key, equals, value = entry.partition(b"=")
        if equals and key in _ENV_KEYS:
            kept[key.decode()] = clean_text(value[:_LONGEST_VALUE].decode("utf-8", "surrogateescape"))
    return kept


def _start_ticks(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot), from ``/proc/PID/stat``; None when unreadable."""
    data = read_proc_file(f"/proc/{pid}/stat")
    if data is None:
        return None
    try:
        return int(data[data.rfind(b")") + 2 :].split()[19])
    except (IndexError, ValueError):
        return None


def _read_parent(ppid: int) -> tuple[str | None, tuple[str, ...]]:
    """(name, command line) of ``ppid``; None and () where unreadable."""
    comm = read_proc_file(f"/proc/{ppid}/comm")
    cmdline = read_proc_file(f"/proc/{ppid}/cmdline") or b""
    name = None if comm is None else clean_text(comm.rstrip(b"\n").decode("utf-8", "surrogateescape"))
    args = cmdline.rstrip(b"\0").split(b"\0")
    argv = tuple(clean_text(arg.decode("utf-8", "surrogateescape")) for arg in args if arg)
    return name, argv


def socket_inodes(pid: int) -> set[int]:
    """Inodes of the sockets ``pid`` has open (``/proc/PID/fd`` links); empty when none or unreadable."""
    try:
        descriptors = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return set()
    found = set()
    for descriptor in descriptors:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{descriptor}")
        except OSError:
            continue
        if link.startswith("socket:[") and link.endswith("]") and link[8:-1].isdigit():
            found.add(int(link[8:-1]))
    return found


def listening_sockets(pid: int) -> dict[int, int]:
    """Inode -> port of every listening TCP socket in ``pid``'s network namespace (``/proc/PID/net/tcp``, ``tcp6``).

    Reading these tables walks the kernel's whole TCP hash table: milliseconds, so it is done rarely.
    """
    ports: dict[int, int] = {}
    for table in ("tcp", "tcp6"):
        data = read_proc_file(f"/proc/{pid}/net/{table}")
        for line in (data or b"").splitlines()[1:]:
            fields = line.split()
            if len(fields) > 9 and fields[3] == _TCP_LISTEN:
                try:
                    ports[int(fields[9])] = int(fields[1].rpartition(b":")[2], 16)
                except ValueError:
                    continue
    return ports


def listening_port(pid: int) -> int | None:
    """The lowest TCP port ``pid`` listens on; None when none, or when its sockets cannot be read."""
    inodes = socket_inodes(pid)
    return _lowest(inodes, listening_sockets(pid)) if inodes else None


def _lowest(inodes: set[int], listening: dict[int, int]) -> int | None:
    """The lowest port among the listening sockets (inode -> port) that are in ``inodes``; None for none."""
    ports = [listening[inode] for inode in inodes if inode in listening]
    return min(ports) if ports else None


class HintReader:
    """Reads and caches the hints of GPU processes. Use from one thread.

    Call :meth:`read` (and :meth:`probe` where wanted) for the processes of a detail refresh, then
    :meth:`forget_unseen`.
    """

    def __init__(self, probe_seconds: float = PROBE_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        """Empty caches; probes of one process at most every ``probe_seconds`` of ``clock``."""
        self._probe_seconds = probe_seconds
        self._clock = clock
        self._hints: dict[tuple[int, float | None, int | None], ProcessHints] = {}
        self._parents: dict[tuple[int, int | None], tuple[str | None, tuple[str, ...]]] = {}
        self._probes: dict[tuple[int, float | None], tuple[float, int | None]] = {}
        self._tables: dict[str, tuple[float, dict[int, int]]] = {}
        self._seen: set[tuple[int, float | None, int | None]] = set()

    def read(self, pid: int, create_time: float | None, ppid: int | None, has_status: bool) -> ProcessHints:
        """The hints of process ``pid`` started at ``create_time`` whose parent is ``ppid``; cached per identity."""
        key = (pid, create_time, ppid)
        self._seen.add(key)
        hints = self._hints.get(key)
        if hints is None:
            parent_name: str | None = None
            parent_argv: tuple[str, ...] = ()
            parent_start: int | None = None
            if ppid is not None and ppid > 0:
                parent_start = _start_ticks(ppid)
                parent = self._parents.get((ppid, parent_start))
                if parent is None:
                    parent = self._parents[ppid, parent_start] = _read_parent(ppid)
                parent_name, parent_argv = parent
            env = read_env(pid)
            hints = self._hints[key] = ProcessHints(
                env=env, parent_name=parent_name, parent_argv=parent_argv,
                parent_start=None if parent_start is None else float(parent_start), container=read_container(pid, env),
            )
        if hints.has_status != has_status:
            hints = dataclasses.replace(hints, has_status=has_status)
        return hints

    def probe(self, pid: int, create_time: float | None) -> int | None:
        """The TCP port ``pid`` listens on, probed at most every ``probe_seconds`` (the last answer in between)."""
        now = self._clock()
        key = (pid, create_time)
        last = self._probes.get(key)
        if last is None or not 0 <= now - last[0] < self._probe_seconds:
            last = self._probes[key] = (now, self._port(pid, now))
        return last[1]

    def _port(self, pid: int, now: float) -> int | None:
        """The port ``pid`` listens on, with its namespace's table read at most every ``probe_seconds``.

        A socket opened after the table was read is therefore seen within two probe periods.
        """
        inodes = socket_inodes(pid)
        if not inodes:
            return None
        try:
            namespace = os.readlink(f"/proc/{pid}/ns/net")
        except OSError:
            return _lowest(inodes, listening_sockets(pid))
        table = self._tables.get(namespace)
        if table is None or not 0 <= now - table[0] < self._probe_seconds:
            table = self._tables[namespace] = (now, listening_sockets(pid))
        return _lowest(inodes, table[1])

    def forget_unseen(self) -> None:
        """Drop the processes and parents not read since the previous call."""
        for key in self._hints.keys() - self._seen:
            del self._hints[key]
        alive = {(pid, start) for pid, start, _ in self._seen}
        for probed in self._probes.keys() - alive:
            del self._probes[probed]
        if not self._probes:
            self._tables.clear()
        parents = {
            (ppid, None if h.parent_start is None else int(h.parent_start)) for (_, _, ppid), h in self._hints.items()
        }
        for parent in self._parents.keys() - parents:
            del self._parents[parent]
        self._seen = set()
