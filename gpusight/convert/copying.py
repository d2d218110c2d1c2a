"""Copying a recording's snapshots to a writer, counting the damaged parts skipped: what every conversion shares."""

from __future__ import annotations

from collections.abc import Callable, Generator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gpusight.recordings.formats import RecordingProblem
from gpusight.snapshot.model import Snapshot

if TYPE_CHECKING:
    from gpusight.recordings.progress import ReadProgress

SHOWN_PROBLEMS = 5
"""How many damaged parts are listed one by one before the rest are only counted."""


class ConvertError(Exception):
    """A conversion that cannot be done; ``str()`` is the one line for the user."""


@dataclass
class Tally:
    """What a conversion read: snapshots, and the damaged parts it skipped."""

    snapshots: int = 0
    """Snapshots written."""
    problems: int = 0
    """Damaged parts skipped."""
    first_problems: list[RecordingProblem] = field(default_factory=list)
    """The first :data:`SHOWN_PROBLEMS` of them."""


def copy_snapshots(source: Path, write: Callable[[int, Snapshot], None], progress: ReadProgress | None = None) -> Tally:
    """Read ``source`` and hand each snapshot with its number to ``write``, counting the damaged parts skipped.

    ``progress`` is told how far the read has got, and that it ended before this returns or raises.
    Raises :class:`ConvertError` when ``source`` cannot be opened or holds no snapshot at all.
    """
    tally = Tally()
    items = _read(source, progress)
    with closing(items):
        for item in items:
            if isinstance(item, RecordingProblem):
                tally.problems += 1
                if len(tally.first_problems) < SHOWN_PROBLEMS:
                    tally.first_problems.append(item)
            else:
                write(tally.snapshots, item)
                tally.snapshots += 1
    if tally.snapshots == 0:
        detail = f" ({tally.problems} unreadable part{'s' * (tally.problems != 1)}: {tally.first_problems[0]})" \
            if tally.first_problems else ""
        raise ConvertError(f"{source} holds no snapshots{detail}")
    return tally


def _read(source: Path, progress: ReadProgress | None) -> Generator[Snapshot | RecordingProblem, None, None]:
    """The recording's items; an unreadable file is a :class:`ConvertError`."""
    from gpusight.recordings.opening import read_recording  # here: the command line imports this module at start-up

    try:
        return read_recording(source, progress)
    except OSError as exc:
        raise ConvertError(f"cannot read recording {source}: {exc.strerror or exc}") from exc


def size_text(count: int) -> str:
    """A byte count for people: ``512 B``, ``3.4 MB``, ``1.2 GB``."""
    if count < 1000:
        return f"{count} B"
    value, unit = count / 1000, "kB"
    for bigger in ("MB", "GB"):
        if value < 1000:
            break
        value, unit = value / 1000, bigger
    return f"{value:.1f} {unit}"
