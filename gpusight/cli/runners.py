"""The modes that sample: ``--once``/``--json``, ``--check``, a headless ``--record`` and the live TUI."""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from gpusight import old_name
from gpusight.cli.output import CliError, reader_gone, write_stdout
from gpusight.cli.parser import STATS_FILE_ENV
from gpusight.cli.progress import stderr_progress
from gpusight.recordings.jsonl.stream import JsonLinesStream, names_stdout
from gpusight.sampling.sampler import Sampler
from gpusight.snapshot.model import Snapshot
from gpusight.snapshot.serialize import snapshot_to_json

if TYPE_CHECKING:
    from gpusight.check import CheckPlan
    from gpusight.cli.pipeline import Pipeline
    from gpusight.ui.main.app import GpusightApp

ONCE_SETTLE_SECONDS = 0.3
"""Gap between the priming poll and the reported one in ``--once``, so CPU % and PCIe rates are real."""

HEADLESS_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""Signals that always stop a headless recording, even when the process inherited them ignored."""

FIRST_POLL_WAIT_SECONDS = 1.0
"""How long the live UI waits for the first poll before it draws the screen without data."""


def run_check(sampler: Sampler, args: argparse.Namespace, plan: CheckPlan) -> int:
    """``--check``: sample, then print the report (or the final snapshot as JSON) and return the check's status."""
    from gpusight.check import exit_status, headline, render_check, sample_for_check
    from gpusight.textsafe import safe_text

    finished = (lambda: sampler.source_finished) if sampler.steerable else None
    with stderr_progress(f"sampling {plan.what}", counts="seconds") as progress:
        result = sample_for_check(sampler, args.duration, live=args.demo is None and not sampler.steerable,
                                  finished=finished, progress=progress)
    status = exit_status(result)
    if result.cannot_check is not None:
        print(f"gpusight: cannot check: {safe_text(result.cannot_check)}", file=sys.stderr)
    if args.json:
        if result.cannot_check is None:
            print(headline(plan, result, sampler.interval), file=sys.stderr)
        text = snapshot_to_json(result.snapshot, indent=2) + "\n"
    else:
        text = "" if result.cannot_check is not None else render_check(plan, result, sampler.interval)
    return status if write_stdout(text) else reader_gone()


def _collect(sampler: Sampler, duration: float | None, settle: bool = True) -> Snapshot:
    """Poll for ``duration`` seconds at the sampler's interval (or a short priming pair, or once without ``settle``)
    and return the last snapshot; a ``duration`` shows its progress on stderr when that is a terminal."""
    snapshot = sampler.poll_once()
    if duration is None and not settle:
        return snapshot
    if duration is None:
        time.sleep(ONCE_SETTLE_SECONDS)
        return sampler.poll_once()
    start = time.monotonic()
    with stderr_progress("sampling", counts="seconds") as progress:
        if progress is not None:
            progress.begin(math.ceil(duration))
        while (remaining := start + duration - time.monotonic()) > 0:
            time.sleep(min(sampler.interval, remaining))
            snapshot = sampler.poll_once()
            if progress is not None:
                progress.reached(int(time.monotonic() - start))
    return snapshot


def run_once(sampler: Sampler, args: argparse.Namespace, plan: CheckPlan | None = None) -> int:
    """``--once``/``--json``: sample (see ``_collect``), print one snapshot as a table or JSON, export and return the
    exit status; with a ``plan`` (a ``--duration``) the table, or stderr before JSON, says how the advice judged the
    window."""
    judged = None
    if plan is not None and plan.rules_run:
        from gpusight.check import judging_text
        from gpusight.textsafe import safe_text

        judged = safe_text(f"advice over {args.duration:g} s of {plan.what}: {judging_text(plan)}")
    if args.json and judged is not None:
        print(f"gpusight: {judged}", file=sys.stderr)
    snapshot = _collect(sampler, args.duration, settle=args.at is None)  # a replay at a time shows that time
    if args.json:
        text = snapshot_to_json(snapshot, indent=2) + "\n"
    else:
        from gpusight.oneshot import render_once

        width = shutil.get_terminal_size((160, 24)).columns if sys.stdout.isatty() else None
        text = render_once(snapshot, width, filters=sampler.filters.describe(), judged=judged)
    delivered = write_stdout(text)
    if args.export is not None:
        _export_once(args.export, snapshot, sampler)
    if args.record is not None and sampler.recorder is None:
        return _recording_failed(snapshot)
    return 0 if delivered else reader_gone()


def _export_once(directory: Path, snapshot: Snapshot, sampler: Sampler) -> None:
    """Write the export set (SVG of the screen, JSON with history, Markdown and HTML reports) for the newest snapshot."""
    from gpusight.snapshot_export.export_set import ExportError, export_snapshot
    from gpusight.ui.main.render import render_screen_svg

    svg = render_screen_svg(sampler)
    try:
        result = export_snapshot(directory, snapshot, sampler.history, svg=svg)
    except ExportError as exc:
        raise CliError(str(exc)) from exc
    print("exported: " + ", ".join(str(p) for p in result.paths), file=sys.stderr)


def _recording_failed(snapshot: Snapshot) -> int:
    """Say why the recording stopped (disk full, file removed, ...) and return the failure status."""
    reason = next((e.message for e in snapshot.errors if e.scope == "record"), "recording stopped")
    print(f"gpusight: {reason}", file=sys.stderr)
    return 1


def record_headless(sampler: Sampler, args: argparse.Namespace) -> int:
    """Record until SIGINT, SIGTERM or SIGHUP without a screen.

    SIGINT and SIGTERM stop it whatever it inherited (a non-interactive shell starts background jobs with SIGINT
    ignored); a SIGHUP ignored on entry (``nohup``) stays ignored, so the recording outlives the terminal.
    """
    stop = {"now": False}

    def request_stop(signum: int, frame: object) -> None:
        stop["now"] = True

    for sig in HEADLESS_STOP_SIGNALS:
        signal.signal(sig, request_stop)
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
        signal.signal(signal.SIGHUP, request_stop)
    recorder, target = sampler.recorder, "stdout" if names_stdout(args.record) else args.record
    print(f"gpusight: recording to {target} every {sampler.interval:g} s; stop with Ctrl-C or SIGTERM", file=sys.stderr)
    count = 0
    next_poll = time.monotonic()
    while not stop["now"]:
        snapshot = sampler.poll_once()
        if sampler.recorder is None:
            if isinstance(recorder, JsonLinesStream) and recorder.reader_gone:
                return reader_gone()
            return _recording_failed(snapshot)
        count += 1
        next_poll = max(next_poll + sampler.interval, time.monotonic())
        while not stop["now"] and time.monotonic() < next_poll:
            time.sleep(min(0.1, max(0.0, next_poll - time.monotonic())))
    print(f"gpusight: recorded {count} snapshots to {target}", file=sys.stderr)
    return 0


def run_tui(pipeline: Pipeline, args: argparse.Namespace) -> int:
    """The live terminal UI over the pipeline's sampler, until the user quits; returns the app's exit status."""
    sampler = pipeline.sampler
    if sampler.latest_frame is None:
        # Polling starts before Textual loads, so the first frame already shows data: started from
        # the app, the first poll would compete with the first layout for the GIL and arrive frames
        # later. A driver whose calls hang must not keep the screen (and its q and Ctrl-C) away.
        sampler.start()
        sampler.wait_for_first(FIRST_POLL_WAIT_SECONDS)
    from gpusight.ui.main.app import GpusightApp

    app = GpusightApp(
        sampler, readonly=args.readonly, ascii_mode=args.ascii, export_dir=args.export_dir,
        paged_charts=pipeline.charts.motion == "page", refresh=args.refresh,
    )
    app.run()
    stats_path = old_name.environment_value(STATS_FILE_ENV)
    if stats_path:
        _write_stats(Path(stats_path), sampler, app)
    return app.return_code or 0


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


def _write_stats(path: Path, sampler: Sampler, app: GpusightApp) -> None:
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
        print(f"gpusight: cannot write statistics to {path}: {exc}", file=sys.stderr)
