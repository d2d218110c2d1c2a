"""A terminal of a fixed size for the live TUI: a private tmux server, or a bare pty when tmux cannot run.

Used by the real-GPU harness to run ``gpusight`` at 160x45, press keys (``s`` exports an SVG of the
screen) and read the screen back (tmux only).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from support.terminal import PtyTerminal  # noqa: E402 - found through the path set just above


def find_tmux() -> str | None:
    """A tmux that runs here: ``$TMUX_BIN``, else the one on PATH; None when neither answers ``-V``."""
    for candidate in (os.environ.get("TMUX_BIN"), shutil.which("tmux")):
        if not candidate:
            continue
        try:
            subprocess.run([candidate, "-V"], check=True, capture_output=True, timeout=5)
        except (OSError, subprocess.SubprocessError):
            continue
        return candidate
    return None


class TmuxTerminal:
    """One detached tmux session running one command, on a private server socket."""

    def __init__(self, binary: str, name: str) -> None:
        self.binary = binary
        """The tmux executable."""
        self.name = name
        """Session (and socket) name."""
        self.pid: int | None = None
        """PID of the command in the pane."""

    def _tmux(self, *args: str) -> str:
        result = subprocess.run([self.binary, "-L", self.name, "-f", "/dev/null", *args],
                                capture_output=True, text=True, check=True, timeout=10)
        return result.stdout

    def start(self, argv: Sequence[str], size: tuple[int, int], env: Mapping[str, str]) -> int:
        """Run ``argv`` with ``env`` added in a ``size`` (columns, rows) session; the command's PID."""
        assignments = " ".join(f"{key}={shlex.quote(value)}" for key, value in env.items())
        command = f"exec env {assignments} {shlex.join(argv)}"
        self._tmux("new-session", "-d", "-s", self.name, "-x", str(size[0]), "-y", str(size[1]), command)
        self.pid = int(self._tmux("display-message", "-p", "-t", self.name, "#{pane_pid}").strip())
        return self.pid

    def keys(self, *keys: str) -> None:
        """Type ``keys`` (tmux key names)."""
        self._tmux("send-keys", "-t", self.name, *keys)

    def screen(self, escapes: bool = False) -> str:
        """The visible screen as text (with colour escapes when ``escapes``)."""
        return self._tmux("capture-pane", "-p", *(["-e"] if escapes else []), "-t", self.name)

    def close(self) -> None:
        """Kill the session's server (and with it the command, if still running)."""
        subprocess.run([self.binary, "-L", self.name, "kill-server"], capture_output=True, check=False, timeout=10)


class BarePty:
    """The command on a bare pty of the given size (the project's one pty helper); its screen is not read back."""

    def __init__(self, name: str) -> None:
        self.name = name
        """A label for logs."""
        self.pid: int | None = None
        """PID of the command."""
        self._terminal: PtyTerminal | None = None

    def start(self, argv: Sequence[str], size: tuple[int, int], env: Mapping[str, str]) -> int:
        """Run ``argv`` on a new pty of ``size`` (columns, rows); the command's PID."""
        self._terminal = PtyTerminal(argv, size, env={**os.environ, **env}, keep_output=False)
        self.pid = self._terminal.proc.pid
        return self.pid

    def keys(self, *keys: str) -> None:
        """Type ``keys`` (single characters only)."""
        assert self._terminal is not None
        self._terminal.send("".join(keys))

    def screen(self, escapes: bool = False) -> str:
        """Not available on a bare pty."""
        return ""

    def close(self) -> None:
        """Stop the command if it still runs (SIGTERM, then SIGKILL after 5 s) and close the pty."""
        if self._terminal is None:
            return
        self._terminal.proc.terminate()
        try:
            self._terminal.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass
        self._terminal.cleanup()


def open_terminal(name: str) -> TmuxTerminal | BarePty:
    """tmux when it runs here, else a bare pty."""
    binary = find_tmux()
    return TmuxTerminal(binary, name) if binary else BarePty(name)
