"""The process detail screen (Enter on a process, or ``d``): who it is, how fast it trains, and where its steps go.

On the left: the process (name, user, GPU, memory, CPU, full command line, container and job, all escaped) and its
latest speed (steps, samples and tokens per second, FLOPs per step and their source, math mode, peak and its source,
MFU or HFU, or N/A with the reason). On the right, on the sampler's speed grid at the main screen's zoom: the step-time
breakdown stacked over time (in :data:`~gpusight.facts.speed.BREAKDOWN_FIELDS` order, each part its own colour and
glyph, with a legend), then the MFU/HFU and throughput histories. A process that exits keeps its last figures and
history, and says so.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from gpusight.facts.speed import BREAKDOWN_FIELDS, job_speed, utilization_name
from gpusight.job_text import container_facts, job_facts, job_label, jobs_by_id
from gpusight.sampling.frame import Frame
from gpusight.sampling.timegrid import ChartView
from gpusight.snapshot.model import JobSample, ProcessRole, ProcessSample
from gpusight.speed_text import fmt_count, fmt_share
from gpusight.speed_text import job_speed_line as speed_line_of
from gpusight.textsafe import safe_text
from gpusight.ui.detail.gpu_detail import LabelledChart, caption_text
from gpusight.ui.widgets.chart import StackedChart
from gpusight.ui.widgets.chart_choice import ChartChoice, duration_text
from gpusight.ui.widgets.footer import FittingFooter
from gpusight.ui.widgets.gpu_hardware import process_instance
from gpusight.units import NA, fmt_bytes, fmt_percent
from gpusight.vendor_text import gpu_usage_reason

NO_SPEED = "no speed reported (instrument the loop with gpusight.torch)"
"""What the speed fields say for a process that reports none."""
WORKER_SPEED = "a DataLoader worker: the speed is its trainer's, PID {pid}"
"""What the speed fields say for a DataLoader worker (its trainer, not the worker, runs the steps)."""


def process_summary(process: ProcessSample, jobs: Mapping[int, JobSample], ascii_mode: bool) -> str:
    """A few lines about a process, its container and job (from ``jobs``) included.

    All text is escaped and bounded; ``ascii_mode`` writes the job with ASCII only.
    """
    lines = [
        f"{safe_text(process.name, 60) or 'unknown'} (user {safe_text(process.user, 32) or 'unknown'})",
        (
            f"GPU {process.device_index if process.device_index is not None else 'N/A'}"
            f"{'' if process.gpu_instance_id is None else f' MIG instance {process_instance(process)}'}, "
            f"GPU memory {fmt_bytes(process.gpu_memory_bytes)}, host memory {fmt_bytes(process.rss_bytes)}"
        ),
        safe_text(process.cmdline, 400) or "(no command line)",
    ]
    engines = process_engines(process)
    if engines:
        lines.insert(2, engines)
    if process.cpu_percent is not None or process.cpu_wait_percent is not None:
        lines.insert(2, f"CPU {fmt_percent(process.cpu_percent)}, waiting for a CPU {fmt_percent(process.cpu_wait_percent)}")
    if process.note:
        lines.append(safe_text(process.note, 120))
    usage = gpu_usage_reason(process)
    if usage:
        lines.append(usage)
    if process.container is not None:
        lines.append(f"in {safe_text(container_facts(process.container), 240)}")
    job = None if process.job is None else jobs.get(process.job)
    if job is not None:
        lines.append(f"{job_label(process, jobs, ascii_mode=ascii_mode)}: {job_facts(job)}")
        if job.cluster_key:
            lines.append(f"across nodes: {safe_text(job.cluster_key, 80)}")
        lines.append(f"evidence: {safe_text(job.evidence, 200)}")
    return "\n".join(lines)


def process_engines(process: ProcessSample) -> str | None:
    """``video encoder 0%, decoder 93%`` where NVML gives the process's video engine use; None where it does not."""
    if process.encoder_percent is None and process.decoder_percent is None:
        return None
    return f"video encoder {fmt_percent(process.encoder_percent)}, decoder {fmt_percent(process.decoder_percent)}"


def per_second(value: float | None, unit: str) -> str:
    """A rate as the process table writes it (:func:`~gpusight.speed_text.fmt_count`) with its unit, e.g.
    ``37k tokens/s``; ``N/A`` when unknown."""
    text = fmt_count(value)
    return text if text == NA else f"{text} {unit}/s"


def utilization_text(process: ProcessSample) -> str:
    """MFU or HFU in percent, or ``N/A`` with the reason the process gave (escaped)."""
    if process.flops_utilization_percent is not None:
        return fmt_share(process.flops_utilization_percent)
    note = safe_text(process.flops_utilization_note, 120)
    return f"{NA}: {note}" if note else NA


def speed_fields(process: ProcessSample) -> list[tuple[str, str]]:
    """The latest speed of ``process`` as (label, text); every unknown figure reads ``N/A``, sources escaped."""
    batch = f" ({process.batch_size_source.value})" if process.batch_size_source is not None else ""
    flops = NA if process.flops_per_step is None else f"{process.flops_per_step:.3g}"
    if process.flops_source is not None:
        flops += f" ({process.flops_source.value})"
    peak = NA if process.peak_tflops is None else f"{process.peak_tflops:.4g} TFLOP/s"
    if process.peak_source:
        peak += f" ({safe_text(process.peak_source, 80)})"
    fields = [
        ("steps", per_second(process.steps_per_second, "steps")),
        ("samples", per_second(process.samples_per_second, "samples") + batch),
        ("tokens", per_second(process.tokens_per_second, "tokens")),
        ("FLOPs/step", flops),
        ("achieved", NA if process.achieved_tflops is None else f"{process.achieved_tflops:.3g} TFLOP/s"),
        ("math mode", NA if process.math_mode is None else process.math_mode.value),
        ("peak", peak),
        (utilization_name(process), utilization_text(process)),
        ("input wait", fmt_percent(process.input_wait_percent)),
    ]
    source = "" if process.breakdown_source is None else f" ({process.breakdown_source.value})"
    for name, label in BREAKDOWN_FIELDS:
        fields.append((label, fmt_percent(getattr(process, name)) + (source if name == BREAKDOWN_FIELDS[0][0] else "")))
    return fields


def job_speed_line(process: ProcessSample, frame: Frame) -> str | None:
    """The speed of the job ``process`` belongs to (its ranks' sums, slowest steps), when it has more than one rank;
    None otherwise."""
    jobs = jobs_by_id(frame.snapshot)
    job = None if process.job is None else jobs.get(process.job)
    if job is None or len(job.pids) < 2:
        return None
    speed = job_speed(job, frame.snapshot.processes)
    return f"{speed.reporting}/{speed.ranks} ranks report: {speed_line_of(speed)}"


def find_process(frame: Frame, pid: int) -> ProcessSample | None:
    """The GPU row of ``pid`` in the frame (its first), else any row of it; None when it is gone."""
    rows = [process for process in frame.snapshot.processes if process.pid == pid]
    return next((process for process in rows if process.role == ProcessRole.GPU), rows[0] if rows else None)


class ProcessDetailScreen(Screen[None]):
    """One process's identity, latest speed and speed histories, refreshed with every frame."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "app.pop_screen", "Back")]

    def __init__(self, process: ProcessSample, *, ascii_mode: bool = False) -> None:
        super().__init__()
        self.pid = process.pid
        """PID of the process shown."""
        self.process = process
        """Its newest row (the last one seen once it has exited)."""
        self.exited_at: float | None = None
        """When the process was first missing from a frame; None while it runs."""
        self.ascii_mode = ascii_mode
        """Draw charts with ASCII only."""
        self._status = Static(Text(""), id="process-status")
        self._identity = Static(Text(""), id="process-identity")
        self._fields = Static(Text(""), id="process-speed")
        self._breakdown_caption = Static(Text("step time"), classes="chart-caption")
        self._legend = Static(Text(""), id="breakdown-legend")
        self._breakdown = StackedChart(ascii_mode=ascii_mode, classes="detail-chart")
        self._utilization = LabelledChart("MFU", ascii_mode=ascii_mode, id="chart-utilization")
        self._throughput = LabelledChart("throughput", ascii_mode=ascii_mode, id="chart-throughput")
        self._left = VerticalScroll(id="detail-left")
        self.identity_text = ""
        """The identity lines shown (plain text, escaped)."""
        self.status_text = ""
        """Whether the process has exited (plain text; empty while it runs)."""
        self.speed_text = ""
        """The speed lines shown (plain text, escaped)."""

    def compose(self) -> ComposeResult:
        """Identity and figures on the left; the breakdown, MFU and throughput charts on the right."""
        with self._left:
            self._left.border_title = f"PID {self.pid}"
            yield self._status
            yield self._fields
            yield self._identity
        with Vertical(id="process-charts"):
            with Vertical(classes="labelled-chart", id="chart-breakdown"):
                yield self._breakdown_caption
                yield self._legend
                yield self._breakdown
            yield self._utilization
            yield self._throughput
        yield FittingFooter()

    def show(self, frame: Frame, choice: ChartChoice) -> None:
        """Refresh from ``frame`` at the zoom level of ``choice``; a process gone from it keeps its last figures."""
        current = find_process(frame, self.pid)
        if current is not None:
            self.process, self.exited_at = current, None
        elif self.exited_at is None:
            self.exited_at = frame.snapshot.timestamp
        process = self.process
        self.status_text = ""
        if self.exited_at is not None:
            stamp = time.strftime("%H:%M:%S", time.localtime(self.exited_at))
            self.status_text = f"EXITED: not seen since {stamp}; its last figures and history are kept"
        self._status.update(Text(self.status_text, style="bold"))
        self._status.display = self.exited_at is not None
        self.identity_text = process_summary(process, jobs_by_id(frame.snapshot), self.ascii_mode)
        self._identity.update(Text(self.identity_text))
        self._show_fields(process, frame)
        separator = "-" if self.ascii_mode else "·"
        self._left.border_title = f"PID {self.pid} {separator} {safe_text(process.name, 40) or 'unknown'}"
        self._show_charts(process, frame.speeds, choice)

    def _show_fields(self, process: ProcessSample, frame: Frame) -> None:
        fields = speed_fields(process)
        job_line = job_speed_line(process, frame)
        table = Table.grid(padding=(0, 1))
        table.add_column(style="dim", no_wrap=True)
        table.add_column()
        lines = []
        if not any(getattr(process, name) is not None for name in ("steps_per_second", "flops_utilization_percent",
                                                                     "step_data_percent", "samples_per_second")):
            missing = NO_SPEED if process.trainer_pid is None else WORKER_SPEED.format(pid=process.trainer_pid)
            table.add_row("speed", Text(missing))
            lines.append(f"speed {missing}")
        for label, value in fields:
            table.add_row(label, Text(value))
            lines.append(f"{label} {value}")
        if job_line is not None:
            table.add_row(f"job {process.job}", Text(job_line))
            lines.append(f"job {process.job} {job_line}")
        self.speed_text = "\n".join(lines)
        self._fields.update(table)

    def _show_charts(self, process: ProcessSample, speeds: ChartView | None, choice: ChartChoice) -> None:
        width = self._breakdown.size.width

        def series(metric: str, columns: int) -> list[float | None]:
            if speeds is None:
                return [None] * columns
            return speeds.series(choice.level, self.pid, metric, columns, paged=choice.paged)

        span = "" if speeds is None else duration_text(speeds.span_seconds(choice.level, width))
        parts = [series(name, width) for name, _ in BREAKDOWN_FIELDS]
        self._breakdown.set_parts(parts)
        source = NA if process.breakdown_source is None else process.breakdown_source.value
        self._breakdown_caption.update(caption_text("step time", f"({source})", "100%", span, width - 1))
        items = [
            Text.assemble((self._breakdown.glyph(part), self._breakdown.part_style(part)),
                          f" {label} {fmt_percent(getattr(process, name))}")
            for part, (name, label) in enumerate(BREAKDOWN_FIELDS)
        ]
        self._legend.update(legend_text(items, width))
        name = utilization_name(process)
        self._utilization.title = name
        utilization = fmt_share(process.flops_utilization_percent)
        self._utilization.show(utilization, series("flops_utilization_percent", self._utilization.columns), 100.0,
                               "100%", span)
        metric, unit = _throughput_metric(process)
        values = series(metric, self._throughput.columns)
        top = max((value for value in values if value is not None), default=None)
        self._throughput.show(per_second(getattr(process, metric), unit), values, top, per_second(top, unit), span)


def legend_text(items: list[Text], width: int) -> Text:
    """``items`` two spaces apart, on as many lines as ``width`` cells need, never broken inside an item."""
    lines: list[Text] = [Text()]
    for item in items:
        line = lines[-1]
        if line.cell_len and line.cell_len + 2 + item.cell_len > width:
            lines.append(Text())
            line = lines[-1]
        if line.cell_len:
            line.append("  ")
        line.append_text(item)
    return Text("\n").join(lines)


def _throughput_metric(process: ProcessSample) -> tuple[str, str]:
    """Which throughput the chart shows: tokens where counted, else samples, else steps; with its unit."""
    if process.tokens_per_second is not None:
        return "tokens_per_second", "tokens"
    if process.samples_per_second is not None:
        return "samples_per_second", "samples"
    return "steps_per_second", "steps"
