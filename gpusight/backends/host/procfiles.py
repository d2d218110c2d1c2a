"""Small ``/proc/PID`` files kept open between reads, so a process's details read once a second cost one system call
per file instead of three.

A descriptor of ``/proc/PID/stat`` (or ``statm``, ``schedstat``) stays bound to the process it was opened on: read
again from offset 0 (``pread``) it gives that process's figures now, and once the process has ended it fails with
``ESRCH`` even when the PID was handed to another process. A failed read is retried on a fresh open of the path, so
each read answers exactly what opening the path would: the new process, or None when there is none.

Only a bounded number of descriptors is held (a quarter of the open-file limit, at most ``MOST_HELD``); beyond that a
file is opened and closed at each read, as before.
"""

from __future__ import annotations

import os
import weakref

try:
    import resource
except ImportError:  # not a POSIX system
    resource = None  # type: ignore[assignment]

from gpusight.backends.host.proctree import PROC_CHUNK as CHUNK
from gpusight.backends.host.proctree import open_and_read, read_proc_file, read_proc_record

MOST_HELD = 768
"""Descriptors held at most (three files each for 256 processes)."""


def _budget() -> int:
    """Descriptors that may be held: a quarter of the soft open-file limit, at most ``MOST_HELD``."""
    if resource is None:
        return 0
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return MOST_HELD if soft == resource.RLIM_INFINITY else max(0, min(MOST_HELD, soft // 4))


def _close_all(held: dict[tuple[int, str], int]) -> None:
    """Close every descriptor in ``held`` and empty it."""
    for descriptor in held.values():
        os.close(descriptor)
    held.clear()


class HeldProcFiles:
    """Reads one-record ``/proc/PID/NAME`` files, keeping their descriptors open between reads. Use from one thread.

    Call :meth:`keep_only` with the processes still followed and :meth:`close` at the end; descriptors still held when
    the object is collected are closed then.
    """

    def __init__(self) -> None:
        """Hold nothing yet."""
        self._held: dict[tuple[int, str], int] = {}
        self._budget = _budget()
        weakref.finalize(self, _close_all, self._held)

    def read(self, pid: int, name: str) -> bytes | None:
        """The content of ``/proc/PID/NAME`` now, or None when it cannot be read (no such process, denied)."""
        key = (pid, name)
        descriptor = self._held.pop(key, None)
        if descriptor is not None:
            try:
                data: bytes | None = os.pread(descriptor, CHUNK, 0)
            except OSError:  # the process it was opened on has ended: the path may name another now
                data = None
            if data is not None and len(data) < CHUNK:
                self._held[key] = descriptor
                return data
            os.close(descriptor)
        path = f"/proc/{pid}/{name}"
        if len(self._held) >= self._budget:
            return read_proc_record(path)
        opened = open_and_read(path)
        if opened is None:
            return None
        descriptor, data = opened
        if len(data) < CHUNK:
            self._held[key] = descriptor
            return data
        os.close(descriptor)
        return read_proc_file(path)  # not one small record after all: read it whole

    def keep_only(self, pids: set[int]) -> None:
        """Close the files held for processes not in ``pids``."""
        for key in [key for key in self._held if key[0] not in pids]:
            os.close(self._held.pop(key))

    def close(self) -> None:
        """Close every file held."""
        _close_all(self._held)
