"""End to end: ``gpusight --replay`` of a run whose trainer reports its speed, in tmux at 80x24: Enter on the trainer
opens its detail screen with the speed figures, the stacked step-time breakdown and the histories; Esc closes it."""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_ui_e2e_tmux import Tmux, alive, wait_until

from gpusight.facts.speed import BREAKDOWN_FIELDS
from gpusight.recordings.replay import ReplaySource
from gpusight.ui.widgets.chart import STACK_GLYPHS
from support.speed import record_speed, trainer_pid

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (the CI script installs it)")

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    server = Tmux(f"gpusight-process-{os.getpid()}-{time.monotonic_ns()}")
    yield server
    server.kill_server()


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    return record_speed(tmp_path / "speed.jsonl", 900)


def test_the_process_detail_screen_in_a_real_terminal(tmux: Tmux, tmp_path: Path, recording: Path) -> None:
    source = ReplaySource(recording)
    pid = trainer_pid(source.poll())
    source.close()
    command = ["env", "TZ=UTC", f"PYTHONPATH={REPO}", sys.executable, "-m", "gpusight", "--replay", str(recording),
               "--at", "00:05"]
    gpusight = tmux.start(command, (80, 24), tmp_path)
    wait_until(lambda: f"replay: {recording.name}" in tmux.screen(), "the replay screen")
    tmux.keys("/")
    wait_until(lambda: "filter processes" in tmux.screen(), "the filter")
    tmux.keys(str(pid))
    wait_until(lambda: str(pid) in [line.strip() for line in tmux.screen().splitlines()], "the pid in the filter")
    tmux.keys("Enter")  # back to the table, which keeps the trainer
    wait_until(lambda: "Quit" in tmux.screen().splitlines()[-1], "the table with its keys")
    tmux.keys("Enter")
    wait_until(lambda: f"PID {pid}" in tmux.screen().splitlines()[0], "the process detail screen")
    screens: list[str] = []

    def whole() -> bool:  # one capture that holds all of it (a capture can fall between two frames' writes)
        screens.append(tmux.screen())
        lines = screens[-1].splitlines()
        return bool(lines) and "Back" in lines[-1] and all(
            text in screens[-1] for text in ("step time (device)", "HFU", "throughput", STACK_GLYPHS[0])
        )

    wait_until(whole, "the whole detail screen")
    screen = screens[-1]
    lines = screen.splitlines()
    assert len(lines) <= 24 and all(len(line) <= 80 for line in lines)
    assert f"PID {pid}" in lines[0] and "steps/s" in screen and "(counted)" in screen
    for _, label in BREAKDOWN_FIELDS:
        assert label in screen, screen
    assert STACK_GLYPHS[1] in screen and STACK_GLYPHS[0] in screen  # compute and data wait, stacked
    tmux.keys("Escape")
    wait_until(lambda: f"replay: {recording.name}" in tmux.screen(), "the main screen again")
    tmux.keys("q")
    wait_until(lambda: not alive(gpusight), "gpusight to exit after q")
