"""Writing this process's status record: atomically, into a private directory, removed at exit.

The record is a small JSON object (layout in :mod:`gpusight.trainer_record`) written to a
temporary file in the same directory and renamed over ``<pid>.json``, so a reader sees either the
old or the new record, never half of one. The directory must be a real directory owned by this
user and not writable by others; otherwise nothing is published (a warning says why, once).
"""

from __future__ import annotations

import atexit
import json
import os
import stat
import threading
import warnings
from pathlib import Path
from typing import Any

import psutil

from gpusight.trainer_record import RECORD_KIND, RECORD_SCHEMA, own_status_dir

_removal_lock = threading.Lock()
_to_remove: dict[Path, int] = {}
"""Records to delete at exit, with the pid that wrote each (a forked child must not delete its parent's)."""


def _remove_at_exit() -> None:
    """Delete the records this process wrote (registered with ``atexit`` once)."""
    with _removal_lock:
        mine = [path for path, pid in _to_remove.items() if pid == os.getpid()]
    for path in mine:
        _unlink(path)


def _unlink(path: Path) -> None:
    """Remove ``path`` if it is there."""
    try:
        path.unlink()
    except OSError:
        pass


def _private_dir(directory: Path) -> str | None:
    """Create ``directory`` (mode 0700) if needed; None when it is safe to use, else why not."""
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(directory)
    except OSError as exc:
        return f"cannot create {directory}: {exc}"
    if not stat.S_ISDIR(info.st_mode):
        return f"{directory} is not a directory"
    if info.st_uid != os.getuid():
        return f"{directory} belongs to another user"
    if info.st_mode & 0o022:
        return f"{directory} is writable by other users"
    return None


class StatusPublisher:
    """Writes one process's record to ``<directory>/<pid>.json``; the record is removed at exit or by :meth:`remove`."""

    def __init__(self, directory: Path | None = None) -> None:
        """Publish into ``directory`` (default: :func:`~gpusight.trainer_record.own_status_dir`)."""
        self.directory = own_status_dir() if directory is None else directory
        """Where the record goes."""
        self._pid = -1
        self._base: dict[str, Any] = {}
        self._broken: str | None = None
        self._ready = False

    @property
    def path(self) -> Path:
        """The record's path for the current process."""
        return self.directory / f"{os.getpid()}.json"

    def publish(self, fields: dict[str, Any]) -> bool:
        """Write a record made of the identity fields and ``fields``; False when publishing is off or failed."""
        if self._broken is not None:
            return False
        pid = os.getpid()
        if pid != self._pid:
            self._start(pid)
            if self._broken is not None:
                return False
        record = dict(self._base)
        record.update(fields)
        path = self.directory / f"{pid}.json"
        temporary = self.directory / f".{pid}.json.tmp"
        try:
            data = json.dumps(record, separators=(",", ":"), allow_nan=False).encode()
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
            fd = os.open(temporary, flags, 0o600)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
            os.replace(temporary, path)
        except (OSError, ValueError):
            _unlink(temporary)
            return False
        return True

    def remove(self) -> None:
        """Delete the record now (it is written again by the next :meth:`publish`)."""
        if self._pid == os.getpid():
            _unlink(self.directory / f"{self._pid}.json")

    def _start(self, pid: int) -> None:
        """Check the directory, note this process's identity and arrange removal at exit."""
        self._broken = _private_dir(self.directory)
        if self._broken is not None:
            warnings.warn(f"gpusight.torch: not publishing trainer status: {self._broken}", RuntimeWarning, stacklevel=4)
            return
        try:
            create_time = psutil.Process(pid).create_time()
        except psutil.Error as exc:
            self._broken = f"cannot read this process's start time: {exc}"
            return
        self._pid = pid
        self._base = {
            "kind": RECORD_KIND,
            "schema": RECORD_SCHEMA,
            "pid": pid,
            "create_time": create_time,
            "uid": os.geteuid(),
        }
        with _removal_lock:
            first = not _to_remove
            _to_remove[self.directory / f"{pid}.json"] = pid
        if first:
            atexit.register(_remove_at_exit)
