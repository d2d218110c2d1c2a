"""Regenerate every terminal screenshot in ``screenshots/``: an SVG and a PNG of each.

- Every demo scenario at 160x45 and 80x24, from two minutes of simulated history with a stopped clock (every later
  poll repeats the last snapshot), so the pictures are the same on every machine.
- The cluster view: copies of its snapshot tests' SVGs (``tests/__snapshots__/test_cluster_ui/``); after a change to
  that view, run ``python -m pytest tests/test_cluster_ui.py --snapshot-update`` first.
- The real-GPU screenshots (``real-*.svg``) can only be taken on a GPU (``scripts/realgpu/harness.py``); their PNGs
  are drawn again from the SVGs kept in ``screenshots/``.

Each PNG is the SVG drawn by headless Chromium (Debian's ``chromium``, driven by ``tests/support/chromium.py``), at
least ``PNG_WIDTH`` pixels wide; without Chromium the script stops before writing anything. librsvg is not used: it drops the
non-breaking spaces that start each run of text in Textual's SVG, gluing words together and pushing indented rows
to the left edge.

Usage: ``python scripts/screenshots.py [OUT_DIR]`` (default ``screenshots/``).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from gpusight.demo.frozen import frozen_demo_sampler  # noqa: E402
from gpusight.demo.source import SCENARIOS  # noqa: E402
from gpusight.ui.main.advice_panel import AdvicePanel  # noqa: E402
from gpusight.ui.main.app import GpusightApp  # noqa: E402
from support.chromium import CHROMIUM, INSTALL, svg_size, svg_to_png  # noqa: E402

SIZES = ((160, 45), (80, 24))
"""Terminal sizes drawn for each scenario."""

CLUSTER_SNAPSHOTS = {
    "cluster-fleet-80x24": "test_cluster_ui/test_snapshot_fleet[size0].svg",
    "cluster-fleet-160x45": "test_cluster_ui/test_snapshot_fleet[size1].svg",
    "cluster-host-160x45": "test_cluster_ui/test_snapshot_host[size1].svg",
}
"""Cluster screenshots by name, and the snapshot test's SVG (under ``tests/__snapshots__``) each one copies."""

PNG_WIDTH = 1900
"""Device pixels a PNG is at least as wide as: the 80-column SVGs drawn twice their size, the 160-column ones at their
own (already twice the width the README shows them at), so text is sharp on high-density screens and every PNG
weighs 0.3 to 0.5 MB."""


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


def write_svgs(out: Path) -> list[Path]:
    """Write every SVG into ``out``: the demo scenarios drawn now, the cluster and real-GPU ones copied."""
    written = []
    for scenario in SCENARIOS:
        for width, height in SIZES:
            svg_path = out / f"{scenario}-{width}x{height}.svg"
            svg_path.write_text(asyncio.run(screenshot(scenario, (width, height))), encoding="utf-8")
            written.append(svg_path)
    for name, snapshot in CLUSTER_SNAPSHOTS.items():
        written.append(Path(shutil.copyfile(REPO / "tests" / "__snapshots__" / snapshot, out / f"{name}.svg")))
    for real in sorted((REPO / "screenshots").glob("real-*.svg")):
        written.append(real if out / real.name == real else Path(shutil.copyfile(real, out / real.name)))
    return written


def main(argv: list[str]) -> int:
    """Write each SVG and its PNG into the output folder, printing both paths."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", nargs="?", type=Path, default=REPO / "screenshots", help="folder to write into")
    out = parser.parse_args(argv[1:]).out
    if CHROMIUM is None:
        print(f"screenshots.py: {INSTALL}; nothing written", file=sys.stderr)
        return 1
    out.mkdir(parents=True, exist_ok=True)
    os.environ["TZ"] = "UTC"
    time.tzset()
    for svg_path in write_svgs(out):
        png_path = out / f"{svg_path.stem}.png"
        width, _ = svg_size(svg_path.read_text(encoding="utf-8"))
        svg_to_png(svg_path, png_path, scale=math.ceil(PNG_WIDTH / width))
        print(svg_path, png_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
