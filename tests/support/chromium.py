"""Headless Chromium (Debian's ``chromium``) from the command line: load a page, dump its DOM or take a screenshot.

The one driver for the report's browser tests, ``scripts/report_screenshot.py`` and ``scripts/screenshots.py``. It
runs without a sandbox (root in CI), with a throwaway profile and background networking off. ``svg_to_png`` renders
an SVG (a Textual screenshot) to a PNG of the SVG's own size; librsvg cannot be used for these, as it drops the
non-breaking spaces that start a ``<text>`` run, which is how Textual writes every run of spaces.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import tempfile
from html import escape
from pathlib import Path

CHROMIUM = shutil.which("chromium")
"""The ``chromium`` executable, or None when it is not installed."""

INSTALL = "chromium is not installed (apt-get install chromium)"
"""What to say when it is missing."""

MIN_HEIGHT = 180
"""The shortest SVG ``svg_to_png`` draws, in pixels: headless Chromium (156) leaves the lower part of a window under
about 150 pixels tall unpainted, so the picture would be cut off."""


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


def svg_size(svg: str) -> tuple[float, float]:
    """Width and height of an SVG from its ``viewBox``, in CSS pixels."""
    match = re.search(r'viewBox="\s*[-\d.]+[\s,]+[-\d.]+[\s,]+([\d.]+)[\s,]+([\d.]+)\s*"', svg)
    if match is None:
        raise ValueError("the SVG has no viewBox")
    return float(match.group(1)), float(match.group(2))


def svg_to_png(svg: Path, png: Path, scale: int = 2) -> None:
    """Render ``svg`` to ``png`` at ``scale`` device pixels to the SVG's pixel, the SVG's size and nothing around it.

    The SVG is shown as an image (so it fetches nothing, not even the web fonts it names) on a transparent page
    exactly its size, rounded up to whole pixels.
    """
    width, height = svg_size(svg.read_text(encoding="utf-8"))
    if height < MIN_HEIGHT:
        raise ValueError(f"{svg} is {height} pixels tall; headless Chromium draws only {MIN_HEIGHT} or more in full")
    with tempfile.TemporaryDirectory() as directory:
        page = Path(directory) / "svg.html"
        page.write_text(
            '<!doctype html><meta charset="utf-8"><style>html, body { margin: 0; background: transparent; }'
            f' img {{ display: block; width: {width}px; height: {height}px; }}</style>'
            f'<img src="{escape(svg.resolve().as_uri())}">',
            encoding="utf-8",
        )
        screenshot(page, png, (math.ceil(width), math.ceil(height)), scale=scale, transparent=True)
