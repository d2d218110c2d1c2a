"""``gpusight --convert IN OUT`` and ``gpusight --convert IN --to tensorboard DIR``: the command line of conversions.

``IN`` is any recording (its format told by its content). ``OUT``'s name picks the format written, as
for ``--record`` (JSON lines for ``.jsonl``/``.jsonl.gz``, else compact), or a folder of Parquet tables for
``.parquet`` (:mod:`gpusight.convert.parquet`); ``-`` writes JSON lines to stdout. Damaged parts of ``IN`` are skipped and reported on stderr. ``IN`` is never written; an existing
``OUT`` is replaced only with ``--force``, and only once the conversion has finished (it is written
under a temporary name beside it first). Errors are one line on stderr with status 1; a bad command
line is a usage error (status 2).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gpusight.convert.copying import ConvertError, Tally, copy_snapshots, size_text
from gpusight.convert.parquet_tables import PARQUET_EXTRA, PARQUET_SUFFIX
from gpusight.output_files import OVERWRITE_RULE, existing_output_problem
from gpusight.recordings.formats import format_for_name, sniff_format
from gpusight.recordings.jsonl.stream import JsonLinesStream, names_stdout
from gpusight.textsafe import safe_text

if TYPE_CHECKING:
    from gpusight.recordings.progress import ReadProgress

TENSORBOARD = "tensorboard"
"""The one format ``--to`` knows."""

_EXCLUSIVE = ("demo", "replay", "record", "once", "json", "check", "duration", "export", "serve", "cluster", "json_schema")
"""Options that ask for another mode of gpusight, so cannot go with ``--convert``."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--convert``, ``--to`` and ``--force`` (which ``--report`` shares)."""
    parser.add_argument(
        "--convert", nargs="+", metavar=("IN", "OUT"),
        help="convert recording IN (any format) to OUT, whose name picks the format as for --record "
        "(JSON lines for .jsonl/.jsonl.gz, else compact); OUT '-' writes JSON lines to stdout. "
        f"An OUT ending in {PARQUET_SUFFIX} is a folder of three tidy Parquet tables for DuckDB, pandas or Polars: "
        "gpus.parquet (a row per GPU per snapshot), processes.parquet (a row per process per snapshot) and "
        f"advice.parquet (a row per advice raised or cleared); needs pyarrow ({PARQUET_EXTRA}). "
        "Damaged parts are skipped and reported; an existing OUT is replaced only with --force",
    )
    parser.add_argument(
        "--to", nargs=2, metavar=("FORMAT", "DIR"),
        help="with --convert IN: write TensorBoard event files into DIR instead (FORMAT: tensorboard); "
        "view them with `tensorboard --logdir DIR`. See docs/trackers.md",
    )
    parser.add_argument("--force", action="store_true",
                        help=f"with --convert or --report: replace an existing output. The rule: {OVERWRITE_RULE}")


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The usage rules of ``--convert``/``--to``/``--force`` and of ``--record -``; a broken one is a usage error."""
    if names_stdout(args.record):
        for flag, given in (("--once", args.once), ("--json", args.json), ("--duration", args.duration is not None),
                            ("--export", args.export is not None), ("--check", args.check),
                            ("--serve", args.serve is not None)):
            if given:
                parser.error(f"--record - streams JSON lines to stdout; it cannot be combined with {flag}")
    if args.convert is None:
        if args.to is not None:
            parser.error("--to needs --convert")
        if args.force and args.report is None:
            parser.error("--force needs --convert or --report")
        return
    for name in _EXCLUSIVE:
        if getattr(args, name, None) not in (None, False):
            parser.error(f"--convert cannot be combined with --{name.replace('_', '-')}")
    if args.to is not None:
        if args.to[0] != TENSORBOARD:
            parser.error(f"--to: unknown format {args.to[0]!r} (known: {TENSORBOARD})")
        if len(args.convert) != 1:
            parser.error("--convert IN --to tensorboard DIR takes no OUT")
    elif len(args.convert) != 2:
        parser.error("--convert needs IN and OUT (or --to tensorboard DIR)")
    if any(not value.strip() for value in [*args.convert, *(args.to or ())]):
        parser.error("--convert: file names must not be empty")


def writes_stdout(args: argparse.Namespace) -> bool:
    """True when the conversion the arguments ask for writes to stdout (``--convert IN -``)."""
    return args.to is None and names_stdout(args.convert[-1])


def run(args: argparse.Namespace, progress: ReadProgress | None = None) -> int:
    """Do the conversion the arguments ask for; returns the exit status (errors: one line on stderr, status 1).

    ``progress`` is told how far the read of ``IN`` has got, and that it ended before anything is printed.
    ``BrokenPipeError`` (stdout's reader went away) is left to the caller, which leaves quietly.
    """
    source = Path(args.convert[0])
    try:
        if args.to is not None:
            from gpusight.convert.tensorboard import convert_to_tensorboard

            tally, summary = convert_to_tensorboard(source, Path(args.to[1]), force=args.force, progress=progress)
        elif args.convert[1].lower().endswith(PARQUET_SUFFIX):
            from gpusight.convert.parquet import convert_to_parquet

            tally, summary = convert_to_parquet(source, Path(args.convert[1]), force=args.force, progress=progress)
        elif writes_stdout(args):
            tally, summary = _convert_to_stdout(source, progress)
        else:
            tally, summary = _convert_to_file(source, Path(args.convert[1]), force=args.force, progress=progress)
    except ConvertError as exc:
        print(f"gpusight: {safe_text(str(exc))}", file=sys.stderr)
        return 1
    _report(source, tally, summary)
    return 0


def _convert_to_stdout(source: Path, progress: ReadProgress | None) -> tuple[Tally, str]:
    """JSON lines on stdout (flushed at the end and when the buffer fills)."""
    stream = JsonLinesStream(sys.stdout, flush_each=False)
    tally = copy_snapshots(source, lambda _, snapshot: stream.write(snapshot), progress)
    stream.close()
    return tally, f"stdout (jsonl, {size_text(stream.bytes_written)})"


def _convert_to_file(source: Path, target: Path, *, force: bool, progress: ReadProgress | None) -> tuple[Tally, str]:
    """Write ``target`` under a temporary name beside it, then move it into place."""
    from gpusight.recordings.formats import RecordingError
    from gpusight.recordings.opening import open_recorder

    _check_target(source, target, force=force)
    partial = target.with_name(f".gpusight-{os.getpid()}-{target.name}")  # same ending: same format
    try:
        writer = open_recorder(partial)
    except RecordingError as exc:
        raise ConvertError(str(exc).replace(str(partial), str(target))) from exc
    try:
        try:
            tally = copy_snapshots(source, lambda _, snapshot: writer.write(snapshot), progress)
        finally:
            writer.close()
        os.replace(partial, target)
    except OSError as exc:
        raise ConvertError(f"cannot write {target}: {exc.strerror or exc}") from exc
    finally:
        partial.unlink(missing_ok=True)
    return tally, f"{target} ({format_for_name(target)}, {size_text(target.stat().st_size)})"


def _check_target(source: Path, target: Path, *, force: bool) -> None:
    """Refuse to write over the input, over anything but a regular file, or over an existing file without ``--force``."""
    if not target.exists():
        return
    if source.exists() and os.path.samefile(source, target):
        raise ConvertError(f"{target} is the recording being converted; choose another OUT")
    problem = existing_output_problem(target, force=force)
    if problem is not None:
        raise ConvertError(problem + (" (write to stdout with -)" if not target.is_file() else ""))


def _report(source: Path, tally: Tally, written: str) -> None:
    """The damaged parts (the first few, then a count) and a one-line summary, on stderr."""
    for problem in tally.first_problems:
        print(f"gpusight: {source}: {safe_text(str(problem))} (skipped)", file=sys.stderr)
    if tally.problems > len(tally.first_problems):
        print(f"gpusight: {source}: ... and {tally.problems - len(tally.first_problems)} more damaged parts", file=sys.stderr)
    read = f"{source} ({_format_of(source)}, {size_text(source.stat().st_size)})"
    problems = f"{tally.problems} damaged part{'s' * (tally.problems != 1)} skipped"
    print(f"gpusight: converted {tally.snapshots} snapshots from {read} to {written}; {problems}", file=sys.stderr)


def _format_of(path: Path) -> str:
    """The format of the recording at ``path``, told by its first bytes."""
    from gpusight.recordings.formats import COMPACT_MAGIC

    with open(path, "rb") as file:
        return str(sniff_format(file.read(len(COMPACT_MAGIC))))
