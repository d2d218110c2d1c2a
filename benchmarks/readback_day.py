"""How long reading a day back takes: ``--report``, ``--convert`` to JSON lines and ``--convert`` to Parquet of one
recording, each in a child process, for one or more gpusight source trees side by side (before and after a change).

The recording is one ``benchmarks/report_day.py --keep DIR`` wrote (the demo ``mixed`` server, 8 GPUs and 48
processes at 1 Hz, a ten-minute gap halfway): a day takes minutes to write, so it is written once and reused. Each
task runs as ``python -m gpusight ...`` with the tree as its working directory (so ``-m`` imports that tree's
``gpusight``); its wall time, CPU time (user + system) and peak resident memory come from ``wait4`` of that child
alone. Trees and tasks alternate, round by round, so a busy machine slows each alike. Usage::

    python benchmarks/report_day.py --hours 24 --format compact --keep /tmp/day
    python benchmarks/readback_day.py /tmp/day/day.gtr --tree before=/path/to/main --tree after=. \\
        --results benchmarks/RESULTS-readback.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

TASKS = {
    "report": lambda recording, out: ["--report", str(recording), "-o", str(out / "day.html"), "--force"],
    "convert jsonl": lambda recording, out: ["--convert", str(recording), str(out / "day.jsonl"), "--force"],
    "convert parquet": lambda recording, out: ["--convert", str(recording), str(out / "day.parquet"), "--force"],
}
"""The command-line arguments of each task, given the recording and an output folder."""


def run_task(tree: Path, args: list[str]) -> dict[str, float]:
    """Run ``python -m gpusight ARGS`` in ``tree``; its wall time, CPU seconds and peak RSS (MiB)."""
    started = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "gpusight", *args], cwd=tree, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    error = child.stderr.read().decode(errors="replace") if child.stderr else ""
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise RuntimeError(f"{args[0]} in {tree} failed: {error.strip()[-300:]}")
    return {"wall_s": round(wall, 2), "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
            "peak_rss_mib": round(usage.ru_maxrss / 1024, 1)}


def measure(recording: Path, trees: dict[str, Path], tasks: list[str], rounds: int) -> list[dict[str, object]]:
    """Every task on every tree, ``rounds`` times; the best (least CPU) round of each."""
    best: dict[tuple[str, str], dict[str, object]] = {}
    with tempfile.TemporaryDirectory() as directory:
        out = Path(directory)
        for _ in range(rounds):
            for task in tasks:
                for label, tree in trees.items():
                    if task == "convert parquet" and not (tree / "gpusight" / "convert" / "parquet.py").exists():
                        continue  # a tree from before Parquet
                    figures: dict[str, object] = {"tree": label, "task": task, **run_task(tree, TASKS[task](recording, out))}
                    print(json.dumps(figures), flush=True)
                    known = best.get((label, task))
                    if known is None or float(str(figures["cpu_s"])) < float(str(known["cpu_s"])):
                        best[(label, task)] = figures
    return list(best.values())


def write_results(path: Path, recording: Path, results: list[dict[str, object]], note: str) -> None:
    """Write the table of ``results`` to ``path``."""
    lines = [
        "# Reading a day back (`benchmarks/readback_day.py`)",
        "",
        f"One recording, `{recording.name}` ({recording.stat().st_size / 2**20:.1f} MiB, written by "
        "`benchmarks/report_day.py --hours 24 --format compact`: the demo `mixed` server, 8 GPUs and 48 processes at "
        "1 Hz, a ten-minute gap halfway), read back by each gpusight tree in a child process: wall time, CPU time "
        "(user + system) and peak resident memory of that child (`wait4`). The best of the rounds (least CPU) is kept.",
        "",
        "| tree | task | wall | CPU | peak RSS |",
        "| --- | --- | --- | --- | --- |",
        *(f"| {r['tree']} | {r['task']} | {r['wall_s']} s | {r['cpu_s']} s | {r['peak_rss_mib']} MiB |" for r in results),
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}. {note}".rstrip(),
        "",
    ]
    path.write_text("\n".join(lines))


def main() -> int:
    """Parse the flags, measure, print (and record) the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recording", type=Path, help="the recording to read back (report_day.py --keep writes one)")
    parser.add_argument("--tree", action="append", default=[], metavar="LABEL=DIR",
                        help="a gpusight source tree to measure, labelled (default: this one, as 'this')")
    parser.add_argument("--task", action="append", choices=sorted(TASKS), help="tasks to run (default: all)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of every task on every tree (default 1)")
    parser.add_argument("--results", type=Path, help="write the table to this Markdown file")
    parser.add_argument("--note", default="", help="a sentence for the results file (how busy the machine was)")
    args = parser.parse_args()
    trees = dict(t.split("=", 1) for t in args.tree) if args.tree else {"this": str(REPO)}
    results = measure(args.recording, {label: Path(tree) for label, tree in trees.items()},
                      args.task or list(TASKS), args.rounds)
    if args.results is not None:
        write_results(args.results, args.recording, results, args.note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
