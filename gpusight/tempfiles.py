"""Files written whole under a temporary name, so that a reader never sees half of one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_temp(directory: Path, stem: str, text: str) -> Path:
    """Write ``text`` to a new temporary file in ``directory`` (``.STEM.*.tmp``, mode 0600), flushed to disk, and return
    its path for the caller to rename into place; raises ``OSError`` and leaves nothing behind on failure."""
    fd, name = tempfile.mkstemp(prefix=f".{stem}.", suffix=".tmp", dir=directory)
    temp = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return temp
