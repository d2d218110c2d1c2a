"""How long ``gpusight --report`` takes on a long recording, how much memory it holds, and how big the HTML is.

1. Writes a recording with the real writer (``open_recorder``: the compact format, or JSON lines for a ``.jsonl``
   name): the demo ``mixed`` server (8 GPUs, 48 processes with their DataLoader workers, every metric moving) polled
   through the real sampler and advice engine on a simulated clock at 1 Hz, for ``--hours`` hours, with the recording
   stopped for ten minutes halfway (a gap).
2. Runs ``python -m gpusight --report FILE -o OUT`` in a child process and reads its wall time, CPU time and peak
   resident memory (``getrusage`` of the child), and the HTML's size.

Prints one JSON line and, with ``--results``, rewrites ``benchmarks/RESULTS-report.md``'s row for this format and
length (the file keeps one row per format and length). Usage::

    python benchmarks/report_day.py --hours 1 --format jsonl
    python benchmarks/report_day.py --hours 24 --format compact --results benchmarks/RESULTS-report.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from support.demo_run import Segment, record_demo_run  # noqa: E402

SUFFIX = {"jsonl": ".jsonl", "jsonl.gz": ".jsonl.gz", "compact": ".gtr"}
"""File name ending that makes ``open_recorder`` write each format."""


def measure(hours: float, fmt: str, directory: Path, reuse: bool = False) -> dict[str, object]:
    """Write the recording (or, with ``reuse``, take the one already in ``directory``) and report it; the figures as a
    dict."""
    recording = directory / f"day{SUFFIX[fmt]}"
    half = hours * 3600 / 2
    started = time.perf_counter()
    if reuse:
        written = round(hours * 3600)
    else:
        written = record_demo_run(recording, [Segment("mixed", half, pause=600), Segment("mixed", half)], interval=1.0)
    write_s = time.perf_counter() - started
    page = directory / "day.html"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "gpusight", "--report", str(recording), "-o", str(page)], check=True,
                   stdout=subprocess.DEVNULL, cwd=REPO)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "format": fmt,
        "hours": hours,
        "snapshots": written,
        "recording_bytes": recording.stat().st_size,
        "write_s": round(write_s, 1),
        "report_wall_s": round(wall, 2),
        "report_cpu_s": round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 2),
        "report_peak_rss_mib": round(after.ru_maxrss / 1024, 1),
        "html_bytes": page.stat().st_size,
        "cpu_ms_per_snapshot": round(((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
                                     / written * 1000, 3),
    }


def _row(r: dict[str, object]) -> str:
    recording, html = float(str(r["recording_bytes"])), float(str(r["html_bytes"]))
    return (f"| {r['format']} | {r['hours']} | {r['snapshots']} | {recording / 2**20:.1f} MiB "
            f"| {r['report_wall_s']} s | {r['report_cpu_s']} s | {r['cpu_ms_per_snapshot']} ms "
            f"| {r['report_peak_rss_mib']} MiB | {html / 2**20:.2f} MiB |")


_HEADER = """# Run report benchmark (`benchmarks/report_day.py`)

`gpusight --report FILE` on a recording of the demo `mixed` server (8 GPUs, 48 processes with their DataLoader
workers, every metric moving) at 1 Hz, written by the real writer through the real sampler and advice engine, with
a ten-minute gap halfway. Report time, CPU and peak memory are the child process's (`getrusage`); the HTML size is
the whole self-contained file (uPlot included, about 52 KB). Each row is rewritten by
`python benchmarks/report_day.py --hours H --format F --results benchmarks/RESULTS-report.md`.
Before/after figures of the report and of `--convert` on one recording, gpusight trees side by side:
`benchmarks/RESULTS-readback.md` (`benchmarks/readback_day.py`).

| format | hours | snapshots | recording | report wall | report CPU | CPU per snapshot | peak RSS | HTML |
| --- | --- | --- | --- | --- | --- | --- | --- | --- |
"""


def write_results(path: Path, result: dict[str, object]) -> None:
    """Replace this format and length's row in ``path`` (creating the file with its header when missing)."""
    rows: dict[tuple[str, str], str] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            cells = [c.strip() for c in line.strip("|").split("|")]
            if line.startswith("| ") and len(cells) == 9 and cells[0] not in ("format", "---"):
                rows[(cells[0], cells[1])] = line
    rows[(str(result["format"]), str(result["hours"]))] = _row(result)
    machine = f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}."
    path.write_text(_HEADER + "\n".join(rows[k] for k in sorted(rows)) + f"\n\n{machine}\n")


def main() -> int:
    """Parse the flags, measure, print (and record) the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hours", type=float, default=24.0, help="simulated hours of recording (default 24)")
    parser.add_argument("--format", choices=sorted(SUFFIX), default="compact", help="recording format")
    parser.add_argument("--results", type=Path, help="rewrite this format and length's row of this Markdown file")
    parser.add_argument("--keep", type=Path, help="write the recording and HTML here instead of a temporary folder")
    parser.add_argument("--reuse", action="store_true",
                        help="with --keep: report the recording an earlier --keep run of the same hours wrote there "
                        "(a day takes minutes to write); benchmarks/readback_day.py times other trees on it")
    args = parser.parse_args()
    if args.reuse and (args.keep is None or not (args.keep / f"day{SUFFIX[args.format]}").exists()):
        parser.error("--reuse needs --keep DIR holding an earlier run's recording")
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        result = measure(args.hours, args.format, args.keep, reuse=args.reuse)
    else:
        with tempfile.TemporaryDirectory() as directory:
            result = measure(args.hours, args.format, Path(directory))
    print(json.dumps(result))
    if args.results is not None:
        write_results(args.results, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
