"""End to end: ``gpusight --replay FILE --at 03:10`` in a real terminal (tmux on a pty, read back with
``capture-pane``), steered with the replay keys: each answer shows on the position bar.

The waits are generous (a hang fails, a slow machine does not); the seek latency itself is measured in
benchmarks/replay_seek.py.
"""

from __future__ import annotations

import calendar
import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_ui_e2e_tmux import Tmux, alive, wait_until

from gpusight.recordings.opening import open_seekable
from support.recordings import write_demo_recording

pytestmark = pytest.mark.skipif(__import__("shutil").which("tmux") is None, reason="needs tmux")

INTERVAL = 10.0
"""The recording covers a whole day (00:00:00 to 23:59:50 UTC) every 10 s, the advice changing every 20 minutes."""

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The day in the compact format (the default for ``--record``), or as JSON lines where it is not available."""
    folder = tmp_path_factory.mktemp("pty")
    try:
        path = write_demo_recording(folder / "night.gpusight", 86400, interval=INTERVAL,
                                    scenarios=("healthy", "input-bound"), segment_s=1200)
    except NotImplementedError:
        path = write_demo_recording(folder / "night.jsonl.gz", 86400, interval=INTERVAL,
                                    scenarios=("healthy", "input-bound"), segment_s=1200)
    return path


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    server = Tmux(f"gpusight-replay-{os.getpid()}-{time.monotonic_ns()}")
    yield server
    server.kill_server()


BAR = re.compile(r"(▶ playing|❚❚ PAUSED) x(\d+)\s+(\d\d:\d\d:\d\d)  00:00:00 .* 23:59:50")


def bar(tmux: Tmux) -> tuple[str, int, str] | None:
    """(state, speed, position) from the position bar on screen, or None when it is not drawn."""
    for line in tmux.screen().splitlines():
        found = BAR.search(line)
        if found:
            return found[1], int(found[2]), found[3]
    return None


def clock(timestamp: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(timestamp))


def shows(tmux: Tmux, **expected: object) -> bool:
    now = bar(tmux)
    if now is None:
        return False
    state, speed, position = now
    return all({"state": state, "speed": speed, "position": position}[key] == value for key, value in expected.items())


def test_replay_at_a_time_then_steered_with_the_keys(tmux: Tmux, tmp_path: Path, recording: Path):
    command = ["env", "TZ=UTC", f"PYTHONPATH={REPO}", sys.executable, "-m", "gpusight", "--replay", str(recording),
               "--at", "03:10"]
    pid = tmux.start(command, (80, 24), tmp_path)
    wait_until(lambda: bar(tmux) is not None, "the position bar")
    assert bar(tmux)[2] >= "03:10:00" and bar(tmux)[2] < "03:11:00", tmux.screen()  # started at 03:10
    assert f"replay: {recording.name}" in tmux.screen().splitlines()[0]

    tmux.keys("Space")
    wait_until(lambda: shows(tmux, state="❚❚ PAUSED"), "pause")
    position = calendar.timegm(time.strptime("2025-11-23 " + bar(tmux)[2], "%Y-%m-%d %H:%M:%S"))
    for key, moved in (("]", 10), ("}", 70), ("[", 60), ("{", 0)):
        tmux.keys(key)
        wait_until(lambda moved=moved: shows(tmux, position=clock(position + moved)), f"{key} to move {moved} s")

    seekable = open_seekable(recording)
    following = min(event.timestamp for event in seekable.advice_events() if event.timestamp > position)
    seekable.close()
    tmux.keys(".")
    wait_until(lambda: shows(tmux, position=clock(following)), "the next advice event")

    tmux.keys(">", ">")
    wait_until(lambda: shows(tmux, speed=5, state="❚❚ PAUSED"), "speed x5")
    tmux.keys("Space")
    wait_until(lambda: shows(tmux, state="▶ playing"), "resume")
    wait_until(lambda: bar(tmux)[2] >= clock(following + 50), "playing at x5")  # a poll at x5 plays 50 s

    tmux.keys("G")
    wait_until(lambda: "Go to:" in tmux.screen(), "the go-to dialog")
    tmux.keys("01:30:00", "Enter")
    wait_until(lambda: bar(tmux) is not None and "01:30:00" <= bar(tmux)[2] < "01:31:00", "go to 01:30")
    tmux.keys("q")
    wait_until(lambda: not alive(pid), "gpusight to exit after q")
