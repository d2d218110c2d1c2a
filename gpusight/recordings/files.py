"""Opening a recording's file for reading: only regular files, never a FIFO or a device that could block or never end."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    from gpusight.recordings.progress import ReadProgress


def open_regular_file(path: str | os.PathLike[str]) -> BinaryIO:
    """Open ``path`` for reading if it is a regular file; raise ``OSError`` saying what it is otherwise.

    ``O_NONBLOCK`` keeps the open itself from waiting for a writer when the path is a FIFO.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, f"not a regular file ({_file_kind(mode)})", os.fspath(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _file_kind(mode: int) -> str:
    """What a file that is not a regular file is, in words."""
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "a special file")


@contextmanager
def reading(file: BinaryIO, progress: ReadProgress | None) -> Iterator[None]:
    """Around a read of the whole of ``file``: tell ``progress`` (when given) the file's size now and the end on the way out."""
    if progress is None:
        yield
        return
    progress.begin(os.fstat(file.fileno()).st_size)
    try:
        yield
    finally:
        progress.end()
