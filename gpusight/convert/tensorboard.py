"""``gpusight --convert FILE --to tensorboard DIR``: a recording as TensorBoard scalars, one run per directory.

Every snapshot becomes one event holding all its known values (tags from
:mod:`gpusight.tracker_scalars`, e.g. ``gpu0/utilization_percent``), with the snapshot's
timestamp as wall time and its number in the recording (0, 1, 2, ...) as step. The step is the
snapshot's number rather than seconds since the start: it always increases, where timestamps can
repeat or step back (a clock adjustment, a recording appended to later), and TensorBoard drops data
it sees "before" a step it already has. TensorBoard's Relative and Wall axes show the time.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING

from gpusight import old_name
from gpusight.convert.copying import ConvertError, Tally, copy_snapshots, size_text
from gpusight.convert.tfevents import EventFileWriter
from gpusight.snapshot.model import Snapshot
from gpusight.tracker_scalars import snapshot_scalars

if TYPE_CHECKING:
    from gpusight.recordings.progress import ReadProgress

EVENT_FILE_PREFIX = "events.out.tfevents."
"""How every TensorBoard event file's name starts."""

OWN_SUFFIX = ".gpusight"
"""How the names of the event files gpusight writes end, so ``--force`` replaces only those."""


def convert_to_tensorboard(source: Path, directory: Path, *, force: bool,
                           progress: ReadProgress | None = None) -> tuple[Tally, str]:
    """Write ``source``'s snapshots as one event file in ``directory`` (created when missing).

    A directory holding another program's event files is refused (TensorBoard would mix the two runs);
    one holding an earlier conversion is refused unless ``force``, which replaces it. ``progress`` is
    told how far the read of ``source`` has got.
    """
    earlier = _earlier_conversions(directory, force=force)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{EVENT_FILE_PREFIX}{int(time.time()):010d}.{socket.gethostname()}.{os.getpid()}{OWN_SUFFIX}"
        writer = EventFileWriter(path)
    except OSError as exc:
        raise ConvertError(f"cannot write into {directory}: {exc.strerror or exc}") from exc
    try:
        try:
            tally = copy_snapshots(source, lambda number, snapshot: _write(writer, number, snapshot), progress)
        finally:
            writer.close()
        for old in earlier:
            old.unlink(missing_ok=True)
    except OSError as exc:
        path.unlink(missing_ok=True)
        raise ConvertError(f"cannot write {path}: {exc.strerror or exc}") from exc
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return tally, f"{path} (tensorboard, {size_text(writer.bytes_written)})"


def _write(writer: EventFileWriter, number: int, snapshot: Snapshot) -> None:
    """One event: the snapshot's scalars at its timestamp, with its number as step."""
    writer.write_scalars(snapshot.timestamp, number, snapshot_scalars(snapshot))


def _earlier_conversions(directory: Path, *, force: bool) -> list[Path]:
    """gpusight's event files already in ``directory`` (to replace with ``force``); refuse what would mix runs."""
    if not directory.exists():
        return []
    if not directory.is_dir():
        raise ConvertError(f"{directory} is not a directory")
    found = sorted(directory.glob(EVENT_FILE_PREFIX + "*"))
    foreign = [path for path in found if not path.name.endswith((OWN_SUFFIX, old_name.TENSORBOARD_SUFFIX))]
    if foreign:
        raise ConvertError(f"{directory} holds another program's TensorBoard events ({foreign[0].name}); "
                           "give gpusight a directory of its own, e.g. " + str(directory / "gpusight"))
    if found and not force:
        raise ConvertError(f"{directory} already holds a conversion ({found[0].name}); add --force to replace it")
    return found
