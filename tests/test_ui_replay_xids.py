"""A recording of the faulty demo, replayed: the Xid events that arrived during the run are marked on the position
bar, each once, and the latest is named in its label (issue 29)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_ui_app import run_app, screen_text, wait_for
from textual.pilot import Pilot

from gpusight.recordings.replay import ReplaySource
from gpusight.sampling.sampler import Sampler
from gpusight.ui.actions import ACTIONS
from gpusight.ui.main.app import GpusightApp
from gpusight.ui.main.playback_bar import PlaybackBar
from support.recordings import DAY_START, write_demo_recording
from support.timezone import utc  # noqa: F401 - autouse: local time is UTC here

SECONDS = 300
"""Length of the recording: the faulty demo's GPU 0 reports an Xid 94 at 90, 180 and 270 s."""


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo_recording(tmp_path_factory.mktemp("xids") / "faulty.jsonl", SECONDS, interval=2.0,
                                scenarios=("faulty",))


def skip_key() -> str:
    return next(entry.keys.split(",")[0] for entry in ACTIONS if entry.action == "skip(60)")


@pytest.mark.parametrize("size", [(80, 24), (160, 45)], ids=["80x24", "160x45"])
def test_xids_of_the_recording_are_marked_on_the_bar(recording: Path, size: tuple[int, int]) -> None:
    replay = ReplaySource(recording)
    assert replay.wait_indexed(30)
    app = GpusightApp(Sampler(replay, 3600.0))

    def bar_line() -> str:
        bar = app.query_one(PlaybackBar)
        return screen_text(app).splitlines()[bar.region.y]

    def position() -> float | None:
        frame = app.frame
        return None if frame is None or frame.playback is None else frame.playback.position

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        await wait_for(pilot, lambda: position() is not None)
        start = bar_line()
        assert "✕" not in start  # the Xids before the recording began are named, not marked
        assert "Xid 94 gpu0" in start
        for _ in range(4):
            before = position()
            await pilot.press(skip_key())
            await wait_for(pilot, lambda before=before: position() != before)
        assert position() == DAY_START + 240
        line = bar_line()
        assert "Xid 94 gpu0 00:03:00" in line  # the latest event played
        assert line.count("✕") == 2  # the events at 90 and 180 s, each once; the one at 270 s is yet to come
        bar = app.query_one(PlaybackBar)
        marks = [(index, event.timestamp, event.code) for index, event in bar.xids]
        assert len(marks) == len(set(marks)) == 4  # Xid 48 and 94 before the start, then two during the run
        assert (0, DAY_START + 90, 94) in marks and (0, DAY_START + 180, 94) in marks

    run_app(app, size, body)
