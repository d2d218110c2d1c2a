"""SVG snapshots of the whole screen on frozen demo data (pytest-textual-snapshot).

The demo's values are a seeded function of its clock: the history is filled with a stepping
clock, then the clock stops, so every later poll returns the same snapshot. The host name,
process ages and the header time all come from that data (the header time in UTC), so nothing
depends on the machine or the wall clock. Regenerate with ``--snapshot-update`` and look at the
SVGs (``tests/__snapshots__/test_ui_snapshots/``) before committing them.
"""

from __future__ import annotations

import pytest
from test_ui_app import EditedSource
from textual.pilot import Pilot

from gpusight.demo.frozen import frozen_demo_sampler
from gpusight.ui.main.advice_panel import AdvicePanel
from gpusight.ui.main.app import GpusightApp
from gpusight.ui.main.gpu_panel import GpuPanel
from gpusight.ui.main.process_table import ProcessTable
from support.jobs import with_jobs
from support.speed import frozen_speed_sampler, trainer_pid
from support.timezone import utc  # noqa: F401  (autouse: every test here runs in UTC)


def frozen_app(scenario: str, **kwargs: object) -> GpusightApp:
    """The app over ``scenario`` with two minutes of history and a stopped clock (hourly polls)."""
    return GpusightApp(frozen_demo_sampler(scenario, interval=3600.0), **kwargs)


async def settle(pilot: Pilot) -> None:
    """Wait for the sampler's first live poll (the clock is stopped, so it repeats the last snapshot)."""
    app = pilot.app
    for _ in range(200):
        if app.snapshots_applied >= 2:
            break
        await pilot.pause(0.02)
    assert app.snapshots_applied >= 2
    app.query_one(AdvicePanel).show(app.snapshot, force=True)
    await pilot.pause()


async def open_detail(pilot: Pilot) -> None:
    await settle(pilot)
    pilot.app.query(GpuPanel)[1].focus()
    await pilot.press("enter")
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (160, 45)])
@pytest.mark.parametrize("scenario", ["mixed", "small-batch", "mig", "faulty"])
def test_main_screen(snap_compare, scenario: str, size: tuple[int, int]) -> None:
    assert snap_compare(frozen_app(scenario), terminal_size=size, run_before=settle)


@pytest.mark.parametrize("size", [(80, 24), (160, 45)])
def test_main_screen_with_jobs(snap_compare, size: tuple[int, int]) -> None:
    sampler = frozen_demo_sampler("mixed", interval=3600.0)
    sampler.source = EditedSource(sampler.source, with_jobs)  # the live polls carry jobs: the JOB column shows
    sampler.advisor = None  # no advice: the table has the room, and changes to the rules leave this picture alone

    async def shown(pilot: Pilot) -> None:
        await settle(pilot)
        pilot.app.query_one(ProcessTable).update_snapshot(pilot.app.snapshot, at_once=True)  # not a second later
        await pilot.pause()

    assert snap_compare(GpusightApp(sampler), terminal_size=size, run_before=shown)


@pytest.mark.parametrize("size", [(80, 24), (160, 45)])
@pytest.mark.parametrize("scenario", ["amd", "mixed-vendor"])
def test_main_screen_other_vendors(snap_compare, scenario: str, size: tuple[int, int]) -> None:
    """AMD GPUs show junction and memory temperatures, N/A where amdgpu reads nothing, GPM as NVIDIA-only, the
    amdgpu driver in the header and why the ROCm run's GPU share is N/A."""
    assert snap_compare(frozen_app(scenario), terminal_size=size, run_before=settle)


def test_gpu_detail_screen_amd(snap_compare) -> None:
    assert snap_compare(frozen_app("amd"), terminal_size=(160, 45), run_before=open_detail)


def test_ascii_mode(snap_compare) -> None:
    assert snap_compare(frozen_app("throttling", ascii_mode=True), terminal_size=(80, 24), run_before=settle)


def test_gpu_detail_screen(snap_compare) -> None:
    assert snap_compare(frozen_app("throttling"), terminal_size=(160, 45), run_before=open_detail)


@pytest.mark.parametrize("size", [(80, 24), (160, 45)])
def test_process_detail_screen(snap_compare, size: tuple[int, int]) -> None:
    sampler = frozen_speed_sampler("mixed")
    pid = trainer_pid(sampler.latest_frame.snapshot)

    async def opened(pilot: Pilot) -> None:
        await settle(pilot)
        table = pilot.app.query_one(ProcessTable)
        table.sort_by("pid")
        table.focus()
        await pilot.pause()
        assert table.selected_process().pid == pid  # the reporting trainer has the lowest pid
        await pilot.press("enter")
        await pilot.pause()
        await pilot.pause(0.1)

    assert snap_compare(GpusightApp(sampler), terminal_size=size, run_before=opened)
