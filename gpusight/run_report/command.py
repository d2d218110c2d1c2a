"""``gpusight --report FILE [-o OUT]``: the HTML report of a recording; ``--report A B``: two runs compared, in HTML
and Markdown (see ``docs/report.md``)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

from gpusight.output_files import existing_output_problem
from gpusight.tempfiles import write_temp
from gpusight.textsafe import safe_text

if TYPE_CHECKING:
    from gpusight.recordings.progress import ReadProgress
    from gpusight.run_report.summary import RunSummary

Reading = Callable[[Path], AbstractContextManager["ReadProgress | None"]]
"""Gives the progress of reading one recording (a bar on stderr, or nothing) for the time of a ``with`` block."""

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
        "--report", type=Path, nargs="+", metavar="FILE",
        help="write a self-contained HTML report of the recording FILE (plots, summary, training speed, advice "
        "timeline, processes) and print its path; opens offline. --report A B (one recording or two, no more): "
        "compare two runs side by side (their main training jobs' speed, MFU, step-time breakdown, GPU-hours and "
        "busy figures, as A, B and B/A) in HTML and Markdown, and print both paths",
    )
    group.add_argument(
        "-o", "--output", type=Path, metavar="OUT",
        help="with --report: where the HTML goes (default: beside FILE, its name with .html instead of the "
        "recording's extension; for A B: A-vs-B.html beside A); a comparison's Markdown goes beside it as .md. "
        "An existing OUT (or Markdown) is replaced only with --force",
    )


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Usage errors of the report's flags (exit 2 through ``parser.error``)."""
    if args.report is None:
        if args.output is not None:
            parser.error("-o/--output needs --report")
        return
    if len(args.report) > 2:
        parser.error("--report takes one recording, or two to compare (A B)")
    for flag, dest in _CONFLICTS:
        if getattr(args, dest, None) not in (None, False):
            parser.error(f"--report cannot be combined with {flag}")


def _stem(recording: Path) -> str:
    """``run.jsonl.gz`` -> ``run``: the name without the recording's ending (the last suffix of any other name)."""
    name = recording.name
    for suffix in _RECORDING_SUFFIXES:
        if name.lower().endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return recording.stem if recording.suffix.lower() != ".html" else name


def default_output(recording: Path) -> Path:
    """``run.jsonl`` -> ``run.html`` beside it (the compact format and any other name: its last suffix replaced)."""
    return recording.with_name(_stem(recording) + ".html")


def default_comparison_output(a: Path, b: Path) -> Path:
    """``a.jsonl`` and ``b.gtr`` -> ``a-vs-b.html`` beside ``a``."""
    return a.with_name(f"{_stem(a)}-vs-{_stem(b)}.html")


def markdown_beside(output: Path) -> Path:
    """The comparison's Markdown beside its HTML: ``cmp.html`` -> ``cmp.md``."""
    return output.with_suffix(".md") if output.suffix.lower() != ".md" else output.with_name(output.name + ".md")


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


def _refuse_overwrite(output: Path, recording: Path, *, force: bool) -> None:
    """Refuse to write over ``recording`` (even with ``force``), or over an existing file without ``force``."""
    if output.exists() and recording.exists() and os.path.samefile(output, recording):
        raise ReportError(f"{output}: the report would replace the recording; choose another name with -o")
    problem = existing_output_problem(output, force=force)
    if problem is not None:
        raise ReportError(problem)


def read_summary(recording: Path, progress: ReadProgress | None = None) -> RunSummary:
    """The summary of ``recording`` (any format, streamed); raises :class:`ReportError` when it cannot be read or holds
    no readable snapshot. ``progress`` is told how far the read has got, and that it ended before this returns."""
    from gpusight.recordings.opening import read_recording
    from gpusight.run_report.summary import summarize

    try:
        stream = read_recording(recording, progress, gpu_processes_only=True)  # the report reads no workers
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
    return summary


def _write(output: Path, text: str) -> None:
    try:
        write_atomically(output, text)
    except OSError as exc:
        raise ReportError(f"cannot write report {output}: {exc.strerror or exc}") from exc


def make_report(recording: Path, output: Path, progress: ReadProgress | None = None, *, force: bool = False) -> None:
    """Read ``recording`` (any format, streamed) and write its HTML report to ``output``, an existing one only with
    ``force``; raises :class:`ReportError`.

    ``progress`` is told how far the read has got, and that it ended before this returns or raises.
    """
    from gpusight.run_report.html import render_html

    _refuse_overwrite(output, recording, force=force)
    _write(output, render_html(read_summary(recording, progress), recording.name))


def make_comparison(recordings: tuple[Path, Path], output: Path,
                    reading: Reading | None = None, *, force: bool = False) -> tuple[Path, list[str]]:
    """Compare two recordings: the HTML to ``output``, the Markdown beside it; returns the Markdown's path and the
    notes for the user (a run without speed). Raises :class:`ReportError`."""
    from gpusight.run_report.compare import compare
    from gpusight.run_report.compare_pages import compare_html, compare_markdown

    markdown = markdown_beside(output)
    for recording in recordings:
        _refuse_overwrite(output, recording, force=force)
        _refuse_overwrite(markdown, recording, force=force)
    summaries = []
    for recording in recordings:
        with (reading or (lambda _: nullcontext()))(recording) as progress:
            summaries.append(read_summary(recording, progress))
    names = (safe_text(recordings[0].name, 200), safe_text(recordings[1].name, 200))
    comparison = compare(summaries[0], summaries[1], names)
    _write(output, compare_html(comparison))
    _write(markdown, compare_markdown(comparison))
    notes = [f"{name}: {why}" for name, (job, why) in zip(names, zip(comparison.jobs, comparison.matching,
                                                                        strict=True), strict=True)
             if job is None or job.speed is None]
    return markdown, notes


def run(args: argparse.Namespace, reading: Reading | None = None) -> int:
    """``--report``: write the report (or the comparison of two), print its path (the HTML's, then the Markdown's);
    one line on stderr and exit status 1 on failure.

    ``reading`` gives the progress of reading each recording.
    """
    recordings: list[Path] = args.report
    try:
        if len(recordings) == 2:
            a, b = recordings
            output: Path = args.output if args.output is not None else default_comparison_output(a, b)
            markdown, notes = make_comparison((a, b), output, reading, force=args.force)
            for note in notes:
                print(f"gpusight: note: {note}", file=sys.stderr)
            print(f"{output}\n{markdown}")
            return 0
        (recording,) = recordings
        output = args.output if args.output is not None else default_output(recording)
        with (reading or (lambda _: nullcontext()))(recording) as progress:
            make_report(recording, output, progress, force=args.force)
    except ReportError as exc:
        print(f"gpusight: {exc}", file=sys.stderr)
        return 1
    print(output)
    return 0
