"""Headless Chromium (Debian's ``chromium``) from the command line: load a page, dump its DOM or take a screenshot.

The one driver for the report's browser tests and ``scripts/report_screenshot.py``. It runs without a sandbox (root
in CI), with a throwaway profile and background networking off.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

CHROMIUM = shutil.which("chromium")
"""The ``chromium`` executable, or None when it is not installed."""

INSTALL = "chromium is not installed (apt-get install chromium)"
"""What to say when it is missing."""


class ChromiumError(RuntimeError):
    """Chromium is missing, or it did not write what it was asked for."""


def chromium(page: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium on ``page`` with ``args``; raises ChromiumError when it is not installed."""
    if CHROMIUM is None:
        raise ChromiumError(INSTALL)
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
             f"--user-data-dir={profile}", "--virtual-time-budget=10000", *args, page.as_uri()],
            capture_output=True, text=True, timeout=120,
        )


def screenshot(page: Path, out: Path, window: tuple[int, int], scale: int = 1, transparent: bool = False) -> None:
    """Shoot ``page`` in a ``window`` of CSS pixels, without scrollbars, ``scale`` device pixels to a CSS pixel.

    ``transparent`` leaves what the page does not paint transparent rather than white.
    """
    out.unlink(missing_ok=True)
    background = ["--default-background-color=00000000"] if transparent else []
    result = chromium(page, "--hide-scrollbars", f"--window-size={window[0]},{window[1]}",
                      f"--force-device-scale-factor={scale}", *background, f"--screenshot={out.resolve()}")
    if result.returncode != 0 or not out.exists():
        raise ChromiumError(f"chromium could not shoot {page} (exit {result.returncode}): {result.stderr[-2000:]}")
