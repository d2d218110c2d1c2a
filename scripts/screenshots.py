"""Regenerate ``screenshots/*.svg`` (and PNGs when ``rsvg-convert`` is installed) for every demo scenario.

Each scenario is drawn at 160x45 and 80x24 from two minutes of simulated history with a stopped
clock (every later poll repeats the last snapshot), so the pictures are the same on every machine. Usage: ``python scripts/screenshots.py [OUT_DIR]``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from gpusight.demo.frozen import frozen_demo_sampler
from gpusight.demo.source import SCENARIOS
from gpusight.ui.advice_panel import AdvicePanel
from gpusight.ui.app import GpusightApp

SIZES = ((160, 45), (80, 24))
"""Terminal sizes drawn for each scenario."""

def frozen_app(scenario: str) -> GpusightApp:
    """The app over ``scenario`` with its history filled and its clock stopped."""
    return GpusightApp(frozen_demo_sampler(scenario))


async def screenshot(scenario: str, size: tuple[int, int]) -> str:
    """SVG of ``scenario`` at ``size`` once the first live poll has been applied."""
    app = frozen_app(scenario)
    async with app.run_test(size=size) as pilot:
        for _ in range(200):
            if app.snapshots_applied >= 2:
                break
            await pilot.pause(0.02)
        app.query_one(AdvicePanel).show(app.snapshot, force=True)
        await pilot.pause()
        return app.export_screenshot(title=f"gpusight --demo {scenario}")


def main(argv: list[str]) -> int:
    """Write one SVG (and PNG) per scenario and size into the output folder."""
    out = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    os.environ["TZ"] = "UTC"
    time.tzset()
    converter = shutil.which("rsvg-convert")
    for scenario in SCENARIOS:
        for width, height in SIZES:
            svg_path = out / f"{scenario}-{width}x{height}.svg"
            svg_path.write_text(asyncio.run(screenshot(scenario, (width, height))), encoding="utf-8")
            written = [svg_path]
            if converter:
                png_path = svg_path.with_suffix(".png")
                subprocess.run([converter, str(svg_path), "-o", str(png_path)], check=True)
                written.append(png_path)
            print(" ".join(str(path) for path in written))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
