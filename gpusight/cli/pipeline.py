"""The sampler the command line and the config file ask for: its source, filters, advice, chart grid and recorder.

:func:`build_pipeline` assembles it; :meth:`Pipeline.prepare` then gets it ready to show data (a demo's
prefilled history, the GPUs asked for checked against the data, a replay seeked to ``--at``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpusight.cli.output import CliError
from gpusight.recordings import start_at
from gpusight.recordings.jsonl.stream import JsonLinesStream, names_stdout
from gpusight.sampling.chart_settings import ChartSettings
from gpusight.sampling.filters import Filters
from gpusight.sampling.history import History
from gpusight.sampling.sampler import DEFAULT_INTERVAL, MIN_INTERVAL, Sampler
from gpusight.sampling.source import SnapshotSource
from gpusight.sampling.timegrid import TimeGrid
from gpusight.snapshot.model import ErrorNote

if TYPE_CHECKING:
    from gpusight.check import CheckPlan
    from gpusight.demo.prefill import DemoClock
    from gpusight.recordings.progress import ReadProgress
    from gpusight.recordings.replay import ReplaySource

DEMO_HINT = "try gpusight --demo to see simulated GPUs"
"""Ends the reason a machine has no usable NVIDIA driver, for someone trying gpusight out."""


@dataclass(frozen=True, slots=True)
class Pipeline:
    """A sampler built from the command line, with what it was built from."""

    sampler: Sampler
    """Polls the source, with filters, advice, history, chart grid and recorder."""
    charts: ChartSettings
    """The config file's chart settings (column period, scrolling or paging)."""
    demo_clock: DemoClock | None
    """The demo's clock, shifted back while its history is prefilled; None for live data and replays."""
    replay: ReplaySource | None
    """The recording played (under any GPU selection), for ``--at``; None for live and demo data."""

    def prepare(self, args: argparse.Namespace) -> None:
        """Prefill a demo, stop when the GPUs asked for are not in the data, and seek a replay to ``--at`` once more."""
        if self.demo_clock is not None:
            from gpusight.demo.prefill import prefill_demo

            prefill_demo(self.sampler, self.demo_clock, args.demo)
        if self.sampler.filters.gpus is not None:
            _check_gpu_selection(self.sampler)
            if self.replay is not None:  # the GPU check's poll played the snapshot the first seek chose
                _start_at(self.replay, args.at)

    def judges_window(self, args: argparse.Namespace) -> bool:
        """True for a one-shot run over ``--duration`` (``--once``/``--json``, not the exporter) with the advice rules:
        its advice judges the window it sampled as a whole, as ``--check`` does (:meth:`plan_check`)."""
        from gpusight.advice.engine import AdviceEngine

        return args.duration is not None and args.serve is None and isinstance(self.sampler.advisor, AdviceEngine)

    def plan_check(self, args: argparse.Namespace) -> CheckPlan:
        """Fit the advice engine's windows to the data the run will have and have it judge that window as a whole at
        its end (see gpusight.check); a recording that carries advice is checked by the advice it recorded, so
        nothing is fitted."""
        from gpusight.advice.engine import AdviceEngine
        from gpusight.check import plan_check

        sampler = self.sampler
        if not isinstance(sampler.advisor, AdviceEngine):
            raise CliError("--check needs the advice rules")
        if args.demo is not None:  # the demo's prefilled history counts too
            from gpusight.demo.source import prefill_seconds

            what, available = f"demo data ({args.demo})", args.duration + prefill_seconds(args.demo)
        elif self.replay is not None and self.replay.advice_recorded:  # the rules are not run: nothing to fit
            what = f"the advice recorded in {args.replay.name}"
            return plan_check(sampler.advisor, sampler.interval, what, args.duration, None, rules_run=False)
        elif args.replay is not None:
            what, available = f"recording {args.replay.name}, re-evaluated by the rules as it recorded no advice", args.duration
        else:
            what, available = "live data", args.duration
        return plan_check(sampler.advisor, sampler.interval, what, args.duration, available)


def build_pipeline(args: argparse.Namespace) -> Pipeline:
    """The sampler the command line and the config file ask for, not yet started."""
    from gpusight.config_file import config_path, read_config
    from gpusight.sampling.chart_settings import chart_settings_from_config

    document, warnings = read_config(args.config)
    config = args.config or config_path()
    filters, problems = _choose_filters(args, document, config)
    charts, chart_problems = chart_settings_from_config(document, str(config))
    problems += chart_problems
    interval = args.interval
    source: SnapshotSource
    demo_clock: DemoClock | None = None
    selects_itself = False
    replay: ReplaySource | None = None
    if args.demo is not None:
        from gpusight.demo.prefill import DemoClock
        from gpusight.demo.source import DemoSource

        demo_clock = DemoClock()
        source = DemoSource(args.demo, clock=demo_clock)
    elif args.replay is not None:
        replay = _open_replay(args.replay, args.loop, args.at)
        if interval is None and replay.recorded_interval:
            interval = max(MIN_INTERVAL, replay.recorded_interval)
        source = replay
    else:
        from gpusight.backends.interface import BackendOptions, Roots
        from gpusight.backends.live import LiveSource
        from gpusight.backends.registry import open_backends

        hint = None if args.serve is not None else DEMO_HINT  # an exporter's log is read by an operator, not someone trying it out
        gpu, selects_itself = open_backends(args.backend, BackendOptions(Roots.from_environment(), filters.gpus, hint))
        source = LiveSource(gpu)
    if filters.gpus is not None and not selects_itself:
        from gpusight.sampling.gpu_selecting_source import GpuSelectingSource

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
        from gpusight.recordings.formats import RecordingError
        from gpusight.recordings.opening import open_recorder

        try:
            sampler.recorder = open_recorder(args.record)
        except RecordingError as exc:
            sampler.stop()
            raise CliError(str(exc)) from exc
    return Pipeline(sampler, charts, demo_clock, replay)


def _open_replay(path: Path, loop: bool, when: str | None) -> ReplaySource:
    """The replay of ``path``, seeked to ``when`` (``--at``) when given; a recording that cannot be played is a CliError.

    The seek waits for the recording's index, so a bar on stderr (a terminal) shows how far its scan has got.
    """
    from gpusight.recordings.replay import ReplayError, ReplaySource

    try:
        replay = ReplaySource(path, loop=loop)
    except ReplayError as exc:
        raise CliError(str(exc)) from exc
    if when is not None:
        from gpusight.cli.progress import reading_description, stderr_progress

        with stderr_progress(reading_description("indexing", path)) as progress:
            _start_at(replay, when, progress)
    return replay


def _start_at(replay: ReplaySource, when: str | None, progress: ReadProgress | None = None) -> None:
    """Seek ``replay`` to ``when`` (nothing when None); a time outside the recording is a CliError."""
    from gpusight.recordings.replay import ReplayError

    try:
        start_at.start_at(replay, when, progress)
    except ReplayError as exc:
        raise CliError(str(exc)) from exc


def _choose_filters(args: argparse.Namespace, document: dict[str, object], config: Path) -> tuple[Filters, list[str]]:
    """The config file's ``[filters]`` (unless ``--no-filters``) overridden by ``--gpus``/``--cuda-visible``/``--user``."""
    from gpusight.facts.gpu_selection import CudaVisible, GpuIds
    from gpusight.sampling.filters import UnknownUserError, filters_from_config, user_filter

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
    from gpusight.sampling.gpu_selecting_source import GpuSelecting

    if sampler.latest_frame is None:
        sampler.poll_once()
    if isinstance(sampler.source, GpuSelecting) and sampler.source.selection_error is not None:
        raise CliError(sampler.source.selection_error)


def _attach_advice(sampler: Sampler, document: dict[str, object], config: Path) -> list[str]:
    """Give the sampler the advice engine with the config's thresholds; returns the warnings about them."""
    from gpusight.advice.config import thresholds_from_config
    from gpusight.advice.engine import AdviceEngine

    thresholds, warnings = thresholds_from_config(document, config)
    sampler.advisor = AdviceEngine(thresholds)
    return warnings
