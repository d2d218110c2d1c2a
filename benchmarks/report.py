"""The benchmark's results: the measurements, the targets and the Markdown report (and the README's table)."""

from __future__ import annotations

import dataclasses
import os
import platform
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from peers import Peer
from ptyrun import PtyResult

MIB = 1 << 20
KIB = 1 << 10

PEERS = ("nvitop", "nvtop")
"""The peers, in table order."""

RSS_LIMIT_MIB = 90
"""gpusight's peak RSS target."""

FIRST_FRAME_LIMIT_S = 0.6
"""gpusight's first-frame target."""

CPU_LIMIT_FAST = 0.5
"""Target for gpusight's CPU over nvitop's at the fast interval."""

CPU_LIMIT_DEFAULT = 1.0
"""Target for gpusight's CPU over nvitop's, each at its default interval."""

OUTPUT_LIMIT = 1.0
"""Target for gpusight's terminal bytes over nvitop's, at every point."""

COMMAND = "python benchmarks/run.py"
"""How the benchmark is run."""


@dataclass(frozen=True)
class RunRecord:
    """One tool run in a pty."""

    tool: str
    """``gpusight``, ``nvitop`` or ``nvtop``."""
    data: str
    """``moving`` (the main scenario), ``constant`` (the old, unchanging one) or ``replay`` (gpusight --replay)."""
    size: tuple[int, int]
    """Columns and rows."""
    interval_s: float
    """Refresh interval it ran at."""
    default_interval: bool
    """True when it ran without an interval option (its own default)."""
    result: PtyResult
    """What it cost."""
    stats: dict[str, Any] | None
    """gpusight's GPUSIGHT_STATS_FILE contents (None for peers or when missing)."""
    mover: dict[str, int]
    """What the mover did during the run: ``writes`` (scenario files written) and ``churned`` (processes replaced)."""


@dataclass(frozen=True)
class Measurements:
    """Everything one benchmark run measured."""

    date: datetime
    """When (UTC)."""
    gpusight_version: str
    """``gpusight --version``."""
    peers: list[Peer]
    """Peers tried (with versions or the reason they were skipped)."""
    records: list[RunRecord]
    """Every pty run."""
    once_s: list[float]
    """Wall seconds of each ``gpusight --once``."""
    import_s: dict[str, float]
    """Median import seconds per module."""
    day: dict[str, Any]
    """memory_day.py's result."""
    recording: dict[str, Any]
    """Summary of the recording the replay rows play (run.summarize_recording)."""
    interval_s: float
    """The fast interval asked of every tool."""
    warmup_s: float
    """Warm-up before measuring."""
    measure_s: float
    """Measured seconds per run."""

    def find(self, tool: str, data: str, size: tuple[int, int], default_interval: bool) -> RunRecord | None:
        """The run of ``tool`` on ``data`` at ``size`` and at its default or the fast interval, or None."""
        return next((r for r in self.records if r.tool == tool and r.data == data and r.size == size
                     and r.default_interval == default_interval), None)

    def sizes(self) -> list[tuple[int, int]]:
        """Terminal sizes of the moving runs, in run order."""
        return list(dict.fromkeys(r.size for r in self.records if r.data == "moving"))

    def as_dict(self) -> dict[str, Any]:
        """Plain data for JSON."""
        data = dataclasses.asdict(self)
        data["date"] = self.date.isoformat()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Measurements:
        """Rebuild from ``as_dict`` output (to re-render a report from saved numbers)."""
        peers = [Peer(**{**p, "argv": None if p["argv"] is None else tuple(p["argv"])}) for p in data["peers"]]
        records = [RunRecord(**{**r, "size": tuple(r["size"]), "result": PtyResult(**r["result"])})
                   for r in data["records"]]
        fields = {k: v for k, v in data.items() if k not in ("date", "peers", "records")}
        return cls(date=datetime.fromisoformat(data["date"]), peers=peers, records=records, **fields)


@dataclass(frozen=True)
class Target:
    """One target and whether this run met it."""

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


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def _verdict(met: bool | None) -> str:
    return "n/a" if met is None else ("met" if met else "**missed**")


def _judged(value: float | None, limit: float, pattern: str) -> str:
    """``value`` against ``limit``: ``0.47 ≤ 0.5 met``."""
    if value is None:
        return "n/a"
    return f"{pattern.format(value)} ≤ {limit:g} {_verdict(value <= limit)}"


def _size(size: tuple[int, int]) -> str:
    return f"{size[0]}x{size[1]}"


def _first_frame(record: RunRecord) -> float | None:
    """Judged on what reached the terminal; gpusight's in-app time only when the pty never showed the marker."""
    if record.result.first_frame_s is not None:
        return record.result.first_frame_s
    return record.stats.get("first_frame_s") if record.stats else None


def _point(m: Measurements, size: tuple[int, int], default_interval: bool) -> list[RunRecord | None]:
    """gpusight's, nvitop's and nvtop's moving runs at one point."""
    return [m.find(tool, "moving", size, default_interval) for tool in ("gpusight", *PEERS)]


def _interval_cell(runs: list[RunRecord | None], default_interval: bool) -> str:
    named = [f"{r.tool} {r.interval_s:g}" for r in runs if r is not None]
    return ("defaults: " if default_interval else "") + " / ".join(named) + " s"


def _triple(runs: list[RunRecord | None], value: str) -> str:
    """One figure of gpusight / nvitop / nvtop."""
    cells = []
    for r in runs:
        if r is None:
            cells.append("n/a")
        elif value == "cpu":
            cells.append(f"{r.result.cpu_ms_per_s:.1f}")
        else:
            cells.append(f"{r.result.bytes_per_s / KIB:.2f}")
    return " / ".join(cells)


def headline_table(m: Measurements) -> list[str]:
    """The headline: per point, gpusight beside nvitop and nvtop from this one run, ratios and targets."""
    lines = [
        "| size | interval | CPU ms/s gpusight / nvitop / nvtop | CPU gpusight ÷ nvitop | "
        "output KiB/s gpusight / nvitop / nvtop | output gpusight ÷ nvitop | gpusight peak RSS MiB | gpusight first frame s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for size in m.sizes():
        for default_interval in (False, True):
            runs = _point(m, size, default_interval)
            ours, nvitop = runs[0], runs[1]
            if ours is None:
                continue
            cpu_limit = CPU_LIMIT_DEFAULT if default_interval else CPU_LIMIT_FAST
            cpu = _ratio(ours.result.cpu_ms_per_s, nvitop.result.cpu_ms_per_s if nvitop else None)
            sent = _ratio(ours.result.bytes_per_s, nvitop.result.bytes_per_s if nvitop else None)
            lines.append(
                f"| {_size(size)} | {_interval_cell(runs, default_interval)} | {_triple(runs, 'cpu')} | "
                f"{_judged(cpu, cpu_limit, '{:.2f}')} | {_triple(runs, 'bytes')} | {_judged(sent, OUTPUT_LIMIT, '{:.2f}')} | "
                f"{_judged(ours.result.peak_rss_bytes / MIB, RSS_LIMIT_MIB, '{:.1f}')} | "
                f"{_judged(_first_frame(ours), FIRST_FRAME_LIMIT_S, '{:.2f}')} |"
            )
    return lines


def scenario_sentence(m: Measurements) -> str:
    """What the headline measured, in one paragraph."""
    return (
        "8 H100-like GPUs, 64 real processes, every GPU figure moving (sine waves of 7-60 s per GPU and metric, "
        "a GPU stalling 4 s in 8, a GPU bursting every 10 s, a process replaced every 5 s); fake NVML with "
        f"20 ms PCIe reads and no PCIe counters or GPM. Each tool in a real pty (TERM=xterm-256color), "
        f"measured {m.measure_s:g} s after a {m.warmup_s:g} s warm-up, the tools taking turns at each point. "
        "CPU is the whole process tree's. gpusight's interval is its sampling; at every point it redraws the "
        "screen at most once a second (its default `--refresh 1`), nvitop and nvtop once per interval. Targets: CPU ≤ 0.5 x nvitop's at 0.25 s and ≤ 1 x at the default "
        "intervals, output ≤ nvitop's, peak RSS ≤ 90 MiB, first full frame ≤ 0.6 s (issue 32; it was 1 s before)."
    )


def versions_line(m: Measurements) -> str:
    """gpusight's and the peers' versions."""
    parts = [m.gpusight_version]
    parts += [f"{p.name} {p.version}" if p.argv else f"{p.name} skipped ({p.reason})" for p in m.peers]
    return ", ".join(parts)


def readme_section(m: Measurements) -> str:
    """The README's benchmark section: the command, the scenario and the headline table."""
    lines = [
        "    " + COMMAND,
        "",
        f"{scenario_sentence(m)} Run of {m.date:%Y-%m-%d} on {machine_lines()[0][7:]}; {versions_line(m)}.",
        "",
        *headline_table(m),
    ]
    return "\n".join(lines) + "\n"


def targets(m: Measurements) -> list[Target]:
    """Judge every target: the headline's per point, gpusight's sampler cadence, ``--once`` and memory growth."""
    out = []
    for size in m.sizes():
        for default_interval in (False, True):
            ours, nvitop, _ = _point(m, size, default_interval)
            if ours is None:
                continue
            point = f"{_size(size)}, {'default intervals' if default_interval else f'{m.interval_s:g} s'}"
            limit = CPU_LIMIT_DEFAULT if default_interval else CPU_LIMIT_FAST
            peer_cpu = nvitop.result.cpu_ms_per_s if nvitop else None
            cpu = _ratio(ours.result.cpu_ms_per_s, peer_cpu)
            out.append(Target(f"CPU at {point}", f"at most {limit:g} x nvitop's",
                              f"{ours.result.cpu_ms_per_s:.1f} vs {_fmt(peer_cpu, '{:.1f}')} ms/s "
                              f"(ratio {_fmt(cpu, '{:.2f}')})", None if cpu is None else cpu <= limit))
            peer_sent = nvitop.result.bytes_per_s if nvitop else None
            sent = _ratio(ours.result.bytes_per_s, peer_sent)
            out.append(Target(f"Terminal output at {point}", "at most nvitop's bytes/s",
                              f"{ours.result.bytes_per_s / KIB:.2f} vs "
                              f"{_fmt(None if peer_sent is None else peer_sent / KIB, '{:.2f}')} KiB/s "
                              f"(ratio {_fmt(sent, '{:.2f}')})", None if sent is None else sent <= OUTPUT_LIMIT))
            out.append(Target(f"Peak RSS at {point}", f"at most {RSS_LIMIT_MIB} MiB",
                              f"{ours.result.peak_rss_bytes / MIB:.1f} MiB",
                              ours.result.peak_rss_bytes <= RSS_LIMIT_MIB * MIB))
            first = _first_frame(ours)
            in_app = ours.stats.get("first_frame_s") if ours.stats else None
            out.append(Target(f"First full frame at {point}", f"within {FIRST_FRAME_LIMIT_S:g} s",
                              f"{_fmt(ours.result.first_frame_s, '{:.2f}')} s on the pty, "
                              f"{_fmt(in_app, '{:.2f}')} s in-app",
                              None if first is None else first <= FIRST_FRAME_LIMIT_S))
    for record in (r for r in m.records if r.tool == "gpusight" and r.stats):
        assert record.stats is not None
        gap = record.stats["max_gap_s"]
        out.append(Target(f"Sampler cadence, {record.data} data at {_size(record.size)}",
                          f"no gap above 1.5 x {record.interval_s:.3g} s",
                          f"max gap {gap:.3f} s ({record.stats['polls']} polls)", gap <= 1.5 * record.interval_s))
    once = max(m.once_s)
    out.append(Target("gpusight --once", "within 1.5 s",
                      f"median {sorted(m.once_s)[len(m.once_s) // 2]:.2f} s, worst {once:.2f} s", once <= 1.5))
    growth = m.day["rss_end"] - m.day["rss_start"]
    # The chart grid keeps a day of 1 s / 10 s / 1 min columns by design (about 4.4 MiB for 8 GPUs), so the bound
    # that was 5 MiB before the grid is 10 MiB: history and grid full, and nothing per PID or per poll left behind.
    out.append(Target(f"Memory growth over {m.day['simulated_hours']:g} simulated h", "under 10 MiB (history and a day of charts)",
                      f"{growth / MIB:+.2f} MiB", growth < 10 * MIB))
    return out


DATA_LABELS = {
    "moving": "moving",
    "replay": "replay of a recording (gpusight only)",
    "constant": "constant (the old scenario, for comparison)",
}
"""How the runs' data is named in the full table."""


def _interval(r: RunRecord) -> str:
    """The interval a run had, and where it came from."""
    if r.data == "replay":
        return f"{r.interval_s:.3g} (the recording's pace)"
    return f"{r.interval_s:.3g}{' (default)' if r.default_interval else ''}"


def runs_table(m: Measurements) -> list[str]:
    """Every pty run, moving first, then the replay and constant rows."""
    lines = [
        "| data | tool | size | interval s | CPU ms/s | output KiB/s | peak RSS MiB | first frame s | "
        "max write gap s | sampler max gap s | scenario writes/s, processes replaced |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in m.records:
        gap = r.stats["max_gap_s"] if r.stats else None
        run_s = m.warmup_s + m.measure_s
        lines.append(
            f"| {DATA_LABELS[r.data]} | {r.tool} | {_size(r.size)} | {_interval(r)} | "
            f"{r.result.cpu_ms_per_s:.1f} | {r.result.bytes_per_s / KIB:.2f} | {r.result.peak_rss_bytes / MIB:.1f} | "
            f"{_fmt(r.result.first_frame_s, '{:.2f}')} | {_fmt(r.result.max_write_gap_s, '{:.3f}')} | "
            f"{_fmt(gap, '{:.3f}')} | {r.mover['writes'] / run_s:.1f}, {r.mover['churned']} |"
        )
    return lines


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
    rec = m.recording
    d = m.day
    filled = _fmt(None if d["rss_filled"] is None else d["rss_filled"] / MIB, "{:.1f}")
    lines = [
        "# gpusight benchmark results",
        "",
        f"Written by `{COMMAND}` on {m.date:%Y-%m-%d %H:%M} UTC. Not a test: nothing gates on it.",
        "",
        "## Machine and versions",
        "",
        *machine_lines(),
        f"- {versions_line(m)}",
        "",
        "## Headline: moving data, gpusight beside its peers",
        "",
        scenario_sentence(m),
        "",
        *headline_table(m),
        "",
        "## Every run",
        "",
        *runs_table(m),
        "",
        "- CPU: user + system time of the whole process tree per wall second, after the warm-up.",
        "- First frame: from spawn to the end of the first output burst that shows the last GPU's power limit "
        "(690 W, sampled data every tool draws).",
        "- Max write gap: longest pause between two terminal writes after the warm-up.",
        "- Sampler max gap: gpusight's own longest time between two poll starts (GPUSIGHT_STATS_FILE).",
        "- Scenario writes: how often the mover rewrote the fake NVML's scenario during the run (about 10/s on "
        "moving data, once on constant data); processes replaced: sleepers killed and replaced by new ones.",
        (
            f"- Replay: `gpusight --replay FILE --loop` of a recording made in this run with `gpusight --record FILE "
            f"--interval {rec['interval_s']:g}` (no terminal) on the moving scenario for {rec['seconds']:g} s: "
            f"{rec['snapshots']} snapshots, {rec['bytes'] / KIB:.0f} KiB, GPU 0's utilization took "
            f"{rec['distinct_gpu0_util']} distinct values, {rec['distinct_pids']} distinct process ids."
        ),
        "",
        "## Start-up",
        "",
        (
            f"- `gpusight --once` (stdout a pipe, 8 GPUs, 64 processes): median {median_once:.2f} s "
            f"over {len(m.once_s)} runs (includes the 0.3 s settle between its two polls)."
        ),
    ]
    for module, seconds in m.import_s.items():
        lines.append(f"- `import {module}`: {seconds * 1000:.0f} ms (median of {len(m.once_s)}, fresh interpreter)")
    lines += [
        "",
        "## Memory over a simulated long run",
        "",
        f"{d['samples']} snapshots ({d['simulated_hours']:g} h at 4 Hz) of {d['devices']} GPUs and {d['processes']} processes",
        "pushed through the sampler's History, TimeGrid and AdviceEngine, process ids changing every 4 simulated hours:",
        (
            f"RSS {d['rss_start'] / MIB:.1f} MiB at the start, {filled} MiB once the {d['history_capacity']}-sample"
            f" history was full, {d['rss_end'] / MIB:.1f} MiB at the end ({d['wall_s']:.0f} s of wall time,"
            f" {d['wall_s'] / d['samples'] * 1000:.2f} ms per sample; it ran beside the recording)."
        ),
        *_grid_line(d),
        "",
        "## Targets",
        "",
        "| target | limit | measured | met |",
        "|---|---|---|---|",
    ]
    for t in targets(m):
        lines.append(f"| {t.name} | {t.limit} | {t.measured} | {_verdict(t.met)} |")
    return "\n".join(lines) + "\n"


def write_report(path: Path, m: Measurements) -> str:
    """Write the report to ``path`` and return its text."""
    text = report_text(m)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return text
