"""What ``gpusight --convert FILE --to tensorboard DIR`` costs for a day at 1 Hz on an 8-GPU server; writes
benchmarks/RESULTS-convert.md.

Three figures:

* **event writing, a whole day**: 86,400 snapshots of the busy demo server (8 H100s; 600 distinct simulated
  seconds reused with the day's timestamps) turned into scalars and written as one event each with gpusight's own
  writer (gpusight/convert/tfevents.py): wall time, file size, records.
* **the tensorboard package's writer** for comparison: the same events built as ``Event``/``Summary`` protobufs
  and framed by ``tensorboard.summary.writer.record_writer.RecordWriter`` (its pure-Python CRC-32C), on the first
  ``--compare`` snapshots, per snapshot and scaled to a day. Skipped without the ``tensorboard`` package.
* **the whole conversion**, reading included: ``--sample`` snapshots recorded as JSON lines, gzip-compressed JSON
  lines and the compact format by the real writers, then converted by the real command path; per snapshot and
  scaled to a day.

Usage: ``python benchmarks/convert_day.py [--snapshots 86400] [--compare 5000] [--sample 3000] [--output FILE]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from gpusight.convert.copying import copy_snapshots
from gpusight.convert.tensorboard import convert_to_tensorboard
from gpusight.convert.tfevents import EventFileWriter
from gpusight.demo.source import DemoSource
from gpusight.recordings.opening import open_recorder
from gpusight.snapshot.model import Snapshot
from gpusight.tracker_scalars import snapshot_scalars

DAY = 86_400
"""Snapshots in a day at 1 Hz."""
DISTINCT = 600
"""Distinct demo snapshots the day is made of."""
START = 1_800_000_000.0
"""The simulated day's first timestamp."""


def demo_day(count: int) -> list[Snapshot]:
    """``DISTINCT`` simulated seconds of the busy demo server, repeated with the day's timestamps up to ``count``."""
    now = [START]
    source = DemoSource("mixed", clock=lambda: now[0])
    distinct = []
    for _ in range(min(count, DISTINCT)):
        distinct.append(source.poll())
        now[0] += 1.0
    return [dataclasses.replace(distinct[n % len(distinct)], timestamp=START + n) for n in range(count)]


def own_writer(snapshots: list[Snapshot], directory: Path) -> dict[str, float]:
    """Write ``snapshots`` with gpusight's event writer; seconds, bytes and scalars per event."""
    path = directory / "own.tfevents"
    began = time.perf_counter()
    writer = EventFileWriter(path)
    scalars = 0
    for number, snapshot in enumerate(snapshots):
        values = snapshot_scalars(snapshot)
        scalars += len(values)
        writer.write_scalars(snapshot.timestamp, number, values)
    writer.close()
    seconds = time.perf_counter() - began
    return {"seconds": seconds, "bytes": path.stat().st_size, "scalars_per_event": scalars / len(snapshots)}


def package_writer(snapshots: list[Snapshot], directory: Path) -> float | None:
    """Seconds for the tensorboard package's protobufs and record writer on ``snapshots``; None without the package."""
    try:
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.summary.writer.record_writer import RecordWriter
    except ImportError:
        return None
    began = time.perf_counter()
    with open(directory / "package.tfevents", "wb") as file:
        writer = RecordWriter(file)
        for number, snapshot in enumerate(snapshots):
            values = [summary_pb2.Summary.Value(tag=tag, simple_value=value) for tag, value in snapshot_scalars(snapshot)]
            event = event_pb2.Event(wall_time=snapshot.timestamp, step=number, summary=summary_pb2.Summary(value=values))
            writer.write(event.SerializeToString())
    return time.perf_counter() - began


def whole_conversion(snapshots: list[Snapshot], directory: Path, name: str) -> dict[str, float]:
    """Record ``snapshots`` to ``name`` with the real recorder, then time reading alone and the whole conversion."""
    source = directory / name
    recorder = open_recorder(source)
    for snapshot in snapshots:
        recorder.write(snapshot)
    recorder.close()
    began = time.perf_counter()
    copy_snapshots(source, lambda number, snapshot: None)
    reading = time.perf_counter() - began
    began = time.perf_counter()
    convert_to_tensorboard(source, directory / f"tb-{name}", force=False)
    total = time.perf_counter() - began
    return {"reading": reading, "total": total, "bytes": source.stat().st_size}


def main() -> None:
    """Measure and write the results file."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--snapshots", type=int, default=DAY)
    parser.add_argument("--compare", type=int, default=5000)
    parser.add_argument("--sample", type=int, default=3000)
    parser.add_argument("--output", type=Path, default=Path(__file__).with_name("RESULTS-convert.md"))
    args = parser.parse_args()
    snapshots = demo_day(max(args.snapshots, args.compare, args.sample))
    with tempfile.TemporaryDirectory() as temporary:
        directory = Path(temporary)
        own = own_writer(snapshots[: args.snapshots], directory)
        package = package_writer(snapshots[: args.compare], directory)
        whole = {name: whole_conversion(snapshots[: args.sample], directory, name) for name in ("day.jsonl", "day.jsonl.gz", "day.gtr")}
    per_own = own["seconds"] / args.snapshots
    lines = [
        "# gpusight --convert --to tensorboard: results",
        "",
        f"Produced by `python benchmarks/convert_day.py` on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC "
        "(a shared 2-vCPU VM, no GPU; other jobs running, so figures are noisy). Busy demo server: 8 H100s, "
        f"{own['scalars_per_event']:.0f} scalars per snapshot.",
        "",
        "| what | snapshots | seconds | per snapshot | a day at 1 Hz |",
        "|---|---|---|---|---|",
        f"| gpusight's event writer (scalars + TFRecord + CRC-32C) | {args.snapshots:,} | {own['seconds']:.1f} | "
        f"{per_own * 1e6:.0f} µs | {per_own * DAY:.1f} s, {own['bytes'] / 1e6:.0f} MB |",
    ]
    if package is not None:
        per = package / args.compare
        lines.append(f"| tensorboard package's protobufs + RecordWriter | {args.compare:,} | {package:.1f} | "
                     f"{per * 1e6:.0f} µs | {per * DAY:.1f} s |")
    for name, figures in whole.items():
        for part in ("reading", "total"):
            per = figures[part] / args.sample
            what = f"reading {name} ({figures['bytes'] / args.sample / 1e3:.1f} kB a snapshot)" if part == "reading" \
                else f"whole conversion of {name}"
            lines.append(f"| {what} | {args.sample:,} | {figures[part]:.1f} | {per * 1e3:.2f} ms | {per * DAY / 60:.1f} min |")
    lines += ["", "The event writer is gpusight's own because it is the faster of the two and needs no dependency "
              "(see gpusight/convert/tfevents.py); reading the recording costs more than writing the events."]
    text = "\n".join(lines) + "\n"
    args.output.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
