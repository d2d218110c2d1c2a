"""Regenerate ``screenshots/report-demo-run.png``: the HTML run report of a simulated run, shot by headless Chromium.

The run is ten minutes of demo scenarios one after another on a 4-GPU server (a healthy DDP job, an input-bound
job, the recording stopped for two minutes, a job with a straggler, then a trainer that stalls while a notebook
holds memory), written by the real sampler, advice engine and recording writer on a simulated clock. Needs Debian's
``chromium`` (driven by ``tests/support/chromium.py``). Usage: ``python scripts/report_screenshot.py [OUT.png]``.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from support.chromium import CHROMIUM, INSTALL, screenshot  # noqa: E402
from support.demo_run import Segment, record_demo_run  # noqa: E402

SEGMENTS = [Segment("healthy", 150), Segment("input-bound", 150, pause=120), Segment("imbalance", 150),
            Segment("stalls", 120)]
"""The simulated run."""

WINDOW = (1400, 3900)
"""Browser window (CSS pixels): the whole report of four GPUs."""


def main() -> int:
    """Record, report and shoot; prints the picture's path."""
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "screenshots" / "report-demo-run.png"
    if CHROMIUM is None:
        print(f"report_screenshot.py: {INSTALL}; nothing written", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as directory:
        recording = Path(directory) / "night-run.jsonl"
        record_demo_run(recording, SEGMENTS, interval=1.0, start=1_795_000_000.0)
        page = Path(directory) / "night-run.html"
        subprocess.run([sys.executable, "-m", "gpusight", "--report", str(recording), "-o", str(page)], check=True,
                       stdout=subprocess.DEVNULL)
        screenshot(page, out, WINDOW)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
