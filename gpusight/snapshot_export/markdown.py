"""A short Markdown report of one snapshot and the recent history, for sharing in an issue or a chat.

Every piece of untrusted or free text goes through :func:`~gpusight.textsafe.safe_text` and
:func:`~gpusight.textsafe.md_escape`, so process names cannot inject Markdown (links, tables, HTML) or terminal escapes.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from gpusight.job_text import container_labels, gpu_list, job_label, job_processes, jobs_by_id, scope_label
from gpusight.run_report.markdown import summary_markdown
from gpusight.run_report.session import summarize_history
from gpusight.run_report.summary import RunSummary
from gpusight.sampling.history import DEVICE_METRICS, HOST_METRICS, History
from gpusight.snapshot.model import DeviceSample, JobSample, ProcessRole, ProcessSample, Snapshot
from gpusight.textsafe import md_escape
from gpusight.units import (
    NA,
    fmt_bytes,
    fmt_celsius,
    fmt_duration,
    fmt_mhz,
    fmt_percent,
    fmt_rate,
    fmt_watts,
)
from gpusight.vendor_text import extra_temperatures, gpu_usage_reason, other_drivers

TOP_PROCESSES = 10
"""How many GPU processes the report lists."""

JOB_PIDS = 16
"""How many of a job's PIDs the report lists."""


_FORMATTERS: dict[str, Callable[[float | None], str]] = {
    "memory_used_bytes": fmt_bytes,
    "swap_used_bytes": fmt_bytes,
    "power_watts": fmt_watts,
    "temperature_celsius": fmt_celsius,
    "clock_sm_mhz": fmt_mhz,
    "pcie_rx_bytes_per_s": fmt_rate,
    "pcie_tx_bytes_per_s": fmt_rate,
}


def _fmt_metric(metric: str, value: float | None) -> str:
    return _FORMATTERS.get(metric, fmt_percent)(value)


def _time(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp).astimezone().isoformat(timespec="seconds")


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [_row(header), _row(["---"] * len(header)), *(_row(r) for r in rows)]


def _device_row(d: DeviceSample) -> list[str]:
    name = md_escape(d.name, 40) or NA
    if d.lost:
        return [str(d.index), name, "lost", md_escape(d.error, 80), "", "", "", ""]
    memory = f"{fmt_bytes(d.memory_used_bytes)} / {fmt_bytes(d.memory_total_bytes)}"
    power = f"{fmt_watts(d.power_watts)} / {fmt_watts(d.power_limit_watts)}"
    throttle = md_escape(", ".join(d.throttle_reasons)) or "none"
    return [
        str(d.index),
        name,
        fmt_percent(d.utilization_gpu_percent),
        memory,
        power,
        _temperature_cell(d),
        fmt_mhz(d.clock_sm_mhz),
        throttle,
    ]


def _temperature_cell(d: DeviceSample) -> str:
    """The core temperature, then the junction and memory temperatures where the GPU reports them."""
    extra = ", ".join(f"{label} {text}" for label, text in extra_temperatures(d))
    core = fmt_celsius(d.temperature_celsius)
    return f"{core}; {extra}" if extra else core


def _worker_count(process: ProcessSample, processes: tuple[ProcessSample, ...]) -> int:
    if process.num_workers is not None:
        return process.num_workers
    return sum(1 for p in processes if p.role == ProcessRole.DATALOADER_WORKER and p.trainer_pid == process.pid)


def _top_processes(snapshot: Snapshot) -> list[ProcessSample]:
    """The GPU processes the report lists: the most GPU memory first."""
    gpu = [p for p in snapshot.processes if p.role == ProcessRole.GPU]
    gpu.sort(key=lambda p: (p.gpu_memory_bytes is None, -(p.gpu_memory_bytes or 0), p.pid))
    return gpu[:TOP_PROCESSES]


def _process_rows(snapshot: Snapshot, top: list[ProcessSample]) -> list[list[str]]:
    """The rows of the ``top`` processes; with a Container cell after the user when one of them runs in a
    container, and a Job cell when the snapshot has jobs."""
    jobs = jobs_by_id(snapshot)
    contained = any(p.container is not None for p in top)
    rows = []
    for p in top:
        command = md_escape(p.cmdline or p.name, 80) or NA
        if p.note:
            command += f" ({md_escape(p.note, 60)})"
        usage = gpu_usage_reason(p)
        if usage:
            command += f" ({md_escape(usage)})"
        job = [md_escape(job_label(p, jobs)) or NA] if jobs else []
        place = [md_escape(container_labels(p.container)[0], 64) if p.container else ""] if contained else []
        rows.append(
            [
                NA if p.device_index is None else str(p.device_index),
                str(p.pid),
                md_escape(p.user, 32) or NA,
                *place,
                *job,
                fmt_bytes(p.gpu_memory_bytes),
                fmt_percent(p.sm_percent),
                fmt_percent(p.cpu_percent),
                fmt_duration(p.elapsed_seconds),
                str(_worker_count(p, snapshot.processes)),
                command,
            ]
        )
    return rows


def _job_row(job: JobSample, keyed: bool) -> list[str]:
    """A job's row; with its cluster key (``slurm:4242``) before the evidence when some job has one (``keyed``)."""
    pids = ", ".join(str(pid) for pid in job.pids[:JOB_PIDS]) + (", …" if len(job.pids) > JOB_PIDS else "")
    return [
        str(job.id),
        md_escape(job.kind, 20),
        gpu_list(job.devices),
        f"{job_processes(job)}: {pids}" if pids else job_processes(job),
        *([md_escape(job.cluster_key, 80) or ""] if keyed else []),
        md_escape(job.evidence, 300) or NA,
    ]


def _history_rows(history: History) -> list[list[str]]:
    rows = []
    for index in history.device_indexes():
        for metric in DEVICE_METRICS:
            summary = history.device_summary(index, metric)
            if summary is not None:
                rows.append(
                    [
                        f"gpu{index}",
                        f"`{metric}`",
                        _fmt_metric(metric, summary.minimum),
                        _fmt_metric(metric, summary.mean),
                        _fmt_metric(metric, summary.maximum),
                    ]
                )
    for metric in HOST_METRICS:
        summary = history.host_summary(metric)
        if summary is not None:
            rows.append(
                [
                    "host",
                    f"`{metric}`",
                    _fmt_metric(metric, summary.minimum),
                    _fmt_metric(metric, summary.mean),
                    _fmt_metric(metric, summary.maximum),
                ]
            )
    return rows


def render_markdown(
    snapshot: Snapshot, history: History, summary: RunSummary | None = None, html_name: str | None = None
) -> str:
    """The Markdown report: source, host, time, devices, top processes, jobs, advice, errors, history summary and the
    run summary (``summary``, computed from ``history`` when not given; ``html_name`` is the HTML report it links)."""
    lines = ["# gpusight report", ""]
    source = md_escape(snapshot.source, 40)
    if snapshot.label:
        source += f" ({md_escape(snapshot.label, 120)})"
    lines.append(f"- Source: {source}")
    lines.append(f"- Host: {md_escape(snapshot.host.hostname, 80) or NA}")
    lines.append(f"- Time: {_time(snapshot.timestamp)}")
    if snapshot.driver is not None:
        d = snapshot.driver
        lines.append(
            f"- Driver: {md_escape(d.driver_version, 40) or NA}, CUDA {md_escape(d.cuda_driver_version, 40) or NA}"
        )
    others = other_drivers(snapshot)
    if others:
        lines.append(f"- Other drivers: {', '.join(md_escape(name) for name in others)}")
    lines += ["", "## Devices", ""]
    if snapshot.devices:
        header = ["GPU", "Name", "Util", "Memory used / total", "Power / limit", "Temp", "SM clock", "Throttle"]
        lines += _table(header, [_device_row(d) for d in snapshot.devices])
    else:
        lines.append("No GPU found.")
    lines += ["", "## Top processes by GPU memory", ""]
    top = _top_processes(snapshot)
    if top:
        job = ["Job"] if snapshot.jobs else []
        place = ["Container"] if any(p.container is not None for p in top) else []
        header = ["GPU", "PID", "User", *place, *job, "GPU mem", "SM %", "CPU %", "Elapsed", "Workers", "Command"]
        lines += _table(header, _process_rows(snapshot, top))
    else:
        lines.append("No GPU processes.")
    lines += ["", "## Jobs", ""]
    if snapshot.jobs:
        keyed = any(job.cluster_key for job in snapshot.jobs)
        header = ["Job", "Kind", "GPUs", "Processes", *(["Across nodes"] if keyed else []), "Evidence"]
        lines += _table(header, [_job_row(job, keyed) for job in snapshot.jobs])
    else:
        lines.append("None known.")
    lines += ["", "## Advice", ""]
    if snapshot.advice:
        jobs = jobs_by_id(snapshot)
        for a in snapshot.advice:
            scope = md_escape(scope_label(a.scope, jobs), 80)
            lines.append(f"- **{md_escape(a.severity, 20)}: {md_escape(a.title, 160)}** ({scope})")
            lines.append(f"  - Evidence: {md_escape(a.evidence, 400)}")
            lines.append(f"  - Action: {md_escape(a.action, 400)}")
    else:
        lines.append("Nothing to report.")
    lines += ["", "## Errors", ""]
    if snapshot.errors:
        lines += [f"- {md_escape(e.scope, 40)}: {md_escape(e.message, 300)}" for e in snapshot.errors]
    else:
        lines.append("None.")
    with history.reading():  # the sample count and span describe the rows' samples
        stamps = history.timestamps()
        rows = _history_rows(history)
    lines += ["", "## Recent history", ""]
    if rows:
        span = stamps[-1] - stamps[0]
        lines.append(f"{len(stamps)} samples over {span:.0f} s, from {_time(stamps[0])} to {_time(stamps[-1])}.")
        lines.append("")
        lines += _table(["Scope", "Metric", "Min", "Mean", "Max"], rows)
    else:
        lines.append("No history recorded.")
    lines.append("")
    lines += summary_markdown(summary if summary is not None else summarize_history(history), html_name)
    return "\n".join(lines)
