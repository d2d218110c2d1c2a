"""The command line's flags: every option with its help, and the usage rules checked after parsing."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import NoReturn

from gpusight import __version__
from gpusight.cli.completion import PrintCompletionAction
from gpusight.cli.output import reader_gone, write_stdout
from gpusight.cluster.command import add_arguments as add_cluster_arguments
from gpusight.convert import command as convert
from gpusight.output_files import OVERWRITE_RULE
from gpusight.prometheus_exporter import command as exporter
from gpusight.recordings import start_at
from gpusight.run_report import command as run_report
from gpusight.sampling.sampler import DEFAULT_INTERVAL, MIN_INTERVAL
from gpusight.ui.terminal.draw_pacing import DEFAULT_REFRESH

COMMAND_ALIAS = "gps"
"""The program's short name: pyproject.toml's [project.scripts] installs it as ``gpusight`` and as this."""

DEFAULT_EXPORT_DIR = Path("gpusight-snapshots")
"""Where the ``s`` key writes snapshot exports unless ``--export-dir`` says otherwise."""


STATS_FILE_ENV = "GPUSIGHT_STATS_FILE"
"""Environment variable naming a file where the live UI writes JSON statistics on exit (for benchmarks).

Keys: ``interval_s``, ``polls`` (polls taken), ``max_gap_s`` (longest time between the starts of two
polls), ``last_poll_s`` (duration of the last poll), ``snapshots_shown`` (frames drawn: about one per
``--refresh`` period), ``first_frame_s`` (seconds
from process start to the first screen showing sampled data, or null), ``chart_column_s`` (the chart
grid's column period) and ``chart_paged`` (whether the app pages its charts rather than scrolling).
"""


MAX_DURATION_SECONDS = 30 * 86400.0
"""Longest ``--duration`` accepted: 30 days, longer than any single training run we record in one go."""

MAX_INTERVAL_SECONDS = 3600.0
"""Longest ``--interval`` accepted: one poll an hour."""

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


def backend_arg(value: str) -> tuple[str, ...]:
    """Argparse type for ``--backend``: ``auto``, or backend names joined with commas."""
    from gpusight.backends.registry import BackendChoiceError, parse_backend_choice

    try:
        return parse_backend_choice(value)
    except BackendChoiceError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--backend: ")) from exc


def gpu_ids_arg(value: str) -> tuple[str, ...]:
    """Argparse type for ``--gpus``: comma-separated GPU ids (checked against the GPUs once NVML runs)."""
    ids = tuple(part.strip() for part in value.split(","))
    if not any(ids):
        raise argparse.ArgumentTypeError("must name at least one GPU, e.g. 0,3, GPU-5f3a or MIG-1c2d")
    return ids


class GpusightParser(argparse.ArgumentParser):
    """An argument parser whose usage errors exit with ``usage_status`` (2 as usual, 3 for ``--check``)."""

    usage_status = 2
    """Exit status of a usage error."""

    def error(self, message: str) -> NoReturn:
        """Print the usage and ``message`` to stderr and exit with ``usage_status``."""
        self.print_usage(sys.stderr)
        self.exit(self.usage_status, f"{self.prog}: error: {message}\n")


def asks_for_check(argv: list[str]) -> bool:
    """True when ``argv`` has ``--check`` (or a prefix argparse would take for it), before any ``--``."""
    for word in argv:
        if word == "--":
            return False
        if len(word) > 4 and "--check".startswith(word):
            return True
    return False


def print_version(verbose: bool) -> int:
    """``--version``: print the version (with ``--verbose`` also whether Textual sends only the changed cells, see
    gpusight.ui.terminal.partial_output) and return the exit status; Textual is imported only for ``--verbose``."""
    text = f"gpusight {__version__}\n"
    if verbose:
        from gpusight.ui.terminal.partial_output import status

        text += f"partial output: {status()}\n"
    return 0 if write_stdout(text) else reader_gone()


def build_parser() -> GpusightParser:
    """The argument parser; ``--help`` documents every flag."""
    from gpusight.demo.catalog import DEFAULT_SCENARIO, SCENARIOS

    scenarios = "; ".join(f"{name}: {text}" for name, text in SCENARIOS.items()).replace("%", "%%")
    parser = GpusightParser(
        prog="gpusight",
        description="Live GPU monitor for deep-learning training that tells you why your GPU is under-used. "
        "Runs a terminal UI when stdout is a terminal, otherwise prints one snapshot and exits.",
        epilog=f"`{COMMAND_ALIAS}` is the same program. Data sources: NVML (default), --demo, --replay. "
        f"Setting {STATS_FILE_ENV}=FILE makes the live UI write its sampling statistics to FILE as JSON on exit. "
        f"Outputs: {OVERWRITE_RULE}.",
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
    start_at.add_arguments(parser)
    parser.add_argument(
        "--record", type=path_arg, metavar="FILE",
        help="append every snapshot to FILE in the compact format (docs/recording.md), or as JSON lines when FILE "
        "ends in .jsonl (.jsonl.gz: gzip-compressed); "
        "without a terminal and without --once/--duration, records until interrupted: SIGINT or SIGTERM closes the "
        "file cleanly, even if the shell started it with them ignored; so does SIGHUP, unless it was ignored at start "
        "(nohup), so the recording outlives the terminal. FILE '-' streams JSON lines to stdout, flushed per snapshot, with no screen",
    )
    parser.add_argument("--once", action="store_true", help="print one snapshot as a table and exit (implied when stdout is not a terminal)")
    parser.add_argument(
        "--check", action="store_true",
        help="sample for --duration seconds (a recording: to its end, or --duration seconds of it) with the advice "
        "rules, print the advice that stands and exit 0 (nothing at warn or above), 1 (warn), 2 (critical, or a "
        "GPU lost) or 3 (could not check, usage error); with --json the final snapshot as JSON. The advice judges the "
        "window as a whole at its end, without the live screen's holds; regular stalls need 3 periods and a second "
        "(13 s for every 4 s), other rules a few polls. See docs/check.md and docs/advice.md",
    )
    parser.add_argument("--json", action="store_true", help="print the snapshot as JSON instead of a table (implies --once)")
    parser.add_argument(
        "--duration", type=seconds_arg, metavar="SECONDS",
        help="with --once/--json: sample this long before printing, so rates and windowed advice are real; the advice "
        "judges the window as a whole at its end, as --check does (regular stalls need 3 periods and a second)",
    )
    parser.add_argument(
        "--interval", type=seconds_arg, metavar="SECONDS",
        help=f"polling period in seconds (default {DEFAULT_INTERVAL}; at least {MIN_INTERVAL}; "
        "--replay defaults to the recording's own pace)",
    )
    parser.add_argument(
        "--refresh", type=seconds_arg, default=DEFAULT_REFRESH, metavar="SECONDS",
        help=f"how often the screen is redrawn with the newest poll (default {DEFAULT_REFRESH:g}; never more often "
        "than --interval polls; keys, resizes and replay seeks are answered at once). The charts keep every poll's "
        "highest value, so a poll the screen does not draw still shows in them",
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
        help="config file with [advice] thresholds, [filters] and [charts] (default $XDG_CONFIG_HOME/gpusight/config.toml)",
    )
    from gpusight.backends.registry import AUTO, BACKENDS

    parser.add_argument(
        "--backend", type=backend_arg, default=(AUTO,), metavar="NAME",
        help="which GPU backends read the GPUs: auto (default: NVML, and amdgpu or Intel wherever their GPUs are "
        "found), or one or more of " + ", ".join(f"{e.name} ({e.summary})" for e in BACKENDS) + ", joined with commas",
    )
    gpus = parser.add_mutually_exclusive_group()
    gpus.add_argument(
        "--gpus", type=gpu_ids_arg, metavar="IDS",
        help="watch only these GPUs, in this order: NVML indexes or UUIDs (or unique prefixes such as GPU-5f3a), "
        "comma-separated, e.g. 0,3; the others are not polled. A MIG device's UUID (MIG-...) watches its GPU and "
        "keeps only that MIG device and its processes",
    )
    gpus.add_argument(
        "--cuda-visible", action="store_true",
        help="watch the GPUs CUDA_VISIBLE_DEVICES shows to CUDA programs, in its order, with CUDA's numbers "
        "beside NVML's (integer entries are NVML indexes: CUDA's numbers with CUDA_DEVICE_ORDER=PCI_BUS_ID); "
        "MIG-... entries keep only those MIG devices of their GPU, numbered as CUDA numbers them",
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
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    parser.add_argument(
        "--verbose", action="store_true",
        help="with --version: also say whether partial output (only changed cells are sent; "
        "GPUSIGHT_PARTIAL_OUTPUT=0 turns it off) is active",
    )
    parser.add_argument(
        "--print-completion", action=PrintCompletionAction, other_names=(COMMAND_ALIAS,),
        help=f"print the completion script for SHELL (%(choices)s), for %(prog)s and {COMMAND_ALIAS}, and exit "
        "(README.md, Shell completion, says where to install it)",
    )
    exporter.add_arguments(parser)
    convert.add_arguments(parser)
    run_report.add_arguments(parser)
    return parser




def check_usage(parser: GpusightParser, args: argparse.Namespace) -> None:
    """The usage rules no single flag can check; a broken one is a usage error (exit 3 in check mode)."""
    if args.interval is not None and not MIN_INTERVAL <= args.interval <= MAX_INTERVAL_SECONDS:
        parser.error(f"--interval must be at least {MIN_INTERVAL} and at most {MAX_INTERVAL_SECONDS:g} seconds")
    if not MIN_INTERVAL <= args.refresh <= MAX_INTERVAL_SECONDS:
        parser.error(f"--refresh must be at least {MIN_INTERVAL} and at most {MAX_INTERVAL_SECONDS:g} seconds")
    if args.duration is not None and args.duration > MAX_DURATION_SECONDS:
        parser.error(f"--duration must be at most {MAX_DURATION_SECONDS:.0f} seconds (30 days)")
    if args.verbose and not args.version:
        parser.error("--verbose needs --version")
    if args.loop and args.replay is None:
        parser.error("--loop needs --replay")
    if args.cluster_config is not None and args.cluster is None:
        parser.error("--cluster-config needs --cluster URL")
    if args.backend != ("auto",) and (args.demo is not None or args.replay is not None or args.cluster is not None):
        parser.error("--backend chooses how live GPUs are read; it does not go with --demo, --replay or --cluster")
    start_at.check_arguments(parser, args)
    if args.check:
        _check_check_args(parser, args)
    exporter.check_arguments(parser, args)
    convert.check_arguments(parser, args)
    run_report.check_arguments(parser, args)


def _check_check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The usage rules of ``--check``; a broken one is a usage error (exit 3 in check mode)."""
    if args.replay is None and args.duration is None:
        parser.error("--check needs --duration SECONDS: how long to sample")
    if args.loop and args.duration is None:
        parser.error("--check --loop needs --duration: a looping recording never ends")
    for flag, given in (("--once", args.once), ("--export", args.export is not None), ("--no-advice", args.no_advice)):
        if given:
            parser.error(f"--check cannot be combined with {flag}")
