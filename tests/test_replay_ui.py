"""The replay keys and the position bar in the app (Textual Pilot): every replay key acts on a replay, none on
live or demo data, and the bar fits an 80x24 terminal."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_ui_app import demo_sampler, run_app, screen_text, wait_for
from textual.pilot import Pilot
from textual.widgets import Input

from gpusight.recordings.replay import ReplaySource
from gpusight.sampling.sampler import Sampler
from gpusight.sampling.steering import AdviceEvent, PlaybackState
from gpusight.snapshot.model import Severity
from gpusight.ui.actions import ACTIONS, REPLAY_ONLY
from gpusight.ui.dialogs.goto_dialog import GoToDialog
from gpusight.ui.dialogs.help_screen import HelpScreen
from gpusight.ui.main.app import GpusightApp
from gpusight.ui.main.playback_bar import PlaybackBar, bar_text
from support.recordings import DAY_START, write_demo_recording
from support.timezone import utc  # noqa: F401 - autouse: local time is UTC here

SECONDS = 900


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("replay-ui") / "run.jsonl.gz"
    return write_demo_recording(path, SECONDS, scenarios=("healthy", "input-bound"), segment_s=300)


def replay_app(recording: Path) -> GpusightApp:
    """The app on a replay polled only when asked (a one-hour interval), indexed before it starts."""
    replay = ReplaySource(recording)
    assert replay.wait_indexed(30)
    return GpusightApp(Sampler(replay, 3600.0))


def bar_line(app: GpusightApp) -> str:
    return next(line for line in screen_text(app).splitlines() if "x1" in line or " x" in line and "━" in line)


def position(app: GpusightApp) -> float | None:
    frame = app.frame
    return None if frame is None or frame.playback is None else frame.playback.position


def key_of(action: str) -> str:
    return next(entry.keys.split(",")[0] for entry in ACTIONS if entry.action == action)


def test_the_bar_fits_80x24_and_shows_the_span_speed_and_position(recording: Path):
    app = replay_app(recording)

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        await wait_for(pilot, lambda: position(app) is not None)
        bar = app.query_one(PlaybackBar)
        assert bar.display and bar.region.height == 1 and bar.region.width == 80
        lines = screen_text(app).splitlines()
        assert len(lines) == 24
        line = lines[bar.region.y]
        assert line.startswith("▶ playing x1   00:00:00  00:00:00 ●━")
        assert line.rstrip().endswith(" 00:14:59")
        assert "┃" in line  # advice ticks
        assert "Quit" in lines[-1]  # the footer is still there

    run_app(app, (80, 24), body)


def test_every_replay_key_steers_the_replay(recording: Path):
    app = replay_app(recording)

    async def press(pilot: Pilot, action: str) -> None:
        await pilot.press(key_of(action))

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        await wait_for(pilot, lambda: position(app) is not None)
        seen = set()

        async def check(action: str, expect) -> None:
            await press(pilot, action)
            await wait_for(pilot, lambda: expect(app.frame.playback))
            seen.add(action)

        await check("skip(60)", lambda s: s.position == DAY_START + 60)
        await check("skip(10)", lambda s: s.position == DAY_START + 70)
        await check("skip(-10)", lambda s: s.position == DAY_START + 60)
        await check("skip(-60)", lambda s: s.position == DAY_START)
        await check("speed(1)", lambda s: s.speed == 2)
        await check("speed(-1)", lambda s: s.speed == 1)
        await check("play_pause", lambda s: s.paused)
        await pilot.press("p")  # the live pause key pauses a replay's playback too
        await wait_for(pilot, lambda: not app.frame.playback.paused)
        assert not app.sampler.paused
        times = sorted({event.timestamp for event in app.frame.playback.events})
        await check("advice_event(1)", lambda s: s.position == times[0])
        await check("advice_event(1)", lambda s: s.position == times[1])
        await check("advice_event(-1)", lambda s: s.position == times[0])
        await press(pilot, "go_to")
        await wait_for(pilot, lambda: isinstance(app.screen, GoToDialog))
        await pilot.press(*"00:10:30", "enter")
        await wait_for(pilot, lambda: position(app) == DAY_START + 630)
        seen.add("go_to")
        assert "00:10:30" in bar_line(app)
        assert seen == {entry.action for entry in ACTIONS if entry.replay}
        assert {action.split("(")[0] for action in seen} == REPLAY_ONLY

    run_app(app, (80, 24), body)


def test_the_go_to_dialog_says_what_is_wrong_and_stays_open(recording: Path):
    app = replay_app(recording)

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        await wait_for(pilot, lambda: position(app) is not None)
        await pilot.press("G")
        await wait_for(pilot, lambda: isinstance(app.screen, GoToDialog))
        await pilot.press(*"05:00", "enter")
        await pilot.pause()
        assert isinstance(app.screen, GoToDialog)
        assert "05:00 is outside the recording (2025-11-23 00:00:00 to 00:14:59)" in screen_text(app)
        app.screen.query_one(Input).value = ""
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, GoToDialog))
        assert position(app) == DAY_START

    run_app(app, (100, 30), body)


def test_without_a_replay_the_keys_do_nothing_and_the_bar_is_hidden():
    app = GpusightApp(demo_sampler("healthy"))

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        assert not app.query_one(PlaybackBar).display
        before = app.frame
        await pilot.press("right_square_bracket", "G", "full_stop", "greater_than_sign", "space")
        await pilot.pause()
        assert app.frame is before and len(app.screen_stack) == 1
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        assert not any("(replay)" in keys for keys, _ in app.screen.rows)

    run_app(app, (100, 30), body)


def test_the_help_screen_lists_the_replay_keys_on_a_replay(recording: Path):
    app = replay_app(recording)

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        await wait_for(pilot, lambda: position(app) is not None)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        replay_rows = [keys for keys, _ in app.screen.rows if keys.endswith("(replay)")]
        assert replay_rows == [entry.keys_text for entry in ACTIONS if entry.replay]
        assert "] (replay)" in replay_rows and "G (replay)" in replay_rows

    run_app(app, (120, 50), body)


def state(**changes) -> PlaybackState:
    values = dict(start=DAY_START, end=DAY_START + 86399, position=DAY_START + 3 * 3600 + 600, speed=20,
                  paused=True, loop=False, events=())
    values.update(changes)
    return PlaybackState(**values)


def test_bar_text_marks_the_position_and_the_worst_advice_per_cell():
    events = (
        AdviceEvent(DAY_START + 43200, "a", Severity.INFO, "t", raised=True),
        AdviceEvent(DAY_START + 43210, "b", Severity.CRITICAL, "t", raised=True),
        AdviceEvent(DAY_START + 80000, "b", Severity.CRITICAL, "t", raised=False),
    )
    text = bar_text(state(events=events), 80)
    plain = text.plain
    assert len(plain) == 80
    assert plain.startswith("❚❚ PAUSED x20  03:10:00  00:00:00 ")
    assert plain.endswith(" 23:59:59")
    track = plain[len("❚❚ PAUSED x20  03:10:00  00:00:00 "):-len(" 23:59:59")]
    assert track.count("●") == 1 and track.index("●") == int(11400 / 86399 * len(track))
    assert track.count("┃") == 1  # one cell for both raisings; clearings get none
    tick = len("❚❚ PAUSED x20  03:10:00  00:00:00 ") + track.index("┃")
    assert any("red" in str(span.style) for span in text.spans if span.start <= tick < span.end)


def test_bar_text_in_ascii_while_indexing_and_across_days():
    assert bar_text(state(paused=False, speed=1, end=None), 80, ascii_mode=True).plain.endswith(" indexing...")
    days = bar_text(state(end=DAY_START + 2 * 86400), 100).plain
    assert " 11-23 03:10:00 " in days and days.endswith(" 11-25 00:00:00")
