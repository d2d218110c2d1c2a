"""The process detail screen with Textual's Pilot: opened on a reporting trainer it shows the latest speed, the
step-time breakdown stacked over time and the MFU/HFU and throughput histories; N/A for a process without speed;
a process that exits keeps its last figures; zoom and a replay's seek redraw the histories."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from test_ui_app import run_app, screen_text, wait_for
from test_ui_snapshots import settle
from textual.pilot import Pilot

from gpusight.facts.speed import BREAKDOWN_FIELDS
from gpusight.recordings.replay import ReplaySource
from gpusight.sampling.history import History
from gpusight.sampling.sampler import Sampler
from gpusight.sampling.speed_history import charted
from gpusight.snapshot.model import ProcessRole, Snapshot
from gpusight.speed_text import fmt_count, fmt_share
from gpusight.ui.detail.process_detail import NO_SPEED, WORKER_SPEED, ProcessDetailScreen
from gpusight.ui.main.app import GpusightApp
from gpusight.ui.main.process_table import ProcessTable
from gpusight.ui.widgets.chart import STACK_GLYPHS, StackedChart
from support.speed import PEAK_SOURCE, frozen_speed_sampler, record_speed, trainer_pid

SIZES = [(80, 24), (160, 45)]


async def open_on(pilot: Pilot, pid: int, key: str = "enter", *, settled: bool = False) -> ProcessDetailScreen:
    """Select ``pid`` in the process table and open its detail screen with ``key``."""
    app = pilot.app
    if not settled:
        await settle(pilot)
    table = app.query_one(ProcessTable)
    table.sort_by("pid")
    await pilot.pause()
    table.focus()
    for _ in range(200):
        if table.selected_process().pid == pid:
            break
        await pilot.press("down")
    assert table.selected_process().pid == pid
    await pilot.press(key)
    await pilot.pause()
    await pilot.pause(0.1)
    screen = app.screen
    assert isinstance(screen, ProcessDetailScreen) and screen.pid == pid
    return screen


def chart_text(chart: StackedChart) -> str:
    return "\n".join(chart.render_line(y).text for y in range(chart.size.height))


@pytest.mark.parametrize("size", SIZES)
def test_a_reporting_trainer_shows_its_speed_breakdown_and_histories(size: tuple[int, int]) -> None:
    sampler = frozen_speed_sampler("mixed")
    pid = trainer_pid(sampler.latest_frame.snapshot)
    process = next(p for p in sampler.latest_frame.snapshot.processes if p.pid == pid)
    app = GpusightApp(sampler)

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        screen = await open_on(pilot, pid)
        fields = screen.speed_text
        assert f"steps {fmt_count(process.steps_per_second)} steps/s" in fields
        assert "FLOPs/step 6e+13 (counted)" in fields  # counted FLOPs: the utilization is HFU
        assert f"HFU {fmt_share(process.flops_utilization_percent)}" in fields
        assert f"({PEAK_SOURCE})" in fields and "math mode bf16" in fields
        assert f"data wait {process.step_data_percent:.0f}% (device)" in fields
        stacked = chart_text(screen.query_one(StackedChart))
        # every part with a share of a cell or more shows in its own glyph; the data wait swings over the minute
        assert {STACK_GLYPHS[0], STACK_GLYPHS[1], STACK_GLYPHS[2]} <= set(stacked)
        text = screen_text(app)
        assert "step time (device)" in text and "HFU" in text and "throughput" in text
        for _, label in BREAKDOWN_FIELDS[:2]:
            assert label in text
        mfu = screen.query_one("#chart-utilization .detail-chart")
        assert any(mfu.render_line(y).text.strip() for y in range(mfu.size.height))
        throughput = screen.query_one("#chart-throughput .detail-chart")
        assert any(throughput.render_line(y).text.strip() for y in range(throughput.size.height))
        await pilot.press("enter")  # opens nothing on top: Esc goes back to the table
        await pilot.pause()
        assert app.screen is screen
        await pilot.press("escape")
        assert not isinstance(app.screen, ProcessDetailScreen)

    run_app(app, size, body)


def test_a_process_without_speed_reads_na() -> None:
    sampler = frozen_speed_sampler("mixed")
    latest = sampler.latest_frame.snapshot
    silent = max(p.pid for p in latest.processes if p.role == ProcessRole.GPU and not charted(p))  # a notebook
    app = GpusightApp(sampler)

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        screen = await open_on(pilot, silent, key="d")
        assert NO_SPEED in screen.speed_text
        assert "steps N/A" in screen.speed_text and "MFU N/A" in screen.speed_text
        assert "data wait N/A" in screen.speed_text
        assert not chart_text(screen.query_one(StackedChart)).strip()
        assert "step time (N/A)" in screen_text(app)

    run_app(app, (160, 45), body)


def test_a_dataloader_worker_points_to_its_trainers_speed() -> None:
    sampler = frozen_speed_sampler("mixed")
    worker = next(p for p in sampler.latest_frame.snapshot.processes if p.role == ProcessRole.DATALOADER_WORKER)
    app = GpusightApp(sampler)

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        screen = await open_on(pilot, worker.pid, key="d")
        assert WORKER_SPEED.format(pid=worker.trainer_pid) in screen.speed_text
        assert NO_SPEED not in screen.speed_text

    run_app(app, (160, 45), body)


HOSTILE = "GPU not in the table \x1b[2J\x07[red]boom[/red]"


class NoPeak:
    """A demo source whose highest-pid GPU process counts its FLOPs but has no peak, with a hostile reason."""

    def __init__(self, sampler: Sampler) -> None:
        self.source = sampler.source

    def poll(self) -> Snapshot:
        snapshot = self.source.poll()
        pid = max(p.pid for p in snapshot.processes if p.role == ProcessRole.GPU)
        processes = tuple(
            dataclasses.replace(p, steps_per_second=2.0, flops_per_step=1e12, achieved_tflops=2.0, peak_tflops=None,
                                flops_utilization_percent=None, flops_utilization_note=HOSTILE,
                                peak_source="\x1b]8;;http://x\x07datasheet")
            if p.pid == pid else p
            for p in snapshot.processes
        )
        return dataclasses.replace(snapshot, processes=processes)

    def close(self) -> None:
        self.source.close()


def test_an_unknown_peak_reads_na_with_its_reason_escaped() -> None:
    sampler = frozen_speed_sampler("mixed")
    sampler.source = NoPeak(sampler)
    pid = max(p.pid for p in sampler.latest_frame.snapshot.processes if p.role == ProcessRole.GPU)
    app = GpusightApp(sampler)

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        screen = await open_on(pilot, pid)
        assert "MFU N/A: GPU not in the table ?[red]boom[/red]" in screen.speed_text  # BEL shown as ?
        assert "peak N/A (datasheet)" in screen.speed_text
        text = screen_text(app)
        assert "[red]boom" in text and "\x1b" not in text and "\x07" not in text
        assert "MFU N/A" in text  # the chart's caption

    run_app(app, (160, 45), body)


class Vanishing:
    """A demo source with a reporting trainer, from whose snapshots the trainer goes once ``gone`` is set."""

    def __init__(self, sampler: Sampler) -> None:
        self.source = sampler.source
        self.pid = trainer_pid(sampler.latest_frame.snapshot)
        self.gone = False

    def poll(self) -> Snapshot:
        snapshot = self.source.poll()
        if not self.gone:
            return snapshot
        return dataclasses.replace(
            snapshot, timestamp=snapshot.timestamp + 1.0,
            processes=tuple(p for p in snapshot.processes if p.pid != self.pid),
        )

    def close(self) -> None:
        self.source.close()


def test_a_process_that_exits_keeps_its_last_figures() -> None:
    sampler = frozen_speed_sampler("mixed")
    source = Vanishing(sampler)
    sampler.source = source
    app = GpusightApp(sampler)

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        screen = await open_on(pilot, source.pid)
        before = screen.speed_text
        assert "steps N/A" not in before and screen.status_text == ""
        source.gone = True
        sampler.poll_soon()
        for _ in range(100):
            if screen.status_text:
                break
            await pilot.pause(0.05)
        assert screen.status_text.startswith("EXITED: not seen since")
        own = [line for line in before.splitlines() if not line.startswith("job ")]  # the job runs on without it
        assert [line for line in screen.speed_text.splitlines() if not line.startswith("job ")] == own
        assert "EXITED" in screen_text(app)
        assert isinstance(app.screen, ProcessDetailScreen)
        assert chart_text(screen.query_one(StackedChart)).strip()  # its history stays

    run_app(app, (80, 24), body)


def test_zoom_redraws_the_histories_over_a_longer_span() -> None:
    app = GpusightApp(frozen_speed_sampler("mixed"))

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        screen = await open_on(pilot, trainer_pid(app.sampler.latest_frame.snapshot))
        wide = chart_text(screen.query_one(StackedChart))
        await pilot.press("z")
        await pilot.pause()
        assert isinstance(app.screen, ProcessDetailScreen)
        assert chart_text(screen.query_one(StackedChart)) != wide  # 10 s a column: the two minutes fill 12 columns

    run_app(app, (160, 45), body)


def test_a_replay_rebuilds_the_histories_as_playback_seeks(tmp_path: Path) -> None:
    source = ReplaySource(record_speed(tmp_path / "speed.jsonl", 600))
    assert source.wait_indexed(30)
    app = GpusightApp(Sampler(source, interval=3600.0, history=History(600)))

    def position() -> float:
        playback = None if app.frame is None else app.frame.playback
        return -1.0 if playback is None else playback.position - playback.start

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        await wait_for(pilot, lambda: position() >= 0)
        pid = trainer_pid(app.snapshot)
        await pilot.press("right_curly_bracket", "right_curly_bracket", "right_curly_bracket")  # three minutes on
        await wait_for(pilot, lambda: position() >= 170)
        screen = await open_on(pilot, pid, settled=True)
        filled = sum(part is not None for part in app.frame.speeds.series(0, pid, "steps_per_second", 300))
        assert filled >= 150  # the seek's lead-in rebuilt the minutes before
        assert chart_text(screen.query_one(StackedChart)).strip()
        await pilot.press("left_curly_bracket", "left_curly_bracket")  # back two minutes: rebuilt again
        await wait_for(pilot, lambda: position() < 120)
        filled = sum(part is not None for part in app.frame.speeds.series(0, pid, "steps_per_second", 300))
        assert 30 <= filled <= position() + 2
        assert isinstance(app.screen, ProcessDetailScreen)

    run_app(app, (160, 45), body)
