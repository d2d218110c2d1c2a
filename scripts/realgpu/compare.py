"""Compare a gpusight recording with the nvidia-smi streams taken beside it (harness phase ``fields``).

Usage: ``python scripts/realgpu/compare.py FIELDS_DIR`` (the folder holding ``precision.jsonl.gz``,
``smi-stream.csv``, ``dmon.txt``, ``dmon-gpm.txt`` and ``pmon-stream.txt``). Each gpusight snapshot is
paired with the nvidia-smi row nearest in time (within 0.3 s; within 0.6 s for the 1 s dmon/pmon
rows), and a Markdown table gives, per field, the pairs compared, the median and largest absolute
difference in gpusight's unit, and the exact matches. The nvidia-smi streams are read as UTC.
"""

from __future__ import annotations

import calendar
import gzip
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

MIB = 1 << 20

Row = dict[str, str]


def _utc(text: str) -> float:
    date, clock = text.strip().split(" ")
    whole, _, fraction = clock.partition(".")
    seconds = calendar.timegm(tuple(map(int, date.split("/"))) + tuple(map(int, whole.split(":"))) + (0, 0, 0))
    return seconds + float(f"0.{fraction or 0}")


def read_smi(path: Path) -> list[tuple[float, Row]]:
    """Rows of ``--query-gpu ... --format=csv,nounits`` keyed by their timestamp."""
    lines = [line for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]
    header = [h.strip().split(" [")[0] for h in lines[0].split(",")]
    rows = []
    for line in lines[1:]:
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == len(header) and cells[0][:2] == "20":
            row = dict(zip(header, cells, strict=True))
            rows.append((_utc(row["timestamp"]), row))
    return rows


def read_dmon(path: Path, day: str) -> list[tuple[float, Row]]:
    """Rows of ``dmon``/``pmon -o T`` (times of day on ``day``, 'YYYY/MM/DD')."""
    rows, header = [], []
    for line in path.read_text().splitlines():
        if line.startswith(("#Time", "#HH")):
            if line.startswith("#Time"):
                header = line[1:].split()
            continue
        cells = line.split()
        if header and len(cells) >= len(header) - 1 and ":" in cells[0]:
            rows.append((_utc(f"{day} {cells[0]}") + 0.5, dict(zip(header, cells, strict=False))))
    return rows


def nearest(rows: list[tuple[float, Row]], when: float, within: float) -> Row | None:
    """The row nearest to ``when``, if within ``within`` seconds."""
    best = min(rows, key=lambda r: abs(r[0] - when), default=None)
    return best[1] if best is not None and abs(best[0] - when) <= within else None


def number(text: str | None) -> float | None:
    """A number cell; None for N/A, '-' and the like."""
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def mask_names(text: str | None) -> tuple[str, ...] | None:
    """nvidia-smi's hexadecimal clocks-event mask decoded with gpusight's names."""
    from gpusight.snapshot.throttle import decode_throttle_reasons

    return None if text is None or not text.startswith("0x") else decode_throttle_reasons(int(text, 16))


Pick = Callable[[dict[str, Any]], Any]
SMI: list[tuple[str, Pick, str, Callable[[str | None], Any]]] = [
    ("utilization_gpu_percent", lambda d: d["utilization_gpu_percent"], "utilization.gpu", number),
    ("utilization_memory_percent", lambda d: d["utilization_memory_percent"], "utilization.memory", number),
    ("memory_used_bytes (MiB)", lambda d: d["memory_used_bytes"] / MIB, "memory.used", number),
    ("memory_total_bytes (MiB)", lambda d: d["memory_total_bytes"] / MIB, "memory.total", number),
    ("memory_reserved_bytes (MiB)", lambda d: d["memory_reserved_bytes"] / MIB, "memory.reserved", number),
    ("power_watts vs power.draw", lambda d: d["power_watts"], "power.draw", number),
    ("power_watts vs power.draw.average", lambda d: d["power_watts"], "power.draw.average", number),
    ("power_watts vs power.draw.instant", lambda d: d["power_watts"], "power.draw.instant", number),
    ("power_limit_watts", lambda d: d["power_limit_watts"], "enforced.power.limit", number),
    ("temperature_celsius", lambda d: d["temperature_celsius"], "temperature.gpu", number),
    ("fan_percent", lambda d: d["fan_percent"], "fan.speed", number),
    ("clock_sm_mhz", lambda d: d["clock_sm_mhz"], "clocks.current.sm", number),
    ("clock_memory_mhz", lambda d: d["clock_memory_mhz"], "clocks.current.memory", number),
    ("pstate", lambda d: d["pstate"], "pstate", lambda t: None if t is None else int(t.lstrip("P"))),
    ("throttle_reasons", lambda d: tuple(d["throttle_reasons"]), "clocks_event_reasons.active", mask_names),
    ("ecc_errors_uncorrected", lambda d: d["ecc_errors_uncorrected"], "ecc.errors.uncorrected.volatile.total", number),
    ("mig_mode", lambda d: d["mig_mode"], "mig.mode.current", lambda t: None if t is None else t == "Enabled"),
    ("compute_capability", lambda d: ".".join(map(str, d["compute_capability"])), "compute_cap", lambda t: t),
    ("name", lambda d: d["name"], "name", lambda t: t),
    ("uuid", lambda d: d["uuid"], "uuid", lambda t: t),
]
"""gpusight device field (how to read it, in nvidia-smi's unit), the --query-gpu column, how to parse it."""

DMON: list[tuple[str, Pick, str, str]] = [
    ("pcie_rx_bytes_per_s (MB/s) vs dmon rxpci", lambda d: d["pcie_rx_bytes_per_s"] / 1e6, "dmon", "rxpci"),
    ("pcie_tx_bytes_per_s (MB/s) vs dmon txpci", lambda d: d["pcie_tx_bytes_per_s"] / 1e6, "dmon", "txpci"),
    ("pcie_rx_bytes_per_s (MiB/s) vs GPM pcirx", lambda d: d["pcie_rx_bytes_per_s"] / MIB, "gpm", "pcirx"),
    ("pcie_tx_bytes_per_s (MiB/s) vs GPM pcitx", lambda d: d["pcie_tx_bytes_per_s"] / MIB, "gpm", "pcitx"),
    ("sm_active_percent vs GPM smutil", lambda d: d["sm_active_percent"], "gpm", "smutil"),
    ("sm_occupancy_percent vs GPM smocc", lambda d: d["sm_occupancy_percent"], "gpm", "smocc"),
    ("tensor_active_percent vs GPM mmaact", lambda d: d["tensor_active_percent"], "gpm", "mmaact"),
    ("dram_active_percent vs GPM dram", lambda d: d["dram_active_percent"], "gpm", "dram"),
]
"""gpusight device field against a dmon column (``dmon`` = -s pucvmet, ``gpm`` = --gpm-metrics)."""


def _row(name: str, pairs: list[tuple[Any, Any]]) -> str:
    numeric = [(a, b) for a, b in pairs if isinstance(a, (int, float)) and isinstance(b, (int, float))]
    equal = sum(1 for a, b in pairs if a == b)
    if numeric:
        diffs = [abs(a - b) for a, b in numeric]
        mean_g = statistics.fmean(a for a, _ in numeric)
        mean_s = statistics.fmean(b for _, b in numeric)
        return (f"| {name} | {len(pairs)} | {mean_g:.4g} | {mean_s:.4g} | {statistics.median(diffs):.3g} | "
                f"{max(diffs):.3g} | {equal} |")
    shown = sorted({f"{a!r} / {b!r}" for a, b in pairs})[:3]
    return f"| {name} | {len(pairs)} | {'; '.join(shown)} | | | | {equal} |"


def compare(folder: Path, recording: str = "precision.jsonl.gz") -> str:
    """The Markdown comparison table for the phase in ``folder``."""
    snapshots = [json.loads(line) for line in gzip.open(folder / recording, "rt") if line.strip()]
    smi = read_smi(folder / "smi-stream.csv")
    day = smi[0][1]["timestamp"].split(" ")[0]
    dmon = {"dmon": read_dmon(folder / "dmon.txt", day), "gpm": read_dmon(folder / "dmon-gpm.txt", day)}
    out = ["| gpusight field | pairs | gpusight mean | nvidia-smi mean | median abs diff | max abs diff | equal |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, pick, column, parse in SMI:
        pairs = []
        for snap in snapshots:
            row = nearest(smi, snap["timestamp"], 0.3)
            if row is not None and column in row and snap["devices"]:
                pairs.append((pick(snap["devices"][0]), parse(None if row[column] == "[N/A]" else row[column])))
        out.append(_row(name, pairs))
    for name, pick, stream, column in DMON:
        pairs = []
        for snap in snapshots:
            row = nearest(dmon[stream], snap["timestamp"], 0.6)
            device = snap["devices"][0] if snap["devices"] else None
            if row is not None and device is not None and number(row.get(column)) is not None:
                value = pick(device) if all(v is not None for v in device.values() if v is None) else None
                try:
                    value = pick(device)
                except TypeError:
                    value = None
                pairs.append((value, number(row[column])))
        out.append(_row(name, pairs))
    pmon = read_dmon(folder / "pmon-stream.txt", day) if (folder / "pmon-stream.txt").exists() else []
    for field, column in (("sm_percent", "sm"), ("gpu_memory_percent", "mem"), ("gpu_memory_bytes (MiB)", "fb")):
        pairs = []
        for snap in snapshots:
            for process in snap["processes"]:
                if process["role"] != "gpu":
                    continue
                rows = [r for t, r in pmon if abs(t - snap["timestamp"]) <= 0.6 and r.get("pid") == str(process["pid"])]
                if rows and number(rows[0].get(column)) is not None:
                    key = field.split(" ")[0]
                    value = process[key] / MIB if key == "gpu_memory_bytes" and process[key] is not None else process[key]
                    pairs.append((value, number(rows[0][column])))
        out.append(_row(f"process {field} vs pmon {column}", pairs))
    return "\n".join(out)


def energy_check(folder: Path, recording: str = "precision.jsonl.gz") -> str:
    """Energy counter growth against the mean power over the recording (both in watts)."""
    snapshots = [json.loads(line) for line in gzip.open(folder / recording, "rt") if line.strip()]
    points = [(s["timestamp"], s["devices"][0]["energy_joules"], s["devices"][0]["power_watts"]) for s in snapshots
              if s["devices"] and s["devices"][0]["energy_joules"] is not None]
    (t1, e1, _), (t2, e2, _) = points[0], points[-1]
    mean_power = statistics.fmean(p for _, _, p in points)
    return f"energy counter: {(e2 - e1) / (t2 - t1):.1f} W over {t2 - t1:.0f} s; mean power_watts {mean_power:.1f} W"


if __name__ == "__main__":
    target = Path(sys.argv[1])
    print(compare(target))
    print()
    print(energy_check(target))
