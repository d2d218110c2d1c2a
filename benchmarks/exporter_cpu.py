"""CPU of ``gpusight --serve`` scraped every second against ``gpusight --record FILE`` (no terminal), both at 1 s.

The benchmark machine of ``scenario.py``/``mover.py`` (8 fake GPUs, 64 real processes, every figure moving, a
process replaced every 5 s). Each run measures both, one after the other, alternating which goes first, the mover
restarted at time 0 before each. ``--serve`` is scraped every ``--scrape-period`` seconds from this process (as
Prometheus would, with ``Accept-Encoding: gzip``); the scraper's own CPU is not counted, the exporter's process
tree's is. The ratio serve / record is taken within each run. Prints a Markdown report; ``--results FILE`` also
puts it into FILE as its "Exporter" section (replacing an older one)::

    python benchmarks/exporter_cpu.py [--runs 3] [--warmup 5] [--measure 20] [--results benchmarks/RESULTS-cluster.md]
"""

from __future__ import annotations

import argparse
import gzip
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

import psutil
from bench_env import base_env, gpusight_env, precompile
from mover import bench_machine
from ptyrun import tree_cpu
from scenario import REPO

sys.path.insert(0, str(REPO / "tests"))
from support.exporter import gpusight_serve_argv, read_announcement, terminate  # noqa: E402

SECTION = "## Exporter: `gpusight --serve` against `gpusight --record`"
"""Heading of the section this script owns in RESULTS-cluster.md."""


@dataclass
class Sample:
    """One measured run of one mode."""

    mode: str
    """``serve`` or ``record``."""
    cpu_ms_per_s: float
    """CPU of the process tree per wall second while measured."""
    scrapes: int = 0
    """Scrapes answered while measured (serve only)."""
    body_bytes: int = 0
    """Size of the last scrape's body, uncompressed (serve only)."""
    gzip_bytes: int = 0
    """Size of the last scrape's body as sent with gzip (serve only)."""
    scrape_ms: float = 0.0
    """Median wall time of a scrape as seen by the scraper (serve only)."""


class Scraper:
    """GETs ``url`` every ``period`` seconds on a thread, as Prometheus does (gzip accepted)."""

    def __init__(self, url: str, period: float) -> None:
        self.url = url
        """Where to scrape."""
        self.period = period
        """Seconds between scrapes."""
        self.count = 0
        """Scrapes answered with 200."""
        self.body_bytes = 0
        """Uncompressed size of the last body."""
        self.gzip_bytes = 0
        """Sent size of the last body."""
        self.durations: list[float] = []
        """Wall seconds of each scrape."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        """Start scraping."""
        self._thread.start()

    def reset(self) -> None:
        """Forget the counts so far (end of the warm-up)."""
        self.count, self.durations = 0, []

    def stop(self) -> None:
        """Stop scraping."""
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            started = time.monotonic()
            request = urllib.request.Request(self.url, headers={"Accept-Encoding": "gzip"})
            with urllib.request.urlopen(request, timeout=10) as response:
                sent = response.read()
                encoded = response.headers.get("Content-Encoding") == "gzip"
            self.durations.append(time.monotonic() - started)
            self.gzip_bytes = len(sent)
            self.body_bytes = len(gzip.decompress(sent)) if encoded else len(sent)
            self.count += 1
            next_at += self.period
            self._stop.wait(max(0.0, next_at - time.monotonic()))


def _measure(proc: subprocess.Popen[bytes], warmup: float, seconds: float, scraper: Scraper | None) -> float:
    """CPU ms per second of ``proc``'s tree over ``seconds`` after ``warmup``."""
    root = psutil.Process(proc.pid)
    time.sleep(warmup)
    if scraper is not None:
        scraper.reset()
    cpu, wall = tree_cpu(root), time.monotonic()
    time.sleep(seconds)
    return 1000.0 * (tree_cpu(root) - cpu) / (time.monotonic() - wall)


def run_serve(env: dict[str, str], args: argparse.Namespace) -> Sample:
    """Start ``gpusight --serve``, scrape it, measure it."""
    proc = subprocess.Popen(gpusight_serve_argv("--interval", "1"), env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        scraper = Scraper(read_announcement(proc) + "/metrics", args.scrape_period)
        scraper.start()
        try:
            cpu = _measure(proc, args.warmup, args.measure, scraper)
        finally:
            scraper.stop()
        return Sample("serve", cpu, scraper.count, scraper.body_bytes, scraper.gzip_bytes,
                      1000.0 * statistics.median(scraper.durations) if scraper.durations else 0.0)
    finally:
        terminate(proc, timeout=15.0)


def run_record(env: dict[str, str], args: argparse.Namespace, path: Path) -> Sample:
    """Start ``gpusight --record FILE`` without a terminal, measure it."""
    proc = subprocess.Popen([sys.executable, "-m", "gpusight", "--record", str(path), "--interval", "1"], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        return Sample("record", _measure(proc, args.warmup, args.measure, None))
    finally:
        terminate(proc, timeout=15.0)


def report(samples: list[tuple[Sample, Sample]], args: argparse.Namespace) -> str:
    """The Markdown section."""
    ratios = [serve.cpu_ms_per_s / record.cpu_ms_per_s for serve, record in samples]
    median_ratio = statistics.median(ratios)
    lines = [
        SECTION, "",
        f"Written by `python benchmarks/exporter_cpu.py --runs {args.runs} --warmup {args.warmup:g} "
        f"--measure {args.measure:g}` on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC "
        f"({platform.machine()}, {psutil.cpu_count()} logical CPUs, load average "
        f"{psutil.getloadavg()[0]:.2f} at the end; run.py does not write this section).",
        "",
        "The benchmark machine (8 fake GPUs, 64 real processes, moving figures, a process replaced every 5 s). Both at "
        f"`--interval 1`; `--serve` scraped every {args.scrape_period:g} s with `Accept-Encoding: gzip`. CPU is the "
        f"process tree's over {args.measure:g} s after a {args.warmup:g} s warm-up; each run measures both modes, "
        "alternating which goes first. Target: `--serve` CPU ≤ `--record` CPU.",
        "",
        "| run | first | `--serve` CPU ms/s | `--record` CPU ms/s | serve ÷ record | scrapes | body KiB (gzip KiB) | "
        "scrape ms (median) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for number, ((serve, record), ratio) in enumerate(zip(samples, ratios, strict=True), start=1):
        first = "serve" if number % 2 else "record"
        lines.append(f"| {number} | {first} | {serve.cpu_ms_per_s:.1f} | {record.cpu_ms_per_s:.1f} | {ratio:.2f} | "
                     f"{serve.scrapes} | {serve.body_bytes / 1024:.1f} ({serve.gzip_bytes / 1024:.1f}) | "
                     f"{serve.scrape_ms:.1f} |")
    verdict = "met" if median_ratio <= 1.0 else "**missed**"
    lines += ["", f"Median serve ÷ record: {median_ratio:.2f} ≤ 1 {verdict}.", ""]
    return "\n".join(lines)


def put_section(path: Path, section: str) -> None:
    """Replace this script's section of ``path`` (or append it)."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    if SECTION in text:
        before, _, rest = text.partition(SECTION)
        following = rest.find("\n## ")
        text = before + section + ("" if following < 0 else rest[following + 1:])
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """Run the comparison and print (and optionally store) the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs, each measuring both modes (default 3)")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds before measuring (default 5)")
    parser.add_argument("--measure", type=float, default=20.0, help="seconds measured (default 20)")
    parser.add_argument("--scrape-period", type=float, default=1.0, help="seconds between scrapes (default 1)")
    parser.add_argument("--results", type=Path, help="also put the report into this Markdown file")
    parser.add_argument("--json", type=Path, help="also write the raw figures as JSON here")
    args = parser.parse_args(argv)
    samples: list[tuple[Sample, Sample]] = []
    with tempfile.TemporaryDirectory() as folder, bench_machine(Path(folder)) as machine:
        env = machine.env(gpusight_env(base_env(Path(folder))))
        precompile(env)
        for number in range(args.runs):
            results = {}
            for mode in ("serve", "record") if number % 2 == 0 else ("record", "serve"):
                machine.mover.restart(moving=True)
                print(f"exporter_cpu: run {number + 1}, {mode}", file=sys.stderr)
                results[mode] = run_serve(env, args) if mode == "serve" else \
                    run_record(env, args, Path(folder) / f"record-{number}.jsonl")
            samples.append((results["serve"], results["record"]))
    section = report(samples, args)
    print(section)
    if args.results is not None:
        put_section(args.results, section)
    if args.json is not None:
        args.json.write_text(json.dumps([[asdict(s), asdict(r)] for s, r in samples], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
