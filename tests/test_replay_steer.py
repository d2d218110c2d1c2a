"""Steering a replay: speed, pause, seeks by time, by seconds and to advice events, through the real sampler.

The sampler's own thread applies what the UI thread queues; after a seek the history and the chart grid
hold only the recorded time before the new position (the lead-in), never a mix of times.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from gpusight.advice.engine import AdviceEngine
from gpusight.facts.gpu_selection import GpuIds
from gpusight.recordings.playback import LEAD_IN_SECONDS, SPEEDS, event_after, step_speed
from gpusight.recordings.replay import ReplaySource
from gpusight.sampling.frame import Frame
from gpusight.sampling.gpu_selecting_source import GpuSelectingSource
from gpusight.sampling.sampler import Sampler
from gpusight.sampling.steering import ChangeSpeed, SeekBy, SeekEvent, SeekTo, TogglePause
from support.recordings import DAY_START, write_demo_recording
from support.timezone import utc  # noqa: F401 - autouse: local time is UTC here

SECONDS = 1200


@pytest.fixture(scope="module", params=["run.gpusight", "run.jsonl.gz"], ids=["compact", "jsonl.gz"])
def recording(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """20 minutes at 1 Hz from 00:00 UTC, the advice changing every 5 minutes, in each format."""
    path = tmp_path_factory.mktemp("steer") / request.param
    return write_demo_recording(path, SECONDS, scenarios=("healthy", "input-bound"), segment_s=300)


@pytest.fixture
def replay(recording: Path):
    source = ReplaySource(recording)
    assert source.wait_indexed(30)
    yield source
    source.close()


def at(seconds: float) -> float:
    return DAY_START + seconds


def poll(sampler: Sampler) -> Frame:
    sampler.poll_once()
    frame = sampler.latest_frame
    assert frame is not None and frame.playback is not None
    return frame


def test_speed_steps_go_up_and_back_and_stop_at_the_ends():
    assert SPEEDS == (1, 2, 5, 10, 20, 50, 100)
    climbed = [1]
    for _ in range(8):
        climbed.append(step_speed(climbed[-1], 1))
    assert climbed == [1, 2, 5, 10, 20, 50, 100, 100, 100]
    assert step_speed(100, -3) == 10 and step_speed(2, -5) == 1


def test_at_speed_a_poll_plays_that_many_snapshots_and_the_history_keeps_them_all(replay: ReplaySource):
    sampler = Sampler(replay, 1.0, advisor=AdviceEngine())
    assert poll(sampler).snapshot.timestamp == at(0)
    replay.steer(ChangeSpeed(3))  # x10
    frame = poll(sampler)
    assert frame.playback.speed == 10
    assert frame.snapshot.timestamp == at(10)
    assert sampler.history.timestamps() == [at(s) for s in range(11)]
    replay.steer(ChangeSpeed(-2))  # x2
    assert poll(sampler).snapshot.timestamp == at(12)


def test_a_seek_replaces_the_history_and_charts_with_the_time_before_it(replay: ReplaySource):
    sampler = Sampler(replay, 1.0, advisor=AdviceEngine())
    for _ in range(5):
        poll(sampler)
    replay.steer(SeekTo(at(700.5)))
    frame = poll(sampler)
    assert frame.snapshot.timestamp == at(700)  # the last snapshot at or before the target
    assert frame.playback.position == at(700)
    stamps = sampler.history.timestamps()
    assert stamps == [at(s) for s in range(700 - int(LEAD_IN_SECONDS), 701)]
    level = frame.charts.levels[0]
    slots = [column.slot for column in level.columns[: level.count]]
    assert slots[0] == int(at(700 - LEAD_IN_SECONDS)) and level.current is not None and level.current.slot == at(700)
    assert poll(sampler).snapshot.timestamp == at(701)  # and playing on from there
    replay.steer(SeekTo(at(100)))  # back
    assert poll(sampler).snapshot.timestamp == at(100)
    assert sampler.history.timestamps()[0] == at(0) and sampler.history.timestamps()[-1] == at(100)


def test_relative_seeks_add_up_and_stop_at_the_ends(replay: ReplaySource):
    sampler = Sampler(replay, 1.0)
    poll(sampler)
    replay.steer(SeekBy(60))
    replay.steer(SeekBy(10))
    replay.steer(SeekBy(-10))
    replay.steer(SeekBy(10))
    assert poll(sampler).snapshot.timestamp == at(70)
    replay.steer(SeekBy(-3600))
    assert poll(sampler).snapshot.timestamp == at(0)
    replay.steer(SeekBy(3600))
    frame = poll(sampler)
    assert frame.snapshot.timestamp == at(SECONDS - 1) and replay.finished
    assert poll(sampler).snapshot.timestamp == at(SECONDS - 1)
    replay.steer(SeekBy(-60))
    assert poll(sampler).snapshot.timestamp == at(SECONDS - 61) and not replay.finished


def test_next_and_previous_advice_events(replay: ReplaySource):
    sampler = Sampler(replay, 1.0)
    frame = poll(sampler)
    events = frame.playback.events
    assert events and events == tuple(replay._recording.advice_events())  # noqa: SLF001 - the recording's own
    times = sorted({event.timestamp for event in events})
    replay.steer(SeekEvent(forward=True))
    assert poll(sampler).snapshot.timestamp == times[0]
    replay.steer(SeekEvent(forward=True))
    replay.steer(SeekEvent(forward=True))
    assert poll(sampler).snapshot.timestamp == times[2]
    replay.steer(SeekEvent(forward=False))
    assert poll(sampler).snapshot.timestamp == times[1]
    assert event_after(events, times[-1], forward=True) is None
    replay.steer(SeekTo(times[-1]))
    poll(sampler)
    replay.steer(SeekEvent(forward=True))  # none left: playing simply goes on
    assert poll(sampler).snapshot.timestamp == times[-1] + 1


def test_pause_shows_the_same_snapshot_without_growing_the_history(replay: ReplaySource):
    sampler = Sampler(replay, 1.0)
    poll(sampler)
    poll(sampler)
    replay.steer(TogglePause())
    paused = [poll(sampler) for _ in range(3)]
    assert {frame.snapshot.timestamp for frame in paused} == {at(1)}
    assert all(frame.playback.paused for frame in paused)
    assert len(sampler.history) == 2
    replay.steer(SeekBy(30))  # seeking while paused moves, and stays paused
    frame = poll(sampler)
    assert frame.snapshot.timestamp == at(31) and frame.playback.paused
    replay.steer(TogglePause())
    assert poll(sampler).snapshot.timestamp == at(32)


def test_a_seek_from_another_thread_answers_without_waiting_for_the_interval(replay: ReplaySource):
    """The sampler polls every 60 s here; the seek's frame must come long before (generous wait: 20 s)."""
    sampler = Sampler(replay, 60.0)
    arrived = threading.Event()
    sampler.subscribe(lambda frame: frame.snapshot.timestamp == at(500) and arrived.set())
    sampler.start()
    try:
        assert sampler.wait_for_first(20)
        replay.steer(SeekTo(at(500)))
        sampler.poll_soon()
        assert arrived.wait(20), "the seek waited for the next scheduled poll"
    finally:
        sampler.stop(5)


def test_a_gpu_selection_applies_to_the_lead_in_too(replay: ReplaySource):
    source = GpuSelectingSource(replay, GpuIds(("1",)))
    sampler = Sampler(source, 1.0)
    sampler.poll_once()
    replay.steer(SeekTo(at(400)))
    sampler.poll_once()
    assert sampler.history.device_indexes() == [1]
    frame = sampler.latest_frame
    assert frame is not None and frame.playback is not None and frame.playback.position == at(400)


def test_looping_after_a_seek_near_the_end_starts_again(recording: Path):
    source = ReplaySource(recording, loop=True)
    sampler = Sampler(source, 1.0)
    poll(sampler)
    source.steer(SeekTo(at(SECONDS - 2)))  # starts indexing; the seek waits for it
    assert source.wait_indexed(30)
    assert poll(sampler).snapshot.timestamp == at(SECONDS - 2)
    poll(sampler)
    wrapped = poll(sampler)
    assert wrapped.playback.position == at(0) and wrapped.snapshot.timestamp > at(SECONDS - 1)
    source.close()


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpusight", *args], capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "TZ": "UTC"})


def test_at_prints_the_snapshot_at_that_time(recording: Path):
    done = run_cli("--replay", str(recording), "--at", "00:12:30", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["timestamp"] == at(750)
    done = run_cli("--replay", str(recording), "--at", "+90s", "--json")
    assert json.loads(done.stdout)["timestamp"] == at(90)
    done = run_cli("--replay", str(recording), "--at", "+90s", "--gpus", "0", "--json")  # after the GPU check's poll
    assert json.loads(done.stdout)["timestamp"] == at(90)


def test_at_outside_the_recording_is_one_line_naming_its_span(recording: Path):
    done = run_cli("--replay", str(recording), "--at", "03:10", "--once")
    assert done.returncode == 1
    assert done.stderr == "gpusight: --at 03:10 is outside the recording (2025-11-23 00:00:00 to 00:19:59)\n"
    done = run_cli("--at", "03:10", "--once")
    assert done.returncode == 2 and "--at needs --replay" in done.stderr


def test_when_the_index_cannot_be_built_seeks_are_dropped_and_the_reason_shown(tmp_path: Path, recording: Path):
    path = tmp_path / recording.name
    path.write_bytes(recording.read_bytes())
    source = ReplaySource(path)  # plays from the open file
    path.unlink()  # and the index cannot open it any more
    sampler = Sampler(source, 1.0)
    source.steer(SeekTo(at(600)))
    assert source.wait_indexed(30) and source.index_error is not None
    frame = poll(sampler)
    assert frame.snapshot.timestamp == at(0) and frame.playback.end is None
    assert f"cannot seek in {path.name}" in [note.message for note in frame.snapshot.errors][-1]
    assert poll(sampler).snapshot.timestamp == at(1)
    source.close()
