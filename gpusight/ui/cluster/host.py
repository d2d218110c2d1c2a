"""One host of the cluster (Enter on its row): its GPUs with history charts, processes, jobs and advice.

The app asks the poller for this host's range queries (``focus_host``) while the screen is open, so
the charts fill in from the next poll. A node that runs dcgm-exporter alone has GPU data only: the
screen says which panels need ``gpusight --serve`` there instead of showing empty tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.geometry import Size
from textual.screen import Screen
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Footer, Static

from gpusight.cluster.counts import node_gpus
from gpusight.cluster.fleet_advice import on_host
from gpusight.cluster.frame import ClusterFrame, ClusterGpu, ClusterNode
from gpusight.cluster.job_speed import job_key
from gpusight.cluster.job_speed_text import job_utilization, steps_text
from gpusight.cluster.render import health_badge
from gpusight.speed_text import throughput_text
from gpusight.textsafe import safe_text
from gpusight.ui.cluster.advice import AdviceText
from gpusight.ui.cluster.text import (
    HOST_CHARTS,
    MEMORY,
    MIB,
    PCIE_RX_CHART,
    PCIE_TX_CHART,
    POWER,
    ChartMetric,
    chart_maximum,
    history_by_metric,
    host_text,
    peak,
    process_place,
    series_of,
)
from gpusight.ui.widgets.chart import chart_rows
from gpusight.ui.widgets.format import LineBuilder, fit, fit_cell, memory_pair, short_gpu_name
from gpusight.units import NA, fmt_bytes, fmt_celsius, fmt_percent, fmt_rate, fmt_watts

TALL_ROWS = 40
"""Terminals at least this tall draw each GPU's charts two rows high, others one."""

CHART_MIN_WIDTH = 16
"""Narrowest chart; fewer metrics are charted side by side on narrow terminals."""

LABEL_WIDTH = 6
"""Cells of the ``GPU 3`` label left of each GPU's charts."""

WIDE_COLUMNS = 120
"""Terminals at least this wide get every column of the GPU and process tables."""

PROCESS_ROWS_MAX = 200
"""Most process rows listed (the rest are counted)."""


def scale_text(metric: ChartMetric, maximum: float | None) -> str:
    """The top of a chart's scale with its unit, ``N/A`` when unknown."""
    if maximum is None:
        return NA
    if metric is MEMORY:
        return fmt_bytes(maximum * MIB)
    if metric is POWER:
        return fmt_watts(maximum)
    if metric in (PCIE_RX_CHART, PCIE_TX_CHART):
        return fmt_rate(maximum)
    return "100%" if metric.style == "util" else fmt_celsius(maximum)


class HostCharts(Widget):
    """A grid of history charts: one row of charts per GPU, one column per metric (as many as fit)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "host-charts--caption",
        "host-charts--util",
        "host-charts--mem",
        "host-charts--power",
        "host-charts--temp",
        "host-charts--pcie",
    }

    DEFAULT_CSS = """
    HostCharts { height: auto; }
    HostCharts > .host-charts--caption { color: $text-muted; text-style: bold; }
    HostCharts > .host-charts--util { color: $success; }
    HostCharts > .host-charts--mem { color: $secondary-lighten-2; }
    HostCharts > .host-charts--power { color: $warning; }
    HostCharts > .host-charts--temp { color: $error-lighten-2; }
    HostCharts > .host-charts--pcie { color: $primary; }
    """

    def __init__(self, *, ascii_mode: bool = False, id: str | None = None) -> None:
        super().__init__(id=id)
        self.ascii_mode = ascii_mode
        """Draw with ASCII glyphs only."""
        self._data: tuple[tuple[int, tuple[tuple[tuple[float | None, ...], float | None], ...]], ...] = ()
        self._captions: tuple[str, ...] = ()
        self._lines: list[Strip] | None = None

    def set_data(self, node: ClusterNode, frame: ClusterFrame) -> None:
        """Chart ``node``'s GPUs from ``frame``'s histories; redraws only when something changed."""
        histories = history_by_metric(frame)
        captions = []
        scales: dict[str, float] = {}
        for metric in HOST_CHARTS:
            series = [series_of(histories, metric.metric, node.host, gpu.index) for gpu in node.gpus]
            scales[metric.metric] = peak(series)
            known = any(value is not None for values in series for value in values)
            captions.append(_caption(metric, node.gpus, scales[metric.metric]) if known else f"{metric.label}: no data")
        data = tuple(
            (
                gpu.index,
                tuple(
                    (series_of(histories, m.metric, node.host, gpu.index), chart_maximum(m, gpu, scales[m.metric]))
                    for m in HOST_CHARTS
                ),
            )
            for gpu in node.gpus
        )
        if data == self._data and tuple(captions) == self._captions:
            return
        resized = len(data) != len(self._data)
        self._data, self._captions, self._lines = data, tuple(captions), None
        self.refresh(layout=resized)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """One caption line and one or two lines per GPU."""
        return 1 + self._chart_rows() * len(self._data) if self._data else 1

    def _chart_rows(self) -> int:
        return 2 if self.app.size.height >= TALL_ROWS else 1

    def notify_style_update(self) -> None:
        """Redraw with the new theme."""
        super().notify_style_update()
        self._lines = None

    def _build(self, width: int) -> list[Strip]:
        base = self.rich_style
        count = max(1, min(len(HOST_CHARTS), (width - LABEL_WIDTH) // (CHART_MIN_WIDTH + 1)))
        chart_width = max(1, (width - LABEL_WIDTH) // count - 1)
        caption_style = base + self.get_component_rich_style("host-charts--caption", partial=True)
        if not self._data:
            return [LineBuilder(width, base).strip()]
        header = LineBuilder(width, base)
        header.add(" " * LABEL_WIDTH)
        for caption in self._captions[:count]:
            header.add(fit_cell(caption, chart_width, False) + " ", caption_style)
        lines = [header.strip()]
        for index, charts in self._data:
            height = self._chart_rows()
            rows: list[list[Segment]] = [[] for _ in range(height)]
            for metric, (values, maximum) in zip(HOST_CHARTS[:count], charts, strict=False):
                style: Style = base + self.get_component_rich_style(f"host-charts--{metric.style}", partial=True)
                strips = chart_rows(values, chart_width, height, maximum, style, ascii_mode=self.ascii_mode, blank=base)
                for row, strip in zip(rows, strips, strict=True):
                    row.extend(strip)
                    row.append(Segment(" ", base))
            for number, row in enumerate(rows):
                label = fit_cell(f"GPU {index}" if number == 0 else "", LABEL_WIDTH, False)
                lines.append(Strip([Segment(label, caption_style), *row]).adjust_cell_length(width, base))
        return lines

    def render_line(self, y: int) -> Strip:
        """Line ``y``: the captions, then each GPU's chart rows."""
        width = self.size.width
        if self._lines is None or (self._lines and self._lines[0].cell_length != width):
            self._lines = self._build(width)
        return self._lines[y] if 0 <= y < len(self._lines) else Strip.blank(width, self.rich_style)


def _caption(metric: ChartMetric, gpus: Sequence[ClusterGpu], top: float) -> str:
    """``util 0-100%``: the metric with its scale (memory's from the first GPU whose total is known)."""
    gpu = next((g for g in gpus if g.memory_total_bytes is not None), gpus[0])
    return f"{metric.label} 0-{scale_text(metric, chart_maximum(metric, gpu, top))}"


def _table(labels: Sequence[str], width: int, wide_only: Sequence[str], left: Sequence[str]) -> tuple[Table, list[int]]:
    """An empty table with the columns ``labels`` (those in ``wide_only`` only ``width`` >= WIDE_COLUMNS wide)
    and the positions of the columns kept."""
    table = Table(box=None, padding=(0, 1), header_style="bold", expand=False)
    kept = [i for i, label in enumerate(labels) if width >= WIDE_COLUMNS or label not in wide_only]
    for i in kept:
        table.add_column(labels[i], no_wrap=True, justify="left" if labels[i] in left else "right", overflow="ellipsis")
    return table, kept


def _add_row(table: Table, kept: list[int], cells: Sequence[str | Text]) -> None:
    """Add the kept ``cells`` as a row; a plain string becomes ``Text``, since a Rich table reads a string as markup
    (a label holding ``[link=...]`` would become a live hyperlink)."""
    table.add_row(*(Text(cell) if isinstance(cell, str) else cell for cell in (cells[i] for i in kept)))


def gpu_table(node: ClusterNode, width: int) -> Table:
    """Every GPU of ``node`` with the fields the frame knows (fewer columns below WIDE_COLUMNS), its health, and a
    row per MIG instance under it."""
    labels = ("GPU", "MODEL", "UTIL", "MEMORY", "POWER", "TEMP", "HEALTH", "SM", "TENSOR", "PCIe RX", "PCIe TX",
              "UUID")
    table, kept = _table(labels, width, ("TENSOR", "PCIe RX", "PCIe TX", "UUID"), ("MODEL", "UUID"))
    for gpu in node.gpus:
        badge = health_badge(gpu)
        _add_row(table, kept, (
            str(gpu.index),
            short_gpu_name(gpu.model),
            "LOST" if gpu.lost else fmt_percent(gpu.utilization_percent),
            memory_pair(gpu.memory_used_bytes, gpu.memory_total_bytes),
            fmt_watts(gpu.power_watts),
            fmt_celsius(gpu.temperature_celsius),
            Text(badge, style="bold red") if badge == "DRAIN" else badge,
            fmt_percent(gpu.sm_active_percent),
            fmt_percent(gpu.tensor_active_percent),
            fmt_rate(gpu.pcie_rx_bytes_per_s),
            fmt_rate(gpu.pcie_tx_bytes_per_s),
            safe_text(gpu.uuid, 40) or NA,
        ))
        for mig in gpu.mig:
            _add_row(table, kept, (
                f"MIG {mig.gpu_instance_id}", safe_text(mig.profile, 16) or NA, "",
                memory_pair(mig.memory_used_bytes, mig.memory_total_bytes), "", "", "",
                fmt_percent(mig.sm_active_percent), fmt_percent(mig.tensor_active_percent), "", "", "",
            ))
    return table


def process_table(frame: ClusterFrame, host: str, width: int) -> Table | Text:
    """The host's GPU processes with their container, job, rank and DataLoader workers (fewer columns when narrow)."""
    processes = [p for p in frame.processes if p.host == host]
    if not processes:
        return Text("No GPU processes reported.")
    processes.sort(key=lambda p: (-1 if p.gpu is None else p.gpu, -(p.memory_bytes or 0)))
    labels = ("GPU", "PROCESS", "USER", "WHERE", "JOB", "RANK", "GPU MEM", "SM", "CPU", "WORKERS", "WAIT")
    table, kept = _table(labels, width, ("JOB", "SM", "CPU"), ("PROCESS", "USER", "WHERE", "RANK"))
    for p in processes[:PROCESS_ROWS_MAX]:
        workers = NA if p.workers is None else f"{p.workers} ({fmt_percent(p.workers_cpu_percent)})"
        _add_row(table, kept, (
            NA if p.gpu is None else str(p.gpu),
            Text(safe_text(p.name, 24) or NA),
            Text(safe_text(p.user, 16) or NA),
            Text(fit(process_place(p), 24)),
            str(p.job),
            Text(safe_text(p.rank, 12) or NA),
            fmt_bytes(p.memory_bytes),
            fmt_percent(p.sm_percent),
            fmt_percent(p.cpu_percent),
            workers,
            fmt_percent(p.input_wait_percent),
        ))
    if len(processes) > PROCESS_ROWS_MAX:
        table.caption = f"and {len(processes) - PROCESS_ROWS_MAX} more"
    return table


def job_table(frame: ClusterFrame, host: str, width: int) -> Table | Text:
    """The host's part of each job, with its steps and throughput on this node and its MFU across all its nodes
    (kind, world size and GPU memory only on wide terminals)."""
    jobs = sorted((j for j in frame.jobs if j.host == host), key=lambda j: j.job)
    if not jobs:
        return Text("No jobs reported.")
    speeds = {speed.key: speed for speed in frame.job_speeds}
    labels = ("JOB", "KIND", "CLUSTER JOB", "WORLD", "GPU MEM", "STEPS", "THROUGHPUT", "MFU ALL NODES")
    table, kept = _table(labels, width, ("KIND", "WORLD", "GPU MEM"), ("KIND", "CLUSTER JOB", "MFU ALL NODES"))
    for job in jobs:
        speed = speeds.get(job_key(job))
        across = NA
        if speed is not None:
            across = f"{job_utilization(speed)} ({len(speed.reporting_hosts)}/{len(speed.hosts)} nodes)"
        _add_row(table, kept, (
            str(job.job),
            safe_text(job.kind, 16),
            Text(safe_text(job.cluster_job, 40) or "-"),
            NA if job.world_size is None else str(job.world_size),
            fmt_bytes(job.memory_bytes),
            steps_text(job.steps_per_second),
            throughput_text(job.tokens_per_second, job.samples_per_second),
            across,
        ))
    return table


def node_title(node: ClusterNode | None, host: str) -> Text:
    """The screen's first line: host, state, exporter, scrape targets and the note."""
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(f" {host_text(host, 60)} ", style="bold reverse")
    if node is None:
        text.append("  not in the latest poll", style="italic")
        return text
    text.append("  up" if node.up else "  DOWN", style="bold green" if node.up else "bold red")
    exporter = "gpusight --serve" if node.exporter == "gpusight" else "dcgm-exporter only"
    text.append(f"  {exporter}  {node_gpus(node)}")
    if node.cpu_percent is not None:
        text.append(f"  CPU {fmt_percent(node.cpu_percent)}, iowait {fmt_percent(node.iowait_percent)}")
    text.append(f"  targets: {', '.join(safe_text(i, 40) for i in node.instances) or NA}")
    if node.note:
        text.append(f"  {safe_text(node.note, 120)}", style="italic yellow")
    return text


class ClusterHostScreen(Screen[None]):
    """The drill-in view of one host; :meth:`show` takes each new frame while it is open."""

    DEFAULT_CSS = """
    ClusterHostScreen { layout: vertical; }
    #host-title { height: 1; background: $panel; }
    #host-body { height: 1fr; scrollbar-size-vertical: 1; }
    #host-gpus, #host-charts, #host-processes, #host-jobs, #host-missing { margin-bottom: 1; }
    .host-section { color: $text-muted; text-style: bold; }
    #host-missing { color: $warning; }
    """

    def __init__(self, host: str, *, ascii_mode: bool = False) -> None:
        super().__init__()
        self.host = host
        """The host shown (its raw name, as the frame has it)."""
        self.ascii_mode = ascii_mode
        """Draw with ASCII glyphs only."""
        self.shown_frame: ClusterFrame | None = None
        """The frame on screen."""
        self._title = Static(Text(""), id="host-title")
        self._gpus = Static(Text("Waiting for the next poll."), id="host-gpus")
        self._charts = HostCharts(ascii_mode=ascii_mode, id="host-charts")
        self._missing = Static(Text(""), id="host-missing")
        self._processes = Static(Text(""), id="host-processes")
        self._jobs = Static(Text(""), id="host-jobs")
        self._advice = AdviceText(ascii_mode=ascii_mode, id="host-advice")
        self._state: object = None

    def compose(self) -> ComposeResult:
        """Title line; GPUs, charts, processes, jobs and advice in one scrolling column; footer."""
        yield self._title
        with VerticalScroll(id="host-body"):
            yield self._missing
            yield self._gpus
            yield Static("History (range queries; Esc back)", classes="host-section")
            yield self._charts
            yield Static("Processes", classes="host-section gpusight-only")
            yield self._processes
            yield Static("Jobs", classes="host-section gpusight-only")
            yield self._jobs
            yield Static("Advice", classes="host-section gpusight-only")
            yield self._advice
        yield Footer()

    def on_mount(self) -> None:
        """Focus the scrolling body so the arrow keys scroll it."""
        self.query_one("#host-body").focus()

    def on_resize(self) -> None:
        """Fit the tables to the new width."""
        self._state = None
        if self.shown_frame is not None:
            self.show(self.shown_frame)

    def show(self, frame: ClusterFrame) -> None:
        """Draw this host from ``frame``."""
        self.shown_frame = frame
        node = next((n for n in frame.nodes if n.host == self.host), None)
        self._title.update(node_title(node, self.host))
        if node is None:
            self._gpus.update(Text("This host is not in the latest poll: it may have stopped reporting."))
            return
        gpusight = node.exporter == "gpusight"
        processes = [p for p in frame.processes if p.host == self.host]
        jobs = [j for j in frame.jobs if j.host == self.host]
        advice = [a for h, a in frame.node_advice if h == self.host]  # its own, then the fleet's about its GPUs
        advice += [a for a in frame.fleet_advice if on_host(a, self.host)]
        state = (node, processes, jobs, advice)
        self._charts.set_data(node, frame)
        if state == self._state:
            return
        self._state = state
        width = self.app.size.width
        self._gpus.update(gpu_table(node, width) if node.gpus else Text("No GPUs reported."))
        for widget in self.query(".gpusight-only"):
            widget.display = gpusight
        for widget in (self._processes, self._jobs, self._advice):
            widget.display = gpusight
        self._missing.display = not gpusight
        if not gpusight:
            self._missing.update(Text(
                "Processes, jobs and advice need gpusight --serve on this node: it runs dcgm-exporter only, "
                "which reports GPU-level data."
            ))
            return
        self._processes.update(process_table(frame, self.host, width))
        self._jobs.update(job_table(frame, self.host, width))
        self._advice.show(advice)
