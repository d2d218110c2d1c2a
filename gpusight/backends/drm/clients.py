"""DRM clients found through processes' file descriptors, each counted once, with their engine usage over time.

A scan walks ``<root>/<pid>/fd/`` for links to ``/dev/dri/*`` (a DRM client) or ``/dev/kfd`` (ROCm's compute
interface), and reads each DRM descriptor's ``<root>/<pid>/fdinfo/<fd>``. Walking every process's descriptors is
the costly part, so it is redone at most once per ``rescan_s``; in between only the known descriptors' fdinfo files
are read again (a file gone means the descriptor closed). Processes forked from one another share descriptors, and
DataLoader workers inherit their trainer's: a client (``drm-pdev`` and ``drm-client-id``) is counted once, under the
process whose parent does not hold it too, the one that opened it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gpusight.backends.drm.fdinfo import MAX_FDINFO_BYTES, ClientStats, parse_fdinfo

DRM_PREFIX = "/dev/dri/"
"""Where DRM device nodes live: a descriptor linking here is a DRM client."""
KFD_PATH = "/dev/kfd"
"""ROCm's compute device node."""
RESCAN_S = 1.0
"""Least time between two walks of every process's descriptors."""


@dataclass(frozen=True, slots=True)
class DrmClient:
    """One DRM client: who opened it, on which device, its latest counters and its usage since the last poll."""

    pid: int
    """The process that opened it (or, without a parent among its holders, the lowest pid holding it)."""
    stats: ClientStats
    """Its fdinfo keys now."""
    engine_percent: dict[str, float] = field(default_factory=dict)
    """Busy percent per engine class since the previous poll, each 0-100 per engine of the class; empty on the
    first sight of the client (a counter needs two readings)."""


@dataclass(frozen=True, slots=True)
class ClientScan:
    """What one poll found: the clients, the processes holding ``/dev/kfd``, and the processes that could not be read."""

    clients: tuple[DrmClient, ...] = ()
    """Every DRM client of the drivers asked for, each once."""
    kfd_pids: frozenset[int] = frozenset()
    """Processes with ``/dev/kfd`` open (ROCm compute)."""
    unreadable: int = 0
    """Processes whose descriptors could not be listed (another user's, without root)."""


@dataclass
class _Known:
    """Descriptors found at the last walk."""

    drm: dict[int, list[int]] = field(default_factory=dict)
    """pid -> its DRM descriptors."""
    kfd: set[int] = field(default_factory=set)
    unreadable: int = 0
    at: float = -1e18


def parent_pid(pid: int, proc: Path = Path("/proc")) -> int | None:
    """The live parent of ``pid`` from ``/proc/<pid>/stat``; None when it has gone."""
    try:
        text = (proc / str(pid) / "stat").read_text(errors="replace")
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None


class DrmClientScanner:
    """Finds the DRM clients of some drivers under ``root`` and turns their counters into usage."""

    def __init__(self, root: Path, drivers: frozenset[str], *, rescan_s: float = RESCAN_S,
                 clock: Callable[[], float] = time.monotonic,
                 parent_of: Callable[[int], int | None] = parent_pid) -> None:
        self.root = root
        """The fd tree (``/proc`` or a fixture)."""
        self.drivers = drivers
        """The ``drm-driver`` values kept, e.g. ``{"amdgpu"}``."""
        self._rescan_s = rescan_s
        self._clock = clock
        self._parent_of = parent_of
        self._known = _Known()
        self._previous: dict[tuple[object, ...], tuple[float, ClientStats]] = {}

    def scan(self) -> ClientScan:
        """The clients now, with usage since the last call."""
        now = self._clock()
        if now - self._known.at >= self._rescan_s:
            self._known = self._walk(now)
        holders: dict[tuple[object, ...], list[tuple[int, ClientStats]]] = {}
        for pid, fds in list(self._known.drm.items()):
            alive = []
            for fd in fds:
                stats = self._read(pid, fd)
                if stats is None:
                    continue
                alive.append(fd)
                if stats.driver in self.drivers:
                    key: tuple[object, ...] = (stats.pdev, stats.client_id) if stats.client_id is not None else (stats.pdev, pid, fd)
                    holders.setdefault(key, []).append((pid, stats))
            self._known.drm[pid] = alive
        clients = []
        current: dict[tuple[object, ...], tuple[float, ClientStats]] = {}
        for key, held in holders.items():
            owner, stats = self._owner(held)
            current[key] = (now, stats)
            previous = self._previous.get(key)
            usage = {} if previous is None else engine_usage(previous[1], stats, now - previous[0])
            clients.append(DrmClient(owner, stats, usage))
        self._previous = current
        return ClientScan(tuple(sorted(clients, key=lambda c: (c.pid, c.stats.pdev or ""))),
                          frozenset(self._known.kfd), self._known.unreadable)

    def _owner(self, held: list[tuple[int, ClientStats]]) -> tuple[int, ClientStats]:
        """The holder whose parent does not hold the client too; the lowest pid among several such."""
        pids = {pid for pid, _ in held}
        openers = [(pid, stats) for pid, stats in held if self._parent_of(pid) not in pids]
        return min(openers or held, key=lambda item: item[0])

    def _read(self, pid: int, fd: int) -> ClientStats | None:
        try:
            with open(self.root / str(pid) / "fdinfo" / str(fd), "rb") as handle:
                data = handle.read(MAX_FDINFO_BYTES)
        except OSError:
            return None
        return parse_fdinfo(data.decode("utf-8", errors="replace"))

    def _walk(self, now: float) -> _Known:
        known = _Known(at=now)
        try:
            entries = [e.name for e in os.scandir(self.root) if e.name.isascii() and e.name.isdigit()]
        except OSError:
            return known
        for name in entries:
            fd_dir = self.root / name / "fd"
            try:
                fds = [e.name for e in os.scandir(fd_dir)]
            except PermissionError:
                known.unreadable += 1
                continue
            except OSError:
                continue
            pid = int(name)
            for fd in fds:
                try:
                    target = os.readlink(fd_dir / fd)
                except OSError:
                    continue
                if target.startswith(DRM_PREFIX) and fd.isdigit():
                    known.drm.setdefault(pid, []).append(int(fd))
                elif target == KFD_PATH:
                    known.kfd.add(pid)
        return known


def engine_usage(before: ClientStats, after: ClientStats, seconds: float) -> dict[str, float]:
    """Busy percent per engine class between two readings ``seconds`` apart, per engine of the class (0-100).

    Nanosecond counters are divided by the wall time; xe's cycle counters by the elapsed cycles beside them. A
    counter that went backwards (the descriptor was reopened under the same id) gives no figure for that class.
    """
    usage: dict[str, float] = {}
    if seconds > 0:
        for engine, busy in after.engine_ns.items():
            was = before.engine_ns.get(engine)
            if was is not None and busy >= was:
                capacity = max(1, after.engine_capacity.get(engine, 1))
                usage[engine] = min(100.0, (busy - was) / (seconds * 1e9) / capacity * 100.0)
    for engine, busy in after.cycles.items():
        was, total, total_was = before.cycles.get(engine), after.total_cycles.get(engine), before.total_cycles.get(engine)
        if None in (was, total, total_was):
            continue
        assert was is not None and total is not None and total_was is not None
        if busy >= was and total > total_was:
            capacity = max(1, after.engine_capacity.get(engine, 1))
            usage[engine] = min(100.0, (busy - was) / (total - total_was) / capacity * 100.0)
    return usage
