"""``gpusight --report FILE [-o OUT]``: the HTML report of a recording (see ``docs/report.md``)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gpusight.tempfiles import write_temp
from gpusight.textsafe import safe_text

if TYPE_CHECKING:
    from gpusight.recordings.progress import ReadProgress

_CONFLICTS = (("--demo", "demo"), ("--replay", "replay"), ("--record", "record"), ("--once", "once"),
              ("--json", "json"), ("--check", "check"), ("--duration", "duration"), ("--export", "export"),
              ("--serve", "serve"), ("--cluster", "cluster"), ("--convert", "convert"))

_RECORDING_SUFFIXES = (".jsonl.gz", ".jsonl", ".gz")


class ReportError(Exception):
    """The report cannot be made; the message is one line for the user."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--report`` and ``-o/--output`` to ``parser``."""
    group = parser.add_argument_group("Run report (docs/report.md)")
    group.add_argument(
        "--report", type=Path, metavar="FILE",
        help="write a self-contained HTML report of the recording FILE (plots, summary, advice timeline, processes) "
        "and print its path; opens offline",
    )
    group.add_argument(
        "-o", "--output", type=Path, metavar="OUT",
        help="with --report: where the HTML goes (default: beside FILE, its name with .html instead of the "
        "recording's extension)",
    )


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Usage errors of the report's flags (exit 2 through ``parser.error``)."""
    if args.report is None:
        if args.output is not None:
            parser.error("-o/--output needs --report")
        return
    for flag, dest in _CONFLICTS:
        if getattr(args, dest, None) not in (None, False):
            parser.error(f"--report cannot be combined with {flag}")


def default_output(recording: Path) -> Path:
    """``run.jsonl`` -> ``run.html`` beside it (the compact format and any other name: its last suffix replaced)."""
    name = recording.name
    for suffix in _RECORDING_SUFFIXES:
        if name.lower().endswith(suffix) and len(name) > len(suffix):
            return recording.with_name(name[: -len(suffix)] + ".html")
    return recording.with_suffix(".html") if recording.suffix.lower() != ".html" else recording.with_name(name + ".html")


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same directory, renamed over it when complete.

    Raises ``OSError``; nothing is left behind on failure.
    """
    temp = write_temp(path.parent if str(path.parent) else Path("."), path.name, text)
    try:
        os.chmod(temp, 0o644)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def make_report(recording: Path, output: Path, progress: ReadProgress | None = None) -> None:
    """Read ``recording`` (any format, streamed) and write its HTML report to ``output``; raises :class:`ReportError`.

    ``progress`` is told how far the read has got, and that it ended before this returns or raises.
    """
    from gpusight.recordings.opening import read_recording
    from gpusight.run_report.html import render_html
    from gpusight.run_report.summary import summarize

    if output.exists() and recording.exists() and os.path.samefile(output, recording):
        raise ReportError(f"{output}: the report would replace the recording; choose another name with -o")
    try:
        stream = read_recording(recording, progress)
    except OSError as exc:
        raise ReportError(f"cannot read recording {recording}: {exc.strerror or exc}") from exc
    try:
        summary = summarize(stream)
    finally:
        stream.close()
    if summary.snapshots == 0:
        damaged = len(summary.problems) + summary.problems_omitted
        first = safe_text(str(summary.problems[0]), 200) if summary.problems else ""
        detail = f" ({damaged} damaged part{'s' if damaged != 1 else ''}: {first})" if damaged else ""
        raise ReportError(f"{recording}: no readable snapshot in the recording{detail}")
    text = render_html(summary, recording.name)
    try:
        write_atomically(output, text)
    except OSError as exc:
        raise ReportError(f"cannot write report {output}: {exc.strerror or exc}") from exc


def run(args: argparse.Namespace, progress: ReadProgress | None = None) -> int:
    """``--report``: write the report, print its path; one line on stderr and exit status 1 on failure.

    ``progress`` is told how far the read of the recording has got (see :func:`make_report`).
    """
    recording: Path = args.report
    output: Path = args.output if args.output is not None else default_output(recording)
    try:
        make_report(recording, output, progress)
    except ReportError as exc:
        print(f"gpusight: {exc}", file=sys.stderr)
        return 1
    print(output)
    return 0
