"""``main``: parse the command line and run the mode it asks for."""

from __future__ import annotations

import argparse
import json
import sys

from gpusight.cli.output import CliError, reader_gone, write_stdout
from gpusight.cli.parser import asks_for_check, build_parser, check_usage, print_version
from gpusight.cli.pipeline import build_pipeline
from gpusight.cli.runners import record_headless, run_check, run_once, run_tui
from gpusight.convert import command as convert
from gpusight.prometheus_exporter import command as exporter
from gpusight.recordings.jsonl.stream import names_stdout
from gpusight.run_report import command as run_report


def main(argv: list[str] | None = None) -> int:
    """Run gpusight with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    if asks_for_check(argv):
        parser.usage_status = _cannot_check_status()
    args = parser.parse_args(argv)
    if args.version:  # before the usage rules, as argparse's own --version would
        return print_version(args.verbose)
    check_usage(parser, args)
    try:
        if args.convert is not None:
            return _run_convert(args)
        if args.report is not None:
            return _run_report(args)
        if args.cluster is not None:
            return _run_cluster(parser, args)
        if args.json_schema:
            from gpusight.snapshot.schema import json_schema

            return 0 if write_stdout(json.dumps(json_schema(), indent=2) + "\n") else reader_gone()
        return _run(args)
    except CliError as exc:
        print(f"gpusight: {exc}", file=sys.stderr)
        return _cannot_check_status() if args.check else 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return reader_gone()


def _cannot_check_status() -> int:
    """``--check``'s exit status when it cannot check (gpusight.check is imported only by the runs that check)."""
    from gpusight.check import EXIT_CANNOT_CHECK

    return EXIT_CANNOT_CHECK


def _run_convert(args: argparse.Namespace) -> int:
    """``--convert``, with a progress bar on stderr while IN is read (see gpusight.cli.progress).

    No bar when the JSON lines go to stdout on a terminal: they would run through it.
    """
    from gpusight.cli.progress import reading_description, stderr_progress

    lines_on_terminal = convert.writes_stdout(args) and sys.stdout.isatty()
    with stderr_progress(reading_description("converting", args.convert[0]), wanted=not lines_on_terminal) as progress:
        return convert.run(args, progress)


def _run_report(args: argparse.Namespace) -> int:
    """``--report``, with a progress bar on stderr while each recording is read (see gpusight.cli.progress)."""
    from gpusight.cli.progress import reading_description, stderr_progress

    return run_report.run(args, lambda path: stderr_progress(reading_description("reading", path)))


def _run_cluster(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """``--cluster URL``: the fleet view (see gpusight.cluster.command)."""
    from gpusight.cluster import command

    command.check_arguments(parser, args)
    if not (args.once or args.json) and sys.stdout.isatty():
        from gpusight.ui.cluster.app import run_tui as run_cluster_tui

        return run_cluster_tui(args)
    return command.run_once(args)


def _run(args: argparse.Namespace) -> int:
    """The modes that sample a source: check, serve, one-shot, headless recording or the live TUI."""
    pipeline = build_pipeline(args)
    sampler = pipeline.sampler
    try:
        plan = pipeline.plan_check(args) if args.check or pipeline.judges_window(args) else None
        pipeline.prepare(args)
        if plan is not None and args.check:
            return run_check(sampler, args, plan)
        if args.serve is not None:
            return exporter.serve(sampler, args)
        if args.once or args.json or args.duration is not None or args.export is not None:
            return run_once(sampler, args, plan)
        if not sys.stdout.isatty() or names_stdout(args.record):
            if args.record is not None:
                return record_headless(sampler, args)
            return run_once(sampler, args)
        return run_tui(pipeline, args)
    finally:
        sampler.stop()
