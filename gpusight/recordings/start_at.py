"""``--at WHEN`` for ``--replay FILE``: start playing a recording at a clock time or an offset from its start."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from gpusight.recordings.replay_time import WHEN_HELP, parse_when

if TYPE_CHECKING:
    from gpusight.recordings.progress import ReadProgress
    from gpusight.recordings.replay import ReplaySource


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--at`` to the command line."""
    parser.add_argument("--at", metavar="WHEN", help=f"with --replay: start at WHEN, {WHEN_HELP}")


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Usage errors of ``--at``."""
    if args.at is not None and args.replay is None:
        parser.error("--at needs --replay")


def start_at(replay: ReplaySource, when: str | None, progress: ReadProgress | None = None) -> None:
    """Make ``replay``'s first poll show the snapshot at ``when`` (nothing when None); indexes the recording first,
    telling ``progress`` how far the scan has got when this call starts it.

    Raises :class:`ReplayError` with a one-line message (naming the recording's span when ``when`` lies
    outside it), after closing ``replay``.
    """
    from gpusight.recordings.replay import ReplayError
    from gpusight.sampling.steering import SeekTo

    if when is None:
        return
    try:
        replay.wait_indexed(progress=progress)
        if replay.index_error is not None or replay.last_timestamp is None:
            raise ReplayError(replay.index_error or f"cannot seek in {replay.path.name}")
        try:
            target = parse_when(when, replay.first_timestamp, replay.last_timestamp)
        except ValueError as exc:
            raise ReplayError(f"--at {exc}") from None
    except ReplayError:
        replay.close()
        raise
    replay.steer(SeekTo(target))
