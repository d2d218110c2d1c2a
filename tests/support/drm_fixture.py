"""Fixture trees for the sysfs backends, written as the kernel lays them out, and changed while gpusight reads them.

:class:`SysfsTree` writes files under a ``GPUSIGHT_SYSFS_ROOT``; :class:`FdinfoTree` gives real processes DRM file
descriptors under a ``GPUSIGHT_FDINFO_ROOT``: a link ``<root>/<pid>/fd/<fd>`` naming ``/dev/dri/renderD128`` (or
``/dev/kfd``) beside its ``<root>/<pid>/fdinfo/<fd>``, in the format of ``Documentation/gpu/drm-usage-stats.rst``.
Every write replaces the file atomically, as a reader of the real sysfs never sees half a value.
:class:`Ticker` calls a function on a period in a thread, so counters move while the app polls.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


class SysfsTree:
    """A sysfs tree under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def write(self, relative: str, value: object) -> None:
        """Write one sysfs file (a trailing newline, as the kernel writes them)."""
        write_atomic(self.root / relative, f"{value}\n")

    def write_many(self, directory: str, files: Mapping[str, object]) -> None:
        """Write several files of one directory."""
        for name, value in files.items():
            self.write(f"{directory}/{name}", value)


def fdinfo_text(fields: Mapping[str, object]) -> str:
    """An fdinfo file: the generic lines every file has, then the DRM keys in order."""
    lines = ["pos:\t0", "flags:\t02100002", "mnt_id:\t26", "ino:\t1049"]
    lines += [f"{key}:\t{value}" for key, value in fields.items()]
    return "\n".join(lines) + "\n"


class FdinfoTree:
    """Processes' DRM descriptors under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def open(self, pid: int, fd: int, fields: Mapping[str, object], target: str = "/dev/dri/renderD128") -> None:
        """Give ``pid`` descriptor ``fd`` linking to ``target``, with ``fields`` as its DRM fdinfo keys."""
        link = self.root / str(pid) / "fd" / str(fd)
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink():
            link.unlink()
        link.symlink_to(target)
        self.update(pid, fd, fields)

    def update(self, pid: int, fd: int, fields: Mapping[str, object]) -> None:
        """Rewrite the fdinfo of ``pid``'s descriptor ``fd``."""
        write_atomic(self.root / str(pid) / "fdinfo" / str(fd), fdinfo_text(fields))

    def open_kfd(self, pid: int, fd: int) -> None:
        """Give ``pid`` a descriptor on ``/dev/kfd`` (ROCm compute); its fdinfo holds no DRM keys."""
        self.open(pid, fd, {}, target="/dev/kfd")

    def close(self, pid: int, fd: int) -> None:
        """Close ``pid``'s descriptor ``fd``: its link and fdinfo go."""
        for part in ("fd", "fdinfo"):
            path = self.root / str(pid) / part / str(fd)
            if path.is_symlink() or path.exists():
                path.unlink()


class Ticker:
    """Calls ``tick(elapsed_seconds)`` every ``period`` seconds in a thread until stopped; use it as a context."""

    def __init__(self, tick: Callable[[float], None], period: float = 0.1) -> None:
        self._tick = tick
        self._period = period
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import time

        start = time.monotonic()
        while not self._stop.wait(self._period):
            self._tick(time.monotonic() - start)

    def __enter__(self) -> Ticker:
        self._tick(0.0)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
