"""The benchmark's results: the measurements, the targets from issue #6 and the Markdown report."""

from __future__ import annotations

import dataclasses
import os
import platform
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from peers import Peer
from ptyrun import PtyResult

MIB = 1 << 20
KIB = 1 << 10

MAIN_SIZE = (160, 45)
"""Terminal size the CPU, output and RSS targets are judged at."""


@dataclass(frozen=True)
class RunRecord:
    """One tool run in a pty."""

    tool: str
    """``gputop``, ``nvitop`` or ``nvtop``."""
    size: tuple[int, int]
    """Columns and rows."""
    interval_s: float
    """Refresh interval it ran at."""
    result: PtyResult
    """What it cost."""
    stats: dict | None
    """gputop's GPUTOP_STATS_FILE contents (None for peers or when missing)."""


@dataclass(frozen=True)
class Measurements:
    """Everything one benchmark run measured."""

    date: datetime
    """When (UTC)."""
    gputop_version: str
    """``gputop --version``."""
    peers: list[Peer]
    """Peers tried (with versions or the reason they were skipped)."""
    records: list[RunRecord]
    """Every pty run."""
    once_s: list[float]
    """Wall seconds of each ``gputop --once``."""
    import_s: dict[str, float]
    """Median import seconds per module."""
    day: dict
    """memory_day.py's result."""
    interval_s: float
    """Interval asked of every tool."""
    warmup_s: float
    """Warm-up before measuring."""
    measure_s: float
    """Measured seconds per run."""

    def find(self, tool: str, size: tuple[int, int]) -> RunRecord | None:
        """The run of ``tool`` at ``size``, or None."""
        return next((r for r in self.records if r.tool == tool and r.size == size), None)

    def as_dict(self) -> dict:
        """Plain data for JSON."""
        data = dataclasses.asdict(self)
        data["date"] = self.date.isoformat()
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Measurements:
        """Rebuild from ``as_dict`` output (to re-render a report from saved numbers)."""
        peers = [Peer(p["name"], None if p["argv"] is None else tuple(p["argv"]), p["version"], p["interval_s"],
                      p["reason"]) for p in data["peers"]]
        records = [RunRecord(r["tool"], (r["size"][0], r["size"][1]), r["interval_s"], PtyResult(**r["result"]),
                             r["stats"]) for r in data["records"]]
        fields = {k: v for k, v in data.items() if k not in ("date", "peers", "records")}
        return cls(date=datetime.fromisoformat(data["date"]), peers=peers, records=records, **fields)


@dataclass(frozen=True)
class Target:
    """One target of issue #6 and whether this run met it."""

    name: str
    """What is judged."""
    limit: str
    """The target in words."""
    measured: str
    """The measured value in words."""
    met: bool | None
    """True/False, or None when it could not be judged (a peer missing)."""


def machine_lines() -> list[str]:
    """CPU model, cores, kernel and Python."""
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return [
        f"- CPU: {model}, {os.cpu_count()} logical cores; memory {_mem_total()}",
        f"- OS: {platform.system()} {platform.release()} ({platform.machine()})",
        f"- Python {platform.python_version()} ({sys.executable})",
    ]


def _mem_total() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / (1 << 20):.1f} GiB"
    except OSError:
        pass
    return "unknown"


def _fmt(value: float | None, pattern: str) -> str:
    return "n/a" if value is None else pattern.format(value)


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "n/a"
    return f"{a / b:.2f}"


def _first_frame_met(on_pty: float | None, in_app: float | None) -> bool | None:
    """Judged on what reached the terminal; the in-app time (taken after a later refresh) only without it."""
    seen = on_pty if on_pty is not None else in_app
    return None if seen is None else seen <= 1.0


def targets(m: Measurements) -> list[Target]:
    """Judge the issue's targets."""
    out = []
    main = m.find("gputop", MAIN_SIZE)
    nvitop = m.find("nvitop", MAIN_SIZE)
    nvtop = m.find("nvtop", MAIN_SIZE)
    if main is not None:
        cpu = main.result.cpu_ms_per_s
        peer_cpu = nvitop.result.cpu_ms_per_s if nvitop else None
        out.append(Target("CPU at 160x45", "at most half of nvitop's",
                          f"{cpu:.1f} ms/s vs nvitop {_fmt(peer_cpu, '{:.1f}')} ms/s (ratio {_ratio(cpu, peer_cpu)})",
                          None if peer_cpu is None else cpu <= peer_cpu / 2))
        sent = main.result.bytes_per_s
        peer_sent = nvtop.result.bytes_per_s if nvtop else None
        out.append(Target("Terminal output at 160x45", "at most nvtop's bytes/s",
                          f"{sent / KIB:.2f} KiB/s vs nvtop {_fmt(None if peer_sent is None else peer_sent / KIB, '{:.2f}')}"
                          f" KiB/s (ratio {_ratio(sent, peer_sent)})",
                          None if peer_sent is None else sent <= peer_sent))
        out.append(Target("Peak RSS at 160x45", "at most 90 MiB", f"{main.result.peak_rss_bytes / MIB:.1f} MiB",
                          main.result.peak_rss_bytes <= 90 * MIB))
    for record in (r for r in m.records if r.tool == "gputop"):
        size = f"{record.size[0]}x{record.size[1]}"
        gap = record.stats["max_gap_s"] if record.stats else None
        out.append(Target(f"Sampler cadence at {size}", f"no gap above 1.5 x {record.interval_s:g} s",
                          f"max gap {_fmt(gap, '{:.3f}')} s ({record.stats['polls'] if record.stats else '?'} polls)",
                          None if gap is None else gap <= 1.5 * record.interval_s))
        first = record.stats.get("first_frame_s") if record.stats else None
        out.append(Target(f"First full frame at {size}", "within 1.0 s",
                          f"{_fmt(first, '{:.2f}')} s in-app, {_fmt(record.result.first_frame_s, '{:.2f}')} s seen on the pty",
                          _first_frame_met(record.result.first_frame_s, first)))
    once = max(m.once_s)
    out.append(Target("gputop --once", "within 1.5 s", f"median {sorted(m.once_s)[len(m.once_s) // 2]:.2f} s, worst {once:.2f} s",
                      once <= 1.5))
    growth = m.day["rss_end"] - m.day["rss_start"]
    out.append(Target(f"Memory growth over {m.day['simulated_hours']:g} simulated h", "under 5 MiB",
                      f"{growth / MIB:+.2f} MiB", growth < 5 * MIB))
    return out


def _grid_line(day: dict) -> list[str]:
    """The chart grid's share of the day, when the measurement has it (older raw files do not)."""
    if "grid_traced_bytes" not in day:
        return []
    columns = " + ".join(str(count) for count in day["grid_columns"])
    return [f"The chart grid alone holds {day['grid_traced_bytes'] / MIB:.2f} MiB at the end ({columns} columns"
            " per zoom level), traced by tracemalloc over the same day."]


def report_text(m: Measurements) -> str:
    """The whole Markdown report."""
    median_once = sorted(m.once_s)[len(m.once_s) // 2]
    lines = [
        "# gputop benchmark results",
        "",
        f"Written by `python benchmarks/run.py` on {m.date:%Y-%m-%d %H:%M} UTC. Not a test: nothing gates on it.",
        "",
        "## Machine and versions",
        "",
        *machine_lines(),
        f"- {m.gputop_version}",
    ]
    for peer in m.peers:
        lines.append(f"- {peer.name} {peer.version}" if peer.argv else f"- {peer.name}: skipped ({peer.reason})")
    lines += [
        "",
        "## Scenario",
        "",
        "The project's fake `libnvidia-ml.so.1` (tests/fakenvml) with 8 H100-like GPUs and 64 real sleeping",
        "processes (8 per GPU). Each `nvmlDeviceGetPcieThroughput` call blocks 20 ms; the GPUs expose neither",
        "the PCIe byte counters nor GPM. Every tool runs in a real pty (TERM=xterm-256color, no COLORTERM),",
        f"found the fake through LD_LIBRARY_PATH, default settings except the interval ({m.interval_s:g} s;",
        f"nvtop takes tenths of a second). Measured for {m.measure_s:g} s after a {m.warmup_s:g} s warm-up.",
        "",
        "## Live monitors",
        "",
        "| tool | size | interval | CPU ms/s | output KiB/s | peak RSS MiB | first frame s | max write gap s | sampler max gap s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in m.records:
        gap = r.stats["max_gap_s"] if r.stats else None
        lines.append(
            f"| {r.tool} | {r.size[0]}x{r.size[1]} | {r.interval_s:g} | {r.result.cpu_ms_per_s:.1f} | "
            f"{r.result.bytes_per_s / KIB:.2f} | {r.result.peak_rss_bytes / MIB:.1f} | "
            f"{_fmt(r.result.first_frame_s, '{:.2f}')} | {_fmt(r.result.max_write_gap_s, '{:.3f}')} | "
            f"{_fmt(gap, '{:.3f}')} |"
        )
    ratio_lines = []
    for size in sorted({r.size for r in m.records}, reverse=True):
        ours = m.find("gputop", size)
        for peer in ("nvitop", "nvtop"):
            theirs = m.find(peer, size)
            if ours is None or theirs is None:
                continue
            ratio_lines.append(
                f"| {size[0]}x{size[1]} | {peer} | {_ratio(ours.result.cpu_ms_per_s, theirs.result.cpu_ms_per_s)} | "
                f"{_ratio(ours.result.bytes_per_s, theirs.result.bytes_per_s)} | "
                f"{_ratio(ours.result.peak_rss_bytes, theirs.result.peak_rss_bytes)} |"
            )
    if ratio_lines:
        lines += ["", "Ratios gputop / peer (below 1: gputop uses less):", "",
                  "| size | peer | CPU | output | RSS |", "|---|---|---|---|---|", *ratio_lines]
    lines += [
        "",
        "- CPU: user + system time of the whole process tree per wall second.",
        "- First frame: from spawn to the end of the first output burst containing the last GPU's utilization.",
        "- Max write gap: longest pause between two terminal writes. The scenario's GPU figures are constant, so a "
        "tool that sends only changed cells may stay silent for a second (gputop: until its clock ticks).",
        "- Sampler max gap: gputop's own longest time between two poll starts (GPUTOP_STATS_FILE).",
        "",
        "## Start-up",
        "",
        (
            f"- `gputop --once` (stdout a pipe, 8 GPUs, 64 processes): median {median_once:.2f} s "
            f"over {len(m.once_s)} runs (includes the 0.3 s settle between its two polls)."
        ),
    ]
    for module, seconds in m.import_s.items():
        lines.append(f"- `import {module}`: {seconds * 1000:.0f} ms (median of {len(m.once_s)}, fresh interpreter)")
    d = m.day
    filled = _fmt(None if d["rss_filled"] is None else d["rss_filled"] / MIB, "{:.1f}")
    lines += [
        "",
        "## Memory over a simulated long run",
        "",
        f"{d['samples']} snapshots ({d['simulated_hours']:g} h at 4 Hz) of {d['devices']} GPUs and {d['processes']} processes",
        "pushed through the sampler's History, TimeGrid and AdviceEngine, process ids changing every 4 simulated hours:",
        (
            f"RSS {d['rss_start'] / MIB:.1f} MiB at the start, {filled} MiB once the {d['history_capacity']}-sample"
            f" history was full, {d['rss_end'] / MIB:.1f} MiB at the end ({d['wall_s']:.0f} s of wall time,"
            f" {d['wall_s'] / d['samples'] * 1000:.2f} ms per sample)."
        ),
        *_grid_line(d),
        "",
        "## Targets (issue #6)",
        "",
        "| target | limit | measured | met |",
        "|---|---|---|---|",
    ]
    for t in targets(m):
        verdict = "n/a" if t.met is None else ("yes" if t.met else "**no**")
        lines.append(f"| {t.name} | {t.limit} | {t.measured} | {verdict} |")
    return "\n".join(lines) + "\n"


def write_report(path: Path, m: Measurements) -> str:
    """Write the report to ``path`` and return its text."""
    text = report_text(m)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return text
