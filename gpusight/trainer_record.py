"""The trainer status record: the protocol between a trainer that ``gpusight.torch`` instruments and the monitor.

A watched trainer writes one small JSON record per process to ``$XDG_RUNTIME_DIR/gpusight/<pid>.json`` (or
``<tempdir>/gpusight-<uid>/<pid>.json`` when no runtime directory is set), atomically, a few times a second, and
removes it at exit (:mod:`gpusight.torch.publisher`). The monitor reads it back, trusting nothing in it
(:mod:`gpusight.backends.host.trainer_status`). This module holds what both sides must agree on: the record's kind
and layout version, its step-time breakdown's parts, how old a record may be, and where records live. It imports
neither torch nor any UI library.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from gpusight import old_name

RECORD_KIND = "gpusight.trainer_status"
"""Value of the record's ``kind`` key (a record published under the old name has its own, also read)."""
STATUS_DIR_NAME = "gpusight"
"""The status directories' name: ``$XDG_RUNTIME_DIR/gpusight``, ``<tempdir>/gpusight-<uid>``."""
RECORD_SCHEMA = 1
"""Layout version of the record; a reader skips records with a newer one."""
MAX_AGE_SECONDS = 10.0
"""A record not updated for this long is stale and ignored."""
BREAKDOWN_PARTS = ("data", "compute", "communication", "copy", "idle")
"""The keys of a record's ``breakdown`` section, each a share (0..1) of step time; they sum to 1."""
BREAKDOWN_TOLERANCE = 0.02
"""How far from 1 the breakdown's shares may sum (rounding) before the breakdown is refused."""


def own_status_dir(name: str = STATUS_DIR_NAME) -> Path:
    """The directory this process publishes its record in: ``$XDG_RUNTIME_DIR/gpusight`` or ``<tempdir>/gpusight-<uid>``
    (``name`` in place of ``gpusight``)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime):
        return Path(runtime) / name
    return Path(tempfile.gettempdir()) / f"{name}-{os.geteuid()}"


def status_dirs(uid: int) -> list[Path]:
    """Directories where a process of user ``uid`` may have published its record, most likely first.

    The old name's directories come last: trainers started before the rename publish there.
    """
    dirs: list[Path] = []
    for name in (STATUS_DIR_NAME, old_name.NAME):
        if uid == os.geteuid():
            dirs.append(own_status_dir(name))
        dirs.append(Path(f"/run/user/{uid}/{name}"))
        dirs.append(Path(tempfile.gettempdir()) / f"{name}-{uid}")
    return list(dict.fromkeys(dirs))
