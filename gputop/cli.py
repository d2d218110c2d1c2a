"""Command line: ``gputop`` / ``gps``. Live TUI by default; one-shot table or JSON for scripts."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from gputop import __version__, replay_command
from gputop.cluster.command import add_arguments as add_cluster_arguments
from gputop.collect.chart_settings import ChartSettings
from gputop.collect.filters import Filters
from gputop.collect.history import History
from gputop.collect.model import ErrorNote, Snapshot
from gputop.collect.sampler import DEFAULT_INTERVAL, MIN_INTERVAL, Sampler
from gputop.collect.serialize import snapshot_to_json
from gputop.collect.source import SnapshotSource
from gputop.collect.timegrid import TimeGrid
from gputop.convert import command as convert
from gputop.convert.stream import JsonLinesStream, names_stdout
from gputop.exporter import command as exporter
from gputop.run_report import command as run_report

if TYPE_CHECKING:
    from gputop.check import CheckPlan
    from gputop.collect.replay import ReplaySource
    from gputop.ui.app import GputopApp

ONCE_SETTLE_SECONDS = 0.3
"""Gap between the priming poll and the reported one in ``--once``, so CPU % and PCIe rates are real."""

FIRST_POLL_WAIT_SECONDS = 1.0
"""How long the live UI waits for the first poll before it draws the screen without data."""

DEFAULT_EXPORT_DIR = Path("gputop-snapshots")
"""Where the ``s`` key writes snapshot exports unless ``--export-dir`` says otherwise."""


STATS_FILE_ENV = "GPUTOP_STATS_FILE"
"""Environment variable naming a file where the live UI writes JSON statistics on exit (for benchmarks).

Keys: ``interval_s``, ``polls`` (polls taken), ``max_gap_s`` (longest time between the starts of two
polls), ``last_poll_s`` (duration of the last poll), ``snapshots_shown``, ``first_frame_s`` (seconds
from process start to the first screen showing sampled data, or null), ``chart_column_s`` (the chart
grid's column period) and ``chart_paged`` (whether the app pages its charts rather than scrolling).
"""


MAX_DURATION_SECONDS = 30 * 86400.0
"""Longest ``--duration`` accepted: 30 days, longer than any single training run we record in one go."""

MAX_INTERVAL_SECONDS = 3600.0
"""Longest ``--interval`` accepted: one poll an hour."""

BROKEN_PIPE_EXIT_STATUS = 141
"""Exit status when the reader of stdout went away (128 + SIGPIPE, what a shell reports for C tools)."""


class CliError(Exception):
    """A problem with the command line or its inputs, reported in one line with exit status 1."""


def seconds_arg(value: str) -> float:
    """Argparse type for a number of seconds: finite and not negative (range checks follow in ``main``)."""
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {value!r}") from None
    if not math.isfinite(seconds):
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds, not {value!r}")
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {value!r}")
    return seconds


def path_arg(value: str) -> Path:
    """Argparse type for a file or directory path: an empty string is refused, never read as ``.``."""
    if not value.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return Path(value)


def gpu_ids_arg(value: str) -> tuple[str, ...]:
    """Argparse type for ``--gpus``: comma-separated GPU ids (checked against the GPUs once NVML runs)."""
    ids = tuple(part.strip() for part in value.split(","))
    if not any(ids):
        raise argparse.ArgumentTypeError("must name at least one GPU, e.g. 0,3 or GPU-5f3a")
    return ids


class GputopParser(argparse.ArgumentParser):
    """An argument parser whose usage errors exit with ``usage_status`` (2 as usual, 3 for ``--check``)."""

    usage_status = 2
    """Exit status of a usage error."""

    def error(self, message: str) -> NoReturn:
        """Print the usage and ``message`` to stderr and exit with ``usage_status``."""
        self.print_usage(sys.stderr)
        self.exit(self.usage_status, f"{self.prog}: error: {message}\n")


def _asks_for_check(argv: list[str]) -> bool:
    """True when ``argv`` has ``--check`` (or a prefix argparse would take for it), before any ``--``."""
    for word in argv:
        if word == "--":
            return False
        if len(word) > 4 and "--check".startswith(word):
            return True
    return False


class VersionAction(argparse.Action):
    """``--version``: the version, then whether Textual sends only the changed cells (see gputop.ui.partial_output).

    The second line is worked out only when asked for, so other commands never import Textual for it.
    """

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        from gputop.ui.partial_output import status

        parser.exit(0 if _write_stdout(f"gputop {__version__}\npartial output: {status()}\n") else _reader_gone())


def build_parser() -> GputopParser:
    """The argument parser; ``--help`` documents every flag."""
    from gputop.collect.demo import DEFAULT_SCENARIO, SCENARIOS

    scenarios = "; ".join(f"{name}: {text}" for name, text in SCENARIOS.items()).replace("%", "%%")
    parser = GputopParser(
        prog="gputop",
        description="Live GPU monitor for deep-learning training that tells you why your GPU is under-used. "
        "Runs a terminal UI when stdout is a terminal, otherwise prints one snapshot and exits.",
        epilog="`gps` is the same program. Data sources: NVML (default), --demo, --replay. "
        f"Setting {STATS_FILE_ENV}=FILE makes the live UI write its sampling statistics to FILE as JSON on exit.",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--demo",
        nargs="?",
        const=DEFAULT_SCENARIO,
        choices=sorted(SCENARIOS),
        metavar="SCENARIO",
        help=f"show simulated data instead of real GPUs (default scenario: {DEFAULT_SCENARIO}). Scenarios: {scenarios}",
    )
    source.add_argument("--replay", type=path_arg, metavar="FILE", help="play back a recording made with --record")
    parser.add_argument("--loop", action="store_true", help="with --replay: start again at the end")
    replay_command.add_arguments(parser)
    parser.add_argument(
        "--record", type=path_arg, metavar="FILE",
        help="append every snapshot to FILE in the compact format (docs/recording.md), or as JSON lines when FILE "
        "ends in .jsonl (.jsonl.gz: gzip-compressed); "
        "without a terminal and without --once/--duration, records until interrupted (SIGINT, SIGTERM or SIGHUP "
        "closes the file cleanly). FILE '-' streams JSON lines to stdout, flushed per snapshot, with no screen",
    )
    parser.add_argument("--once", action="store_true", help="print one snapshot as a table and exit (implied when stdout is not a terminal)")
    parser.add_argument(
        "--check", action="store_true",
        help="sample for --duration seconds (a recording: to its end, or --duration seconds of it) with the advice "
        "rules, print the advice that stands and exit 0 (nothing at warn or above), 1 (warn), 2 (critical, or a "
        "GPU lost) or 3 (could not check, usage error); with --json the final snapshot as JSON. See docs/check.md",
    )
    parser.add_argument("--json", action="store_true", help="print the snapshot as JSON instead of a table (implies --once)")
    parser.add_argument(
        "--duration", type=seconds_arg, metavar="SECONDS",
        help="with --once/--json: sample this long before printing, so rates and windowed advice are real",
    )
    parser.add_argument(
        "--interval", type=seconds_arg, metavar="SECONDS",
        help=f"polling period in seconds (default {DEFAULT_INTERVAL}; at least {MIN_INTERVAL}; "
        "--replay defaults to the recording's own pace)",
    )
    parser.add_argument(
        "--export", type=path_arg, metavar="DIR",
        help="with --once: also write the snapshot export (JSON with history, Markdown report, HTML run report, SVG screen) "
        "into DIR",
    )
    parser.add_argument(
        "--export-dir", type=path_arg, default=DEFAULT_EXPORT_DIR, metavar="DIR",
        help=f"where the 's' key writes snapshot exports (default ./{DEFAULT_EXPORT_DIR}/)",
    )
    parser.add_argument("--readonly", action="store_true", help="disable actions that change anything (sending signals)")
    parser.add_argument("--ascii", action="store_true", help="draw charts and borders with ASCII only")
    parser.add_argument("--no-advice", action="store_true", help="do not evaluate the advice rules")
    parser.add_argument(
        "--config", type=path_arg, metavar="FILE",
        help="config file with [advice] thresholds, [filters] and [charts] (default $XDG_CONFIG_HOME/gputop/config.toml)",
    )
    gpus = parser.add_mutually_exclusive_group()
    gpus.add_argument(
        "--gpus", type=gpu_ids_arg, metavar="IDS",
        help="watch only these GPUs, in this order: NVML indexes or UUIDs (or unique prefixes such as GPU-5f3a), "
        "comma-separated, e.g. 0,3; the others are not polled",
    )
    gpus.add_argument(
        "--cuda-visible", action="store_true",
        help="watch the GPUs CUDA_VISIBLE_DEVICES shows to CUDA programs, in its order, with CUDA's numbers "
        "beside NVML's (integer entries are NVML indexes: CUDA's numbers with CUDA_DEVICE_ORDER=PCI_BUS_ID)",
    )
    parser.add_argument(
        "--user", metavar="NAME",
        help="show only NAME's GPU processes (with their DataLoader workers) and the advice about them; "
        "every GPU stays visible",
    )
    parser.add_argument("--no-filters", action="store_true", help="ignore the [filters] section of the config file")
    parser.add_argument(
        "--json-schema", action="store_true",
        help="print the JSON Schema of --json output and recording lines, and exit",
    )
    add_cluster_arguments(parser)
    parser.add_argument(
        "--version", action=VersionAction,
        help="print the version and whether partial output (only changed cells are sent; "
        "GPUTOP_PARTIAL_OUTPUT=0 turns it off) is active, and exit",
    )
    exporter.add_arguments(parser)
    convert.add_arguments(parser)
    run_report.add_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run gputop with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    from gputop.check import EXIT_CANNOT_CHECK

    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    if _asks_for_check(argv):
        parser.usage_status = EXIT_CANNOT_CHECK
    args = parser.parse_args(argv)
    if args.interval is not None and not MIN_INTERVAL <= args.interval <= MAX_INTERVAL_SECONDS:
        parser.error(f"--interval must be at least {MIN_INTERVAL} and at most {MAX_INTERVAL_SECONDS:g} seconds")
    if args.duration is not None and args.duration > MAX_DURATION_SECONDS:
        parser.error(f"--duration must be at most {MAX_DURATION_SECONDS:.0f} seconds (30 days)")
    if args.loop and args.replay is None:
        parser.error("--loop needs --replay")
    replay_command.check_arguments(parser, args)
    if args.check:
        _check_check_args(parser, args)
    exporter.check_arguments(parser, args)
    convert.check_arguments(parser, args)
    run_report.check_arguments(parser, args)
    try:
        if args.convert is not None:
            return convert.run(args)
        if args.report is not None:
            return run_report.run(args)
        if args.cluster is not None:
            return _run_cluster(parser, args)
        if args.json_schema:
            from gputop.collect.schema import json_schema

            return 0 if _write_stdout(json.dumps(json_schema(), indent=2) + "\n") else _reader_gone()
        return _run(args)
    except CliError as exc:
        print(f"gputop: {exc}", file=sys.stderr)
        return EXIT_CANNOT_CHECK if args.check else 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _reader_gone()


def _run_cluster(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """``--cluster URL``: the fleet view (see gputop.cluster.command)."""
    from gputop.cluster import command

    command.check_arguments(parser, args)
    if not (args.once or args.json) and sys.stdout.isatty():
        from gputop.ui.cluster_app import run_tui

        return run_tui(args)
    return command.run_once(args)


def _check_check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The usage rules of ``--check``; a broken one is a usage error (exit 3 in check mode)."""
    if args.replay is None and args.duration is None:
        parser.error("--check needs --duration SECONDS: how long to sample")
    if args.loop and args.duration is None:
        parser.error("--check --loop needs --duration: a looping recording never ends")
    for flag, given in (("--once", args.once), ("--export", args.export is not None), ("--no-advice", args.no_advice)):
        if given:
            parser.error(f"--check cannot be combined with {flag}")


def _plan_check(sampler: Sampler, args: argparse.Namespace) -> CheckPlan:
    """Fit the advice engine's windows and holds to the data the check will have (see gputop.check)."""
    from gputop.advice.engine import AdviceEngine
    from gputop.check import plan_check

    if not isinstance(sampler.advisor, AdviceEngine):
        raise CliError("--check needs the advice rules")
    if args.demo is not None:  # the demo's prefilled history counts too
        from gputop.collect.demo import prefill_seconds

        what, available = f"demo data ({args.demo})", args.duration + prefill_seconds(args.demo)
    elif args.replay is not None:
        what, available = f"recording {args.replay.name}", args.duration
    else:
        what, available = "live data", args.duration
    return plan_check(sampler.advisor, sampler.interval, what, args.duration, available)


def _replay_of(source: SnapshotSource) -> ReplaySource | None:
    """The replay source under ``source`` (through a GPU selection), or None for live and demo data."""
    from gputop.collect.gpu_selection import GpuSelectingSource
    from gputop.collect.replay import ReplaySource

    while isinstance(source, GpuSelectingSource):
        source = source.source
    return source if isinstance(source, ReplaySource) else None


def _run_check(sampler: Sampler, args: argparse.Namespace, plan: CheckPlan) -> int:
    """``--check``: sample, then print the report (or the final snapshot as JSON) and return the check's status."""
    from gputop.check import exit_status, headline, render_report, run_check
    from gputop.textsafe import safe_text

    replay = _replay_of(sampler.source)
    finished = None if replay is None else (lambda: replay.finished)
    result = run_check(sampler, args.duration, live=args.demo is None and replay is None, finished=finished)
    status = exit_status(result)
    if result.cannot_check is not None:
        print(f"gputop: cannot check: {safe_text(result.cannot_check)}", file=sys.stderr)
    if args.json:
        if result.cannot_check is None:
            print(headline(plan, result, sampler.interval), file=sys.stderr)
        text = snapshot_to_json(result.snapshot, indent=2) + "\n"
    else:
        text = "" if result.cannot_check is not None else render_report(plan, result, sampler.interval)
    return status if _write_stdout(text) else _reader_gone()


def _reader_gone() -> int:
    """Stdout's reader (``head``, ``jq``, ...) closed the pipe: leave quietly, like a C tool killed by SIGPIPE.

    Stdout is pointed at /dev/null first, so the interpreter's final flush of the buffered rest
    cannot raise a second time and print a traceback.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    finally:
        os.close(devnull)
    return BROKEN_PIPE_EXIT_STATUS


def _run(args: argparse.Namespace) -> int:
    clock = DemoClock() if args.demo is not None else None
    sampler, charts = _make_sampler(args, clock)
    tty = sys.stdout.isatty()
    try:
        plan = _plan_check(sampler, args) if args.check else None
        if clock is not None:
            _prefill_demo(sampler, clock, args.demo)
        if sampler.filters.gpus is not None:
            _check_gpu_selection(sampler)
            _seek_again(sampler, args.at)
        if plan is not None:
            return _run_check(sampler, args, plan)
        if args.serve is not None:
            return exporter.serve(sampler, args)
        if args.once or args.json or args.duration is not None or args.export is not None:
            return _run_once(sampler, args)
        if not tty or names_stdout(args.record):
            if args.record is not None:
                return _record_headless(sampler, args)
            return _run_once(sampler, args)
        if sampler.history.latest is None:
            # Polling starts before Textual loads, so the first frame already shows data: started from
            # the app, the first poll would compete with the first layout for the GIL and arrive frames
            # later. A driver whose calls hang must not keep the screen (and its q and Ctrl-C) away.
            sampler.start()
            sampler.wait_for_first(FIRST_POLL_WAIT_SECONDS)
        from gputop.ui.app import GputopApp

        app = GputopApp(
            sampler, readonly=args.readonly, ascii_mode=args.ascii, export_dir=args.export_dir,
            paged_charts=charts.motion == "page", replay=_replay_of(sampler.source),
        )
        app.run()
        stats_path = os.environ.get(STATS_FILE_ENV)
        if stats_path:
            _write_stats(Path(stats_path), sampler, app)
        return app.return_code or 0
    finally:
        sampler.stop()


def _process_start_time() -> float:
    """Wall-clock time this process started, to about 10 ms.

    From ``/proc/self/stat`` against ``/proc/uptime`` where they exist: psutil's ``create_time`` adds
    the start ticks to the boot time, which the kernel gives in whole seconds, so it can be a second off.
    """
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return time.time() - (uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        import psutil

        return psutil.Process().create_time()


def _write_stats(path: Path, sampler: Sampler, app: GputopApp) -> None:
    """Write the sampler's cadence, the chart settings and the first-frame time to ``path`` (see STATS_FILE_ENV).

    Errors go to stderr.
    """
    started = _process_start_time()
    stats = {
        "interval_s": sampler.interval,
        "polls": sampler.poll_count,
        "max_gap_s": sampler.max_gap,
        "last_poll_s": sampler.last_poll_seconds,
        "snapshots_shown": app.snapshots_applied,
        "first_frame_s": None if app.first_frame_at is None else app.first_frame_at - started,
        "chart_column_s": sampler.grid.column_seconds,
        "chart_paged": app.chart_choice.paged,
    }
    try:
        path.write_text(json.dumps(stats, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        print(f"gputop: cannot write statistics to {path}: {exc}", file=sys.stderr)


def _make_sampler(args: argparse.Namespace, demo_clock: DemoClock | None) -> tuple[Sampler, ChartSettings]:
    """The sampler the command line and the config file ask for, and the config's chart settings."""
    from gputop.collect.chart_settings import chart_settings_from_config
    from gputop.config_file import config_path, read_config

    document, warnings = read_config(args.config)
    config = args.config or config_path()
    filters, problems = _choose_filters(args, document, config)
    charts, chart_problems = chart_settings_from_config(document, str(config))
    problems += chart_problems
    interval = args.interval
    source: SnapshotSource
    if demo_clock is not None:
        from gputop.collect.demo import DemoSource

        source = DemoSource(args.demo, clock=demo_clock)
    elif args.replay is not None:
        from gputop.collect.replay import ReplayError, ReplaySource

        try:
            replay = ReplaySource(args.replay, loop=args.loop)
            replay_command.start_at(replay, args.at)
        except ReplayError as exc:
            raise CliError(str(exc)) from exc
        if interval is None and replay.recorded_interval:
            interval = max(MIN_INTERVAL, replay.recorded_interval)
        source = replay
    else:
        from gputop.collect.live import LiveSource
        from gputop.collect.nvml import NvmlSource

        source = LiveSource(NvmlSource(gpus=filters.gpus))
    if filters.gpus is not None and (demo_clock is not None or args.replay is not None):
        from gputop.collect.gpu_selection import GpuSelectingSource

        source = GpuSelectingSource(source, filters.gpus)
    sampler = Sampler(
        source, interval or DEFAULT_INTERVAL, History(), advisor=None, recorder=None, filters=filters,
        grid=TimeGrid(charts.column_seconds),
    )
    if not args.no_advice:
        problems += _attach_advice(sampler, document, config)
    for warning in warnings + problems:
        sampler.add_standing_error(ErrorNote("config", warning))
    if names_stdout(args.record):
        sampler.recorder = JsonLinesStream(sys.stdout, flush_each=True)
    elif args.record is not None:
        from gputop.collect.recording import RecordingError, open_recorder

        try:
            sampler.recorder = open_recorder(args.record)
        except RecordingError as exc:
            sampler.stop()
            raise CliError(str(exc)) from exc
    return sampler, charts


def _choose_filters(args: argparse.Namespace, document: dict[str, object], config: Path) -> tuple[Filters, list[str]]:
    """The config file's ``[filters]`` (unless ``--no-filters``) overridden by ``--gpus``/``--cuda-visible``/``--user``."""
    from gputop.collect.filters import UnknownUserError, filters_from_config, user_filter
    from gputop.collect.gpu_selection import CudaVisible, GpuIds

    live = args.demo is None and args.replay is None  # demo and replay data name users of other hosts
    filters, warnings = Filters(), list[str]()
    if not args.no_filters and "filters" in document:
        filters, warnings = filters_from_config(document["filters"], str(config), os.environ, users_must_exist=live)
    if args.gpus is not None:
        filters = dataclasses.replace(filters, gpus=GpuIds(args.gpus))
    elif args.cuda_visible:
        filters = dataclasses.replace(filters, gpus=CudaVisible.from_environment(os.environ))
    if args.user is not None:
        try:
            filters = dataclasses.replace(filters, user=user_filter(args.user, must_exist=live))
        except UnknownUserError as exc:
            raise CliError(f"--user: {exc}") from exc
    return filters, warnings


def _check_gpu_selection(sampler: Sampler) -> None:
    """Poll once if nothing was polled yet, and stop with the source's reason when the GPUs asked for do not exist."""
    from gputop.collect.gpu_selection import GpuSelecting

    if sampler.history.latest is None:
        sampler.poll_once()
    if isinstance(sampler.source, GpuSelecting) and sampler.source.selection_error is not None:
        raise CliError(sampler.source.selection_error)


def _seek_again(sampler: Sampler, when: str | None) -> None:
    """Seek a replay to ``--at`` once more: the GPU check's poll played the snapshot the first seek chose."""
    from gputop.collect.replay import ReplayError

    replay = _replay_of(sampler.source)
    if replay is None or when is None:
        return
    try:
        replay_command.start_at(replay, when)
    except ReplayError as exc:
        raise CliError(str(exc)) from exc


def _attach_advice(sampler: Sampler, document: dict[str, object], config: Path) -> list[str]:
    """Give the sampler the advice engine with the config's thresholds; returns the warnings about them."""
    from gputop.advice.config import thresholds_from_config
    from gputop.advice.engine import AdviceEngine

    thresholds, warnings = thresholds_from_config(document, config)
    sampler.advisor = AdviceEngine(thresholds)
    return warnings


class DemoClock:
    """Wall clock shifted into the past while a demo's history is prefilled."""

    def __init__(self) -> None:
        self.offset = 0.0
        """Seconds subtracted from the wall clock."""

    def __call__(self) -> float:
        return time.time() - self.offset


def _prefill_demo(sampler: Sampler, clock: DemoClock, scenario: str) -> None:
    """Run the demo through its scenario's prefill of simulated time (on ``clock``) so charts and advice start full."""
    from gputop.collect.demo import prefill_seconds

    steps = int(prefill_seconds(scenario) / sampler.interval)
    recorder, sampler.recorder = sampler.recorder, None
    for step in range(steps, 0, -1):
        clock.offset = step * sampler.interval
        sampler.poll_once()
    clock.offset = 0.0
    sampler.recorder = recorder
    sampler.max_gap = 0.0


def _collect(sampler: Sampler, duration: float | None, settle: bool = True) -> Snapshot:
    """Poll for ``duration`` seconds at the sampler's interval (or a short priming pair, or once without ``settle``)
    and return the last snapshot."""
    snapshot = sampler.poll_once()
    if duration is None and not settle:
        return snapshot
    if duration is None:
        time.sleep(ONCE_SETTLE_SECONDS)
        return sampler.poll_once()
    end = time.monotonic() + duration
    while True:
        remaining = end - time.monotonic()
        if remaining <= 0:
            return snapshot
        time.sleep(min(sampler.interval, remaining))
        snapshot = sampler.poll_once()


def _run_once(sampler: Sampler, args: argparse.Namespace) -> int:
    snapshot = _collect(sampler, args.duration, settle=args.at is None)  # a replay at a time shows that time
    if args.json:
        text = snapshot_to_json(snapshot, indent=2) + "\n"
    else:
        from gputop.oneshot import render_once

        width = shutil.get_terminal_size((160, 24)).columns if sys.stdout.isatty() else None
        text = render_once(snapshot, width, filters=sampler.filters.describe())
    delivered = _write_stdout(text)
    if args.export is not None:
        _export_once(args.export, snapshot, sampler)
    if args.record is not None and sampler.recorder is None:
        return _recording_failed(snapshot)
    return 0 if delivered else _reader_gone()


def _write_stdout(text: str) -> bool:
    """Write and flush ``text``; False when the reader closed the pipe (the export and recording still happen)."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        return False
    return True


def _export_once(directory: Path, snapshot: Snapshot, sampler: Sampler) -> None:
    """Write the export set (SVG of the screen, JSON with history, Markdown and HTML reports) for the newest snapshot."""
    from gputop.export import ExportError, export_snapshot
    from gputop.ui.render import render_screen_svg

    svg = render_screen_svg(sampler)
    try:
        result = export_snapshot(directory, snapshot, sampler.history, svg=svg)
    except ExportError as exc:
        raise CliError(str(exc)) from exc
    print("exported: " + ", ".join(str(p) for p in result.paths), file=sys.stderr)


def _recording_failed(snapshot: Snapshot) -> int:
    """Say why the recording stopped (disk full, file removed, ...) and return the failure status."""
    reason = next((e.message for e in snapshot.errors if e.scope == "record"), "recording stopped")
    print(f"gputop: {reason}", file=sys.stderr)
    return 1


def _record_headless(sampler: Sampler, args: argparse.Namespace) -> int:
    """Record until SIGINT/SIGTERM/SIGHUP without a screen; a signal ignored on entry (SIGHUP under nohup) stays ignored."""
    stop = {"now": False}

    def request_stop(signum: int, frame: object) -> None:
        stop["now"] = True

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, request_stop)
    recorder, target = sampler.recorder, "stdout" if names_stdout(args.record) else args.record
    print(f"gputop: recording to {target} every {sampler.interval:g} s; stop with Ctrl-C or SIGTERM", file=sys.stderr)
    count = 0
    next_poll = time.monotonic()
    while not stop["now"]:
        snapshot = sampler.poll_once()
        if sampler.recorder is None:
            if isinstance(recorder, JsonLinesStream) and recorder.reader_gone:
                return _reader_gone()
            return _recording_failed(snapshot)
        count += 1
        next_poll = max(next_poll + sampler.interval, time.monotonic())
        while not stop["now"] and time.monotonic() < next_poll:
            time.sleep(min(0.1, max(0.0, next_poll - time.monotonic())))
    print(f"gputop: recorded {count} snapshots to {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
