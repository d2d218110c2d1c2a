"""Long runs, shortened for CI: memory stays bounded and nothing (descriptors, threads) accumulates.

1. A simulated week in-process: demo snapshots at 4 Hz timestamps, with every process's PID
   replaced by a new one every 10 s of simulated time (as if trainers and workers kept restarting),
   go through the real sampler, ring-buffer history, advice engine and the Textual app (headless,
   one in eight snapshots applied to the screen). The history is made small (400 samples) so it
   wraps several times within seconds; after each wrap simulated time jumps by a day, so seven
   wraps span a week. After five warm-up wraps the number of live Python objects and of allocated
   memory blocks must stop growing: a leak of even one small object per retired PID (about 480
   PIDs retire per wrap) would exceed the allowance about twice over.
2. A real ``gpusight`` in a pseudo-terminal at ``--interval 0.1`` against the fake NVML while real
   processes start and stop (``benchmarks/soak.py`` for 20 s instead of 10 minutes): after the
   warm-up, open descriptors and threads do not grow, RSS stays within a few MiB, and ``q`` quits.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import json
import subprocess
import sys
from pathlib import Path

from textual import geometry

from gpusight.advice.config import Thresholds
from gpusight.advice.engine import AdviceEngine
from gpusight.demo.source import DemoSource
from gpusight.sampling.history import History
from gpusight.sampling.sampler import Sampler
from gpusight.sampling.timegrid import TimeGrid
from gpusight.snapshot.model import Snapshot
from gpusight.ui.main.app import GpusightApp
from gpusight.ui.messages import FrameReady

ROOT = Path(__file__).resolve().parents[1]

CAPACITY = 400
"""History samples kept: small so that it wraps many times in a short test."""

WRAPS = 9
"""Times the history is filled; each is followed by a one-day jump in simulated time."""

WARMUP_WRAPS = 5
"""Wraps before the baseline is taken (Rich's and Textual's bounded caches fill, the UI builds its widgets)."""

STEP = 0.25
"""Simulated seconds between snapshots (4 Hz)."""

PID_GENERATION = 40
"""Snapshots (10 simulated seconds) before every PID is replaced by a new one."""

UI_EVERY = 8
"""One snapshot in this many is shown on the headless screen."""

GRID_COLUMNS = (40, 20, 10)
"""Chart grid columns kept per zoom level: each level fills within the warm-up wraps."""

DAY = 86_400.0
"""Simulated seconds skipped after each wrap."""

OBJECT_SLACK = 250
"""Live objects the measured wraps may add in all (caches settling), far below one per retired PID."""

BLOCK_SLACK = 1000
"""Allocated memory blocks the measured wraps may add in all. The allocator's count wanders by up to
~800 blocks between wraps with no leak; over the four measured wraps a per-PID leak adds ~2,000."""


class SimulatedClock:
    """Simulated epoch seconds, moved on by the churning source."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


class ChurningSource:
    """Real demo snapshots, 4 Hz apart, whose PIDs are all replaced every ``PID_GENERATION`` polls."""

    kind = "demo"

    def __init__(self, clock: SimulatedClock) -> None:
        self.clock = clock
        self.demo = DemoSource("mixed", seed=3, clock=clock)
        self.polls = 0
        self.pids_retired = 0

    def poll(self) -> Snapshot:
        self.clock.now += STEP
        self.polls += 1
        snapshot = self.demo.poll()
        offset = (self.polls // PID_GENERATION) * 100_000
        if self.polls % PID_GENERATION == 0:
            self.pids_retired += len(snapshot.processes)

        def moved(pid: int | None) -> int | None:
            return None if pid is None else pid + offset

        processes = tuple(
            dataclasses.replace(p, pid=p.pid + offset, ppid=moved(p.ppid), trainer_pid=moved(p.trainer_pid))
            for p in snapshot.processes
        )
        return dataclasses.replace(snapshot, processes=processes)

    def close(self) -> None:
        self.demo.close()


def clear_geometry_caches() -> None:
    """Empty Textual's bounded geometry caches (``Region.intersection`` keeps 4,096 results): partial
    line refreshes make many distinct regions, so they keep filling long after the warm-up, which
    would read as growth although they stop at their bound."""
    for cls in (geometry.Region, geometry.Offset, geometry.Size, geometry.Spacing):
        for member in vars(cls).values():
            if hasattr(member, "cache_clear"):
                member.cache_clear()


def live_footprint() -> tuple[int, int]:
    """(live gc-tracked objects, allocated memory blocks) after a full collection."""
    clear_geometry_caches()
    gc.collect()
    return len(gc.get_objects()), sys.getallocatedblocks()


def test_a_simulated_week_through_sampler_history_advice_and_screen_stays_bounded():
    clock = SimulatedClock()
    source = ChurningSource(clock)
    # The chart grid is as small as the history, so it too is full before the baseline (its own bound is
    # tested in test_timegrid); what is measured is whatever grows per poll or per PID beyond both.
    sampler = Sampler(source, interval=STEP, history=History(CAPACITY), advisor=AdviceEngine(Thresholds()),
                      grid=TimeGrid(capacities=GRID_COLUMNS))
    sampler.poll_once()
    app = GpusightApp(sampler, live=False, refresh=STEP)  # every frame posted is drawn
    footprints: list[tuple[int, int]] = []
    retired: list[int] = []
    shown_advice: set[str] = set()

    async def main() -> None:
        async with app.run_test(size=(160, 45)) as pilot:
            for _ in range(WRAPS):
                for n in range(CAPACITY):
                    snapshot = sampler.poll_once()
                    shown_advice.update(a.id for a in snapshot.advice)
                    if n % UI_EVERY == 0:
                        app.post_message(FrameReady(sampler.latest_frame))
                        await pilot.pause()
                clock.now += DAY
                footprints.append(live_footprint())
                retired.append(source.pids_retired)

    asyncio.run(main())

    assert len(sampler.history) == CAPACITY
    assert sampler.history.timestamps()[-1] - sampler.history.timestamps()[0] < CAPACITY * STEP
    assert clock.now - 1_700_000_000.0 >= 7 * DAY  # a simulated week (and more)
    assert retired[-1] - retired[WARMUP_WRAPS - 1] > BLOCK_SLACK + OBJECT_SLACK  # a per-PID leak would show
    assert shown_advice  # the advice engine really ran
    assert app.snapshots_applied >= WRAPS * CAPACITY // UI_EVERY
    baseline_objects, baseline_blocks = footprints[WARMUP_WRAPS - 1]
    final_objects, final_blocks = footprints[-1]
    assert final_objects - baseline_objects < OBJECT_SLACK, str(footprints)
    assert final_blocks - baseline_blocks < BLOCK_SLACK, str(footprints)


def test_real_gpusight_at_0_1_s_with_churning_processes_keeps_descriptors_and_threads_flat(tmp_path):
    report = tmp_path / "soak.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "soak.py"), "--duration", "20", "--warmup", "8",
         "--checkpoint", "3", "--lose-every", "8", "--churn", "0.3", "--rss-slack-mib", "8",
         "--json", str(report)],
        capture_output=True, text=True, timeout=120, check=False,
    )

    assert report.exists(), done.stdout + done.stderr
    data = json.loads(report.read_text())
    verdict, points = data["verdict"], data["checkpoints"]
    after_warmup = [p for p in points if p["elapsed_s"] >= 8]
    assert len(after_warmup) >= 3
    assert points[-1]["churned"] >= 40  # processes really came and went
    assert points[-1]["output_kib"] > after_warmup[0]["output_kib"]  # the screen kept updating
    assert max(p["fds"] for p in after_warmup) <= after_warmup[0]["fds"], points
    assert max(p["threads"] for p in after_warmup) <= after_warmup[0]["threads"], points
    assert verdict["rss_growth_mib"] <= 8, points
    assert verdict["exit_status"] == 0
    assert verdict["ok"] and done.returncode == 0, done.stdout + done.stderr
