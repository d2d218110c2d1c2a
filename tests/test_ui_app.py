"""The Textual app driven by a Pilot over demo and replayed data: panels, keys, export, layout, escaping."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import pty
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Input
from textual.widgets._toast import Toast

from gpusight.advice.config import Thresholds
from gpusight.advice.engine import AdviceEngine
from gpusight.demo.frozen import frozen_demo_sampler
from gpusight.demo.source import DemoSource
from gpusight.recordings.jsonl.writer import JsonlWriter
from gpusight.recordings.replay import ReplaySource
from gpusight.sampling.frame import Frame
from gpusight.sampling.history import History
from gpusight.sampling.sampler import MIN_INTERVAL, Sampler
from gpusight.sampling.timegrid import TimeGrid
from gpusight.snapshot.model import Advice, DeviceSample, ErrorNote, ProcessSample, Severity, Snapshot, SourceKind
from gpusight.ui.detail.gpu_detail import GpuDetailScreen
from gpusight.ui.detail.process_detail import ProcessDetailScreen
from gpusight.ui.main.advice_panel import AdvicePanel, AdviceSummary
from gpusight.ui.main.app import GpusightApp
from gpusight.ui.main.gpu_panel import GpuPanel
from gpusight.ui.main.process_table import ProcessTable
from gpusight.ui.messages import FrameReady, TerminalLost
from gpusight.ui.terminal.watchdog import TerminalWatchdog, terminal_alive
from support.jobs import with_jobs

SIZES = [(80, 24), (160, 45)]
START = 1_700_000_000.0


class SteppingClock:
    """A clock that moves forward by ``step`` on every call (deterministic demo data)."""

    def __init__(self, start: float = START, step: float = 0.5) -> None:
        self.now = start
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


class EditedSource:
    """A real DemoSource whose snapshots pass through ``edit`` (to stage a lost GPU or no GPUs)."""

    kind = "demo"

    def __init__(self, source: DemoSource, edit: Callable[[Snapshot], Snapshot]) -> None:
        self.source = source
        self.edit = edit

    def poll(self) -> Snapshot:
        return self.edit(self.source.poll())

    def close(self) -> None:
        self.source.close()


def demo_sampler(
    scenario: str = "mixed",
    *,
    gpus: int | None = None,
    interval: float = 3600.0,
    prefill: int = 40,
    extra: tuple[ProcessSample, ...] = (),
    live_clock: bool = False,
    edit: Callable[[Snapshot], Snapshot] | None = None,
) -> Sampler:
    """A sampler (with advice) over demo data, cut to ``gpus`` GPUs plus ``extra`` processes, then ``edit``-ed."""

    def trim(snapshot: Snapshot) -> Snapshot:
        devices = snapshot.devices[:gpus] if gpus is not None else snapshot.devices
        keep = {d.index for d in devices}
        processes = extra + tuple(p for p in snapshot.processes if p.device_index in keep)
        trimmed = dataclasses.replace(snapshot, devices=devices, processes=processes)
        return trimmed if edit is None else edit(trimmed)

    demo = DemoSource(scenario, seed=0, clock=time.time if live_clock else SteppingClock())
    source = EditedSource(demo, trim)
    sampler = Sampler(source, interval=interval, history=History(600), advisor=AdviceEngine(Thresholds()))
    for _ in range(prefill):
        sampler.poll_once()
    return sampler


def as_live(snapshot: Snapshot) -> Snapshot:
    """``snapshot`` as if NVML had taken it: ``k`` offers signals only for live processes."""
    return dataclasses.replace(snapshot, source=SourceKind.NVML, label=None)


def run_app(app: GpusightApp, size: tuple[int, int], body: Callable[[GpusightApp, Pilot], Awaitable[None]]) -> None:
    """Run ``body`` against the app in a headless terminal of ``size``."""

    async def main() -> None:
        async with app.run_test(size=size, notifications=True) as pilot:
            await pilot.pause()
            await body(app, pilot)

    asyncio.run(main())


def screen_text(app: GpusightApp) -> str:
    """Every line of the current screen as plain text."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def wait_for(pilot: Pilot, condition: Callable[[], bool], tries: int = 100) -> None:
    """Let the app run until ``condition`` holds (bounded)."""
    for _ in range(tries):
        if condition():
            return
        await pilot.pause(0.05)
    assert condition()


def toasts(app: GpusightApp) -> list[Toast]:
    return list(app.screen.query(Toast))


def toast_text(toast: Toast) -> str:
    return str(toast.render())


# -- what is on screen ------------------------------------------------------------------------


def test_demo_data_is_shown_and_labelled_simulated() -> None:
    sampler = demo_sampler("mixed")
    app = GpusightApp(sampler)

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        text = screen_text(app)
        snapshot = sampler.latest_frame.snapshot
        assert "demo: mixed (simulated)" in text
        assert snapshot.host.hostname in text
        assert "H100 80GB" in text
        assert len(app.query(GpuPanel)) == len(snapshot.devices) == 8
        assert "Processes" in text
        assert "CPU" in text and "MEM" in text
        assert app.query_one(AdvicePanel).display
        first = snapshot.advice[0]
        assert first.scope in text

    run_app(app, (160, 45), body)


def test_replay_is_labelled_replay(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    recorder = JsonlWriter(path)
    source = DemoSource("small-batch", seed=0, clock=SteppingClock())
    for _ in range(10):
        recorder.write(source.poll())
    recorder.close()
    sampler = Sampler(ReplaySource(path), interval=3600.0)
    for _ in range(5):
        sampler.poll_once()
    app = GpusightApp(sampler)

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        text = screen_text(app)
        assert "replay: run.jsonl" in text
        assert "simulated" not in text.split("\n")[0].replace("source demo", "")
        assert len(app.query(GpuPanel)) == 2

    run_app(app, (160, 45), body)


def test_a_lost_gpu_is_marked_and_the_others_still_show() -> None:
    def lose_gpu1(snapshot: Snapshot) -> Snapshot:
        devices = list(snapshot.devices)
        devices[1] = DeviceSample(index=1, name=devices[1].name, lost=True, error="GPU has fallen off the bus")
        return dataclasses.replace(snapshot, devices=tuple(devices))

    sampler = Sampler(EditedSource(DemoSource("healthy", seed=0, clock=SteppingClock()), lose_gpu1), interval=3600.0)
    for _ in range(20):
        sampler.poll_once()
    app = GpusightApp(sampler)

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        text = screen_text(app)
        assert "LOST" in text and "GPU has fallen off the bus" in text
        assert len(app.query(GpuPanel)) == 4

    run_app(app, (160, 45), body)


def test_without_gpus_the_reason_is_shown() -> None:
    def no_gpus(snapshot: Snapshot) -> Snapshot:
        note = ErrorNote("nvml", "NVML library libnvidia-ml.so.1 not found")
        return dataclasses.replace(snapshot, driver=None, devices=(), processes=(), errors=(note,))

    sampler = Sampler(EditedSource(DemoSource("healthy", seed=0, clock=SteppingClock()), no_gpus), interval=3600.0)
    sampler.poll_once()
    app = GpusightApp(sampler)

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        text = screen_text(app)
        assert "No GPU data: NVML library libnvidia-ml.so.1 not found" in text
        assert not app.query(GpuPanel)
        assert "CPU" in text

    run_app(app, (80, 24), body)


def test_nvml_errors_show_as_warnings_in_the_advice_panel() -> None:
    sampler = demo_sampler("healthy")
    sampler.add_standing_error(ErrorNote("nvml", "NVML library libnvidia-ml.so.1 not found"))
    sampler.poll_once()
    app = GpusightApp(sampler)

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        text = screen_text(app)
        assert "WARN" in text and "NVML library libnvidia-ml.so.1 not found" in text

    run_app(app, (160, 45), body)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("gpus", [1, 8])
def test_one_and_eight_gpus_fit(size: tuple[int, int], gpus: int) -> None:
    sampler = demo_sampler("mixed", gpus=gpus)
    app = GpusightApp(sampler)

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        screen = app.screen.region
        panels = list(app.query(GpuPanel))
        assert len(panels) == gpus
        gpu_area = app.query_one("#gpus").region
        for panel in panels:
            assert panel.region.height >= 1
            assert gpu_area.contains_region(panel.region), "every GPU is visible without scrolling"
        parts = ["#header", "#gpus", "#host", "#processes", "Footer"]
        # open advice is in view; with nothing to say (or no room) its one-line summary is
        parts.append("#advice" if app.query_one("#advice").display else "#advice-summary")
        regions = [app.query_one(selector).region for selector in parts]
        for selector, region in zip(parts, regions, strict=True):
            assert region.height >= 1 and screen.contains_region(region), selector
        for i, a in enumerate(regions):
            for b in regions[i + 1 :]:
                assert not a.overlaps(b)
        assert app.query_one(ProcessTable).region.height >= 3
        text = screen_text(app)
        assert "demo: mixed (simulated)" in text
        for line in text.split("\n"):
            assert len(line) <= size[0]

    run_app(app, size, body)


@pytest.mark.parametrize("scenario", ["throttling", "mixed"])
def test_ascii_mode_draws_no_box_or_block_characters(scenario: str) -> None:
    """4 GPUs in the full layout, and 8 in strips, whose GPU names are cut to fit."""
    sampler = demo_sampler(scenario)
    app = GpusightApp(sampler, ascii_mode=True)

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        lines = screen_text(app).split("\n")
        # The footer is Textual's own; everything above it is ours.
        body_text = "\n".join(lines[:-1])
        assert body_text.isascii(), sorted({ch for ch in body_text if not ch.isascii()})

    run_app(app, (160, 45), body)


def test_hostile_process_text_is_shown_escaped() -> None:
    hostile = ProcessSample(
        pid=1,
        device_index=0,
        name="\x1b[31mevil",
        cmdline="[red]bold[/red] [link=https://example.com]x[/link] \x1b]0;title\x07" + "A" * 100_000,
        user="[b]mallory[/b]",
        gpu_memory_bytes=1,
    )
    sampler = demo_sampler("small-batch", gpus=1, extra=(hostile,))
    app = GpusightApp(sampler)

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        table = app.query_one(ProcessTable)
        table.sort_by("pid")
        await pilot.pause()
        text = screen_text(app)
        assert "[red]bold[/red] [link=https://e" in text  # markup shown as text, cut to the command column
        assert "[b]mallor" in text
        assert "\x1b" not in text and "\x07" not in text
        assert table.selected_process().pid == 1
        table.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, ProcessDetailScreen)
        shown = app.screen.identity_text
        assert "[red]bold[/red]" in shown and "evil (user [b]mallory[/b])" in shown
        assert len(shown) < 2000 and "\x1b" not in shown and "\x1b" not in screen_text(app)

    run_app(app, (160, 45), body)


def test_enter_on_a_process_shows_its_cpu_and_its_wait_for_a_cpu() -> None:
    shared = ProcessSample(pid=1, device_index=0, name="train", cpu_percent=59.0, cpu_wait_percent=38.0, gpu_memory_bytes=1)
    app = GpusightApp(demo_sampler("small-batch", gpus=1, extra=(shared,)))

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        table = app.query_one(ProcessTable)
        table.sort_by("pid")
        await pilot.pause()
        assert table.selected_process().pid == 1
        table.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, ProcessDetailScreen)
        assert "CPU 59%, waiting for a CPU 38%" in app.screen.identity_text

    run_app(app, (160, 45), body)


# -- jobs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", SIZES)
def test_jobs_are_shown_in_the_process_table(size: tuple[int, int]) -> None:
    app = GpusightApp(demo_sampler("mixed", edit=with_jobs))

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        await pilot.press("t")  # workers folded: every GPU process is in view
        await pilot.pause()
        text = screen_text(app)
        if size[0] >= 120:
            assert "job 1 · rank 0/4" in text and "job 1 · rank 3/4" in text
            assert "job 3 · notebook" in text and "alice" in text
        else:
            assert "1·0/4" in text and "1·3/4" in text and "3·nb" in text
            assert "[6 workers]" in text
        for line in text.split("\n"):
            assert len(line) <= size[0]

    run_app(app, size, body)


def record_with_job_advice(path: Path, advice: Advice, hostile: str = "") -> None:
    """A short recording of the mixed demo with jobs and ``advice`` on every snapshot."""
    recorder = JsonlWriter(path)
    source = DemoSource("mixed", seed=0, clock=SteppingClock())
    for _ in range(6):
        recorder.write(dataclasses.replace(with_jobs(source.poll(), hostile=hostile), advice=(advice,)))
    recorder.close()


STRAGGLER = Advice(
    id="straggler:job1", severity=Severity.WARN, scope="job1", title="Rank 2 of job 1 holds back the other ranks",
    evidence="GPU 2 at 57 % while ranks 0, 1 and 3 read 96 %", action="look at rank 2's input pipeline",
)


@pytest.mark.parametrize("size", SIZES)
def test_job_scoped_advice_names_the_job_and_its_gpus(tmp_path: Path, size: tuple[int, int]) -> None:
    path = tmp_path / "jobs.jsonl"
    record_with_job_advice(path, STRAGGLER)
    sampler = Sampler(ReplaySource(path), interval=3600.0)  # no advisor: the recorded advice is shown
    for _ in range(3):
        sampler.poll_once()
    app = GpusightApp(sampler)

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        if not app.query_one(AdvicePanel).display:
            assert "job1 on GPUs 0-3: Rank 2 of job 1 holds back" in screen_text(app)
            await pilot.press("a")
            await pilot.pause()
        app.query_one(AdvicePanel).show(app.snapshot, force=True)
        await pilot.pause()
        text = screen_text(app)
        assert "job1 on GPUs 0-3 Rank 2 of job 1 holds back the other ranks" in text

    run_app(app, size, body)


@pytest.mark.parametrize("size", SIZES)
def test_ascii_mode_writes_jobs_in_ascii(size: tuple[int, int]) -> None:
    app = GpusightApp(demo_sampler("mixed", edit=with_jobs), ascii_mode=True)

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        table = app.query_one(ProcessTable)
        shown = "\n".join(table.render_line(y).text for y in range(table.scrollable_content_region.height))
        assert ("job 1 - rank 0/4" if size[0] >= 120 else "1:0/4") in shown
        assert shown.isascii(), sorted({ch for ch in shown if not ch.isascii()})
        table.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, ProcessDetailScreen)
        assert "job 1 - rank 0/4: training, GPUs 0-3" in app.screen.identity_text
        assert screen_text(app).isascii()

    run_app(app, size, body)


def test_enter_on_a_process_tells_its_job_and_escaped_evidence() -> None:
    hostile = " [red]x[/red] \x1b[2J\x07"
    app = GpusightApp(demo_sampler("mixed", edit=lambda s: with_jobs(s, hostile=hostile)))

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        table = app.query_one(ProcessTable)
        table.sort_by("job")
        table.focus()
        await pilot.pause()
        process = table.selected_process()
        assert process is not None and process.job == 1 and process.rank == 0
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, ProcessDetailScreen)
        shown = app.screen.identity_text
        facts = f"job 1 · rank 0/4: training, GPUs 0-3, 4 processes, world size 4, launcher PID {process.ppid}"
        assert facts in shown, shown
        assert f"evidence: shared parent PID {process.ppid} [red]x[/red]" in shown, shown
        assert "\x1b" not in shown and "\x07" not in shown
        await pilot.press("escape")

    run_app(app, (160, 45), body)


# -- keys ---------------------------------------------------------------------------------------


def test_pause_stops_updates_and_resume_restarts_them() -> None:
    sampler = demo_sampler("healthy", interval=MIN_INTERVAL, prefill=2, live_clock=True)
    app = GpusightApp(sampler)

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        start = app.snapshots_applied
        await wait_for(pilot, lambda: app.snapshots_applied > start + 1)
        await pilot.press("p")
        assert sampler.paused
        assert "PAUSED" in screen_text(app).split("\n")[0]
        frozen_count, frozen_snapshot = app.snapshots_applied, app.snapshot
        frozen_header = screen_text(app).split("\n")[0]
        await pilot.pause(0.6)
        assert app.snapshots_applied == frozen_count
        assert app.snapshot is frozen_snapshot
        assert screen_text(app).split("\n")[0] == frozen_header
        await pilot.press("p")
        assert not sampler.paused
        await wait_for(pilot, lambda: app.snapshots_applied > frozen_count)
        assert "PAUSED" not in screen_text(app).split("\n")[0]

    run_app(app, (160, 45), body)


def test_plus_and_minus_change_the_interval() -> None:
    sampler = demo_sampler("healthy", interval=0.5)
    app = GpusightApp(sampler)

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        await pilot.press("plus")
        assert sampler.interval == 1.0
        assert "every 1s" in screen_text(app).split("\n")[0]
        for _ in range(4):
            await pilot.press("minus")
        assert sampler.interval == MIN_INTERVAL
        assert "every 0.1s" in screen_text(app).split("\n")[0]

    run_app(app, (160, 45), body)


def test_q_quits_and_stops_the_sampler() -> None:
    sampler = demo_sampler("healthy", interval=MIN_INTERVAL, live_clock=True)
    app = GpusightApp(sampler)

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        assert any(t.name == "gpusight-sampler" for t in threading.enumerate())
        await pilot.press("q")

    run_app(app, (80, 24), body)
    assert app.return_code == 0
    assert not any(t.name == "gpusight-sampler" and t.is_alive() for t in threading.enumerate())


def test_sort_filter_and_worker_keys_drive_the_process_table() -> None:
    app = GpusightApp(demo_sampler("mixed"))

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        table = app.query_one(ProcessTable)
        await pilot.press("m")
        assert table.sort_key == "memory"
        await pilot.press("m")
        assert table.sort_key == "memory" and not table.sort_reverse
        for key, sort_key in [("c", "cpu"), ("u", "sm"), ("i", "pid"), ("g", "gpu"), ("e", "elapsed"), ("n", "user")]:
            await pilot.press(key)
            assert table.sort_key == sort_key
        await pilot.press("t")
        assert table.workers_collapsed
        await pilot.press("t")
        assert not table.workers_collapsed
        target = table.displayed_processes()[0]
        await pilot.press("slash")
        assert isinstance(app.focused, Input)
        await pilot.press(*str(target.pid))
        assert table.filter_text == str(target.pid)
        assert all(str(target.pid) in str(p.pid) or p.trainer_pid == target.pid or str(target.pid) in (p.cmdline or "")
                   for p in table.displayed_processes())
        await pilot.press("escape")
        assert table.filter_text == ""
        assert not app.query_one("#filter").display

    run_app(app, (160, 45), body)


def test_enter_on_a_gpu_opens_its_detail_screen() -> None:
    sampler = demo_sampler("throttling")
    app = GpusightApp(sampler)

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        panels = list(app.query(GpuPanel))
        panels[2].focus()
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, GpuDetailScreen)
        assert app.screen.device_index == 2
        text = screen_text(app)
        device = sampler.latest_frame.snapshot.devices[2]
        assert device.uuid in text
        assert "GPU util" in text and "temperature" in text and "PCIe RX" in text
        await pilot.press("escape")
        assert not isinstance(app.screen, GpuDetailScreen)

    run_app(app, (160, 45), body)


def test_a_double_click_on_a_gpu_opens_its_detail_screen() -> None:
    sampler = demo_sampler("throttling")
    app = GpusightApp(sampler)

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        panel = list(app.query(GpuPanel))[3]
        assert not panel.has_focus
        await pilot.click(panel, offset=(10, 1))
        await pilot.pause()
        assert not isinstance(app.screen, GpuDetailScreen)  # one click only focuses the panel
        await pilot.click(panel, offset=(10, 1), times=2)
        await wait_for(pilot, lambda: isinstance(app.screen, GpuDetailScreen))
        assert app.screen.device_index == 3
        assert sampler.latest_frame.snapshot.devices[3].uuid in screen_text(app)

    run_app(app, (160, 45), body)


@pytest.mark.parametrize(("scenario", "titles"), [
    ("stalls", ("GPU 0 stalls every 7 s",)),
    ("comm-bound", ("Job 1 spends", "of each step communicating (measured)")),
    ("serving", ("GPU 3 serves in small batches", "Idle TGI (PID")),
])
def test_each_demo_story_shows_its_advice_at_start(scenario: str, titles: tuple[str, ...]) -> None:
    """The prefilled history lets the story's advice stand on the first frame; scrolling the panel reaches each one."""
    app = GpusightApp(frozen_demo_sampler(scenario))

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        await wait_for(pilot, lambda: app.snapshots_applied >= 1)
        advice = app.query_one(AdvicePanel)
        assert advice.display
        advice.show(app.snapshot, force=True)
        await pilot.pause()
        seen = screen_text(app)
        for _ in range(10):
            if all(title in seen for title in titles):
                break
            advice.scroll_down(animate=False)
            await pilot.pause()
            seen += screen_text(app)
        for title in titles:
            assert title in seen

    run_app(app, (160, 45), body)


def test_advice_folds_to_a_summary_on_narrow_terminals_and_a_toggles_it() -> None:
    sampler = demo_sampler("input-bound")
    app = GpusightApp(sampler)

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        advice, summary = app.query_one(AdvicePanel), app.query_one(AdviceSummary)
        assert not advice.display and summary.display
        assert summary.region.height == 1
        assert sampler.latest_frame.snapshot.advice
        await pilot.press("a")
        await pilot.pause()
        assert advice.display and advice.region.width >= 70
        assert sampler.latest_frame.snapshot.advice[0].title.split()[0] in screen_text(app)
        await pilot.press("a")
        await pilot.pause()
        assert not advice.display and summary.display

    run_app(app, (80, 24), body)


def test_readonly_hides_and_disables_the_signal_key() -> None:
    app = GpusightApp(demo_sampler("healthy"), readonly=True)

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        assert "Signal" not in screen_text(app).split("\n")[-1]
        await pilot.press("k")
        await pilot.pause()
        assert type(app.screen).__name__ != "KillDialog"

    run_app(app, (160, 45), body)


def test_k_opens_the_signal_dialog_for_the_selected_process() -> None:
    app = GpusightApp(demo_sampler("healthy", edit=as_live))

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        selected = app.query_one(ProcessTable).selected_process()
        await pilot.press("k")
        await pilot.pause()
        assert type(app.screen).__name__ == "KillDialog"
        assert f"PID {selected.pid}" in screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
        assert type(app.screen).__name__ != "KillDialog"

    run_app(app, (160, 45), body)


# -- export -------------------------------------------------------------------------------------


def test_s_exports_four_files(tmp_path: Path) -> None:
    export_dir = tmp_path / "exports"
    app = GpusightApp(demo_sampler("healthy"), export_dir=export_dir)

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        await pilot.press("s")
        await app.workers.wait_for_complete()
        await pilot.pause()
        files = sorted(p.suffix for p in export_dir.iterdir())
        assert files == [".html", ".json", ".md", ".svg"]
        assert any("Exported" in toast_text(t) for t in toasts(app))
        svg = next(export_dir.glob("*.svg")).read_text()
        assert "simulated" in svg

    run_app(app, (160, 45), body)


def test_unwritable_export_dir_notifies_and_keeps_running(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    app = GpusightApp(demo_sampler("healthy"), export_dir=blocker / "exports")

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        await pilot.press("s")
        await app.workers.wait_for_complete()
        await pilot.pause()
        errors = [t for t in toasts(app) if t.has_class("-error")]
        assert errors and "a-file" in toast_text(errors[0])
        await pilot.press("p")
        assert app.sampler.paused and app.is_running

    run_app(app, (160, 45), body)


# -- plumbing -----------------------------------------------------------------------------------


def test_a_newer_frame_message_replaces_a_queued_one() -> None:
    grid = TimeGrid()
    first = FrameReady(Frame(Snapshot(timestamp=1.0, source="demo"), grid.view))
    second = FrameReady(Frame(Snapshot(timestamp=2.0, source="demo"), grid.view))
    assert first.can_replace(second)
    assert not first.can_replace(TerminalLost())


def test_terminal_alive_sees_a_hangup() -> None:
    master, slave = pty.openpty()
    try:
        assert terminal_alive(slave)
        os.close(master)
        assert not terminal_alive(slave)
    finally:
        os.close(slave)
    read_end, write_end = os.pipe()
    try:
        assert not terminal_alive(read_end)
    finally:
        os.close(read_end)
        os.close(write_end)


def test_watchdog_reports_a_lost_terminal_once() -> None:
    master, slave = pty.openpty()
    calls: list[int] = []
    lost = threading.Event()

    def on_lost() -> None:
        calls.append(1)
        lost.set()

    watchdog = TerminalWatchdog(on_lost, fd=slave, period=0.05, force_exit=False)
    watchdog.start()
    try:
        assert not lost.wait(0.3)
        os.close(master)
        assert lost.wait(10)
        assert watchdog.lost.is_set() and calls == [1]
    finally:
        watchdog.stop()
        os.close(slave)
