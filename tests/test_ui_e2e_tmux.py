"""End to end: the real ``gpusight --demo`` in a tmux terminal, read back with ``capture-pane``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (the CI script installs it)")

WAIT_SECONDS = 30.0


class Tmux:
    """A private tmux server (own socket) with one session running one command."""

    def __init__(self, socket: str) -> None:
        self.socket = socket

    def run(self, *args: str) -> str:
        result = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=True, timeout=10
        )
        return result.stdout

    def start(self, command: list[str], size: tuple[int, int], cwd: Path) -> int:
        # pytest's environment may hold COLUMNS and LINES (80x24), which Textual prefers to the terminal's size.
        shell = "exec env -u COLUMNS -u LINES " + " ".join(_quote(part) for part in command)
        self.run(
            "new-session", "-d", "-s", "gpusight", "-x", str(size[0]), "-y", str(size[1]), "-c", str(cwd),
            "-e", "TERM=xterm-256color", shell,
        )
        return int(self.run("display-message", "-p", "-t", "gpusight", "#{pane_pid}").strip())

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "gpusight")

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", "gpusight", *keys)

    def kill_server(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], check=False, capture_output=True, timeout=10)


def _quote(part: str) -> str:
    return "'" + part.replace("'", "'\\''") + "'"


def gpusight_command(*args: str) -> list[str]:
    """The installed console script, or the module when the script is not on PATH."""
    script = shutil.which("gpusight")
    return [script, *args] if script else [sys.executable, "-m", "gpusight", *args]


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    server = Tmux(f"gpusight-test-{os.getpid()}-{time.monotonic_ns()}")
    yield server
    server.kill_server()


@pytest.mark.parametrize("size", [(80, 24), (160, 45)])
def test_demo_runs_exports_and_quits(tmux: Tmux, tmp_path: Path, size: tuple[int, int]) -> None:
    export_dir = tmp_path / "exports"
    pid = tmux.start(gpusight_command("--demo", "--export-dir", str(export_dir)), size, tmp_path)
    wait_until(lambda: "simulated" in tmux.screen() and "H100" in tmux.screen(), "the demo screen")
    lines = tmux.screen().splitlines()
    assert "demo: mixed (simulated)" in lines[0]
    assert len(lines) <= size[1] and all(len(line) <= size[0] for line in lines)
    tmux.keys("s")
    def exported() -> list[str]:
        return sorted(p.suffix for p in export_dir.iterdir()) if export_dir.is_dir() else []

    # Files are written to temporary names and renamed, so wait for the final names.
    wait_until(lambda: exported() == [".html", ".json", ".md", ".svg"], "the four export files")
    tmux.keys("q")
    wait_until(lambda: not alive(pid), "gpusight to exit after q")


def test_killing_the_session_ends_gpusight(tmux: Tmux, tmp_path: Path) -> None:
    pid = tmux.start(gpusight_command("--demo", "healthy"), (160, 45), tmp_path)
    wait_until(lambda: "simulated" in tmux.screen(), "the demo screen")
    tmux.run("kill-session", "-t", "gpusight")
    wait_until(lambda: not alive(pid), "gpusight to exit after its terminal was closed (SIGHUP)")
