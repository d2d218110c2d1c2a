"""Finding the descendants of a few processes without scanning the whole machine.

On Linux each thread's ``/proc/PID/task/TID/children`` file lists the children it created, so
the tree under a GPU process can be walked by reading a handful of small files per tick. Where
that file is missing (kernels built without ``CONFIG_PROC_CHILDREN``, other systems) the walk
falls back to one psutil scan of every process for its parent id, repeated at most every
``rescan_seconds`` and cached in between.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import psutil

ChildrenLookup = Callable[[int], list[tuple[int, str | None]]]
"""Maps a pid to its children as ``(pid, name)`` pairs."""


def clean_text(text: str) -> str:
    """Return ``text`` as valid Unicode: undecodable bytes (surrogate escapes) become U+FFFD."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8", "replace")


@dataclass(frozen=True, slots=True)
class Descendant:
    """A process found below one of the roots of a walk."""

    pid: int
    """Process id."""
    ppid: int
    """Parent process id at the time of the walk."""
    name: str | None
    """Process name (``comm``), or None when it could not be read."""


def children_files_available() -> bool:
    """Return True when this kernel offers ``/proc/PID/task/TID/children``."""
    return os.path.exists(f"/proc/{os.getpid()}/task/{threading.get_native_id()}/children")


def read_proc_file(path: str) -> bytes | None:
    """The whole content of a small ``/proc`` file, or None when it cannot be read.

    Plain ``os.read`` calls: a third cheaper than ``open``, which matters at a few files per process per second.
    """
    return _read_proc(path, single_record=False)


def read_proc_record(path: str) -> bytes | None:
    """:func:`read_proc_file` for a file the kernel writes as one record (``stat``, ``statm``, ``schedstat``,
    ``comm``): a read that does not fill the buffer returned all of it, so no second read is made to find the end.

    (A file of many records, such as ``children``, may return less than the buffer before its end.)
    """
    return _read_proc(path, single_record=True)


PROC_CHUNK = 4096
"""Bytes asked for by each read of a ``/proc`` file."""


def open_and_read(path: str) -> tuple[int, bytes] | None:
    """Open ``path`` and read up to ``PROC_CHUNK`` bytes: (its descriptor, left open, and the bytes read); None
    when it cannot be opened or read (then nothing is left open)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return descriptor, os.read(descriptor, PROC_CHUNK)
    except OSError:
        os.close(descriptor)
        return None


def _read_proc(path: str, single_record: bool) -> bytes | None:
    """Read ``path`` whole; with ``single_record``, a short read is taken as its end."""
    opened = open_and_read(path)
    if opened is None:
        return None
    descriptor, chunk = opened
    try:
        if single_record and len(chunk) < PROC_CHUNK:
            return chunk
        chunks = [chunk]
        while chunk:
            chunk = os.read(descriptor, PROC_CHUNK)
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        os.close(descriptor)
    return b"".join(chunks)


def _read_children(pid: int) -> list[int]:
    """Return the children of every thread of ``pid``; empty when the process is gone or unreadable."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    children: list[int] = []
    for tid in tids:
        data = read_proc_file(f"/proc/{pid}/task/{tid}/children")
        if data is not None:  # None: the thread ended meanwhile; its children moved to another thread
            children.extend(int(field) for field in data.split())
    return children


def _read_comm(pid: int) -> str | None:
    """Return ``/proc/PID/comm`` decoded leniently, or None when it cannot be read."""
    data = read_proc_record(f"/proc/{pid}/comm")
    return None if data is None else data.rstrip(b"\n").decode("utf-8", "replace")


class ProcessTree:
    """Walks the process trees below given root pids. Not thread-safe: use from one thread."""

    def __init__(self, use_children_files: bool | None = None, rescan_seconds: float = 2.0) -> None:
        """Create a walker.

        ``use_children_files`` None detects support; False forces the psutil scan (slower, and
        at most every ``rescan_seconds``).
        """
        self.uses_children_files = (
            children_files_available() if use_children_files is None else use_children_files
        )
        """True when walks read ``/proc/PID/task/TID/children``; False when they scan all processes."""
        self.rescan_seconds = rescan_seconds
        """Minimum age of the cached whole-machine scan before the fallback scans again."""
        self._by_parent: dict[int, list[tuple[int, str | None]]] = {}
        self._scan_time: float | None = None

    def descendants(self, roots: Iterable[int]) -> dict[int, Descendant]:
        """Return every process below any of ``roots`` (roots themselves excluded), keyed by pid."""
        roots = list(dict.fromkeys(roots))
        if self.uses_children_files:
            return self._walk(roots, self._children_from_proc)
        return self._walk(roots, self._children_from_scan())

    def _children_from_proc(self, pid: int) -> list[tuple[int, str | None]]:
        """Children of ``pid`` with their names, read from ``/proc``."""
        return [(child, _read_comm(child)) for child in _read_children(pid)]

    def _children_from_scan(self) -> ChildrenLookup:
        """Return a children lookup built from a scan of every process's parent id, cached a while."""
        now = time.monotonic()
        if self._scan_time is None or now - self._scan_time >= self.rescan_seconds:
            by_parent: dict[int, list[tuple[int, str | None]]] = {}
            for proc in psutil.process_iter(["ppid", "name"]):
                ppid, name = proc.info["ppid"], proc.info["name"]
                if ppid is not None and ppid != proc.pid:
                    entry = (proc.pid, clean_text(name) if name is not None else None)
                    by_parent.setdefault(ppid, []).append(entry)
            self._by_parent = by_parent
            self._scan_time = now
        by_parent = self._by_parent
        return lambda pid: by_parent.get(pid, [])

    @staticmethod
    def _walk(roots: list[int], children_of: ChildrenLookup) -> dict[int, Descendant]:
        """Breadth-first walk from ``roots`` using ``children_of(pid) -> [(child, name)]``."""
        found: dict[int, Descendant] = {}
        visited = set(roots)
        queue = deque(roots)
        while queue:
            parent = queue.popleft()
            for child, name in children_of(parent):
                if child in visited:
                    continue
                visited.add(child)
                found[child] = Descendant(pid=child, ppid=parent, name=name)
                queue.append(child)
        return found
