"""The GPU detail screen (Enter on a GPU): every field of the device and its history charts, wide.

The five histories of the main screen (utilization, memory, power, temperature, PCIe RX and TX)
come first, one full-width chart each; the SM clock, fan and GPM activity follow, half width,
when the GPU reports them. Every chart reads the frame's time grid at the main screen's zoom.
"""

from __future__ import annotations

from typing import ClassVar

from rich.cells import cell_len
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from gpusight.facts.gpu_selection import gpu_number
from gpusight.sampling.frame import Frame
from gpusight.sampling.timegrid import ChartView
from gpusight.snapshot.model import DeviceSample, Snapshot
from gpusight.textsafe import safe_text
from gpusight.ui.detail.gpu_detail_sections import detail_sections
from gpusight.ui.widgets.chart import Chart
from gpusight.ui.widgets.chart_choice import (
    HISTORIES,
    JUNCTION,
    PCIE_METRICS,
    ChartChoice,
    duration_text,
    pcie_scale,
    scale_maximum,
    value_text,
)
from gpusight.ui.widgets.footer import FittingFooter
from gpusight.ui.widgets.format import (
    fit,
    memory_pair,
    percent_of,
    power_pair,
    short_gpu_name,
    throttle_badges,
)
from gpusight.ui.widgets.gpu_hardware import migs_of
from gpusight.units import (
    NA,
    fmt_bytes,
    fmt_celsius,
    fmt_mhz,
    fmt_percent,
    fmt_rate,
    fmt_watts,
)
from gpusight.vendor_text import extra_temperatures, gpm_text, is_other_vendor

GPM_METRICS = ("sm_active_percent", "tensor_active_percent", "dram_active_percent")
"""Charts shown only when the GPU reports them (Hopper and later)."""

EXTRA_TITLES = {
    "clock_sm_mhz": "SM clock",
    "fan_percent": "fan",
    "sm_active_percent": "SM active",
    "tensor_active_percent": "tensor active",
    "dram_active_percent": "DRAM active",
}
"""The detail screen's half-width charts, after the five histories."""

HISTORY_TITLES = {
    "utilization_gpu_percent": "GPU util",
    "memory_used_bytes": "memory used",
    "power_watts": "power",
    "temperature_celsius": "temperature",
    "pcie_rx_bytes_per_s": "PCIe RX",
    "pcie_tx_bytes_per_s": "PCIe TX",
}
"""Caption of each full-width history chart."""

JUNCTION_TITLE = "junction temperature"
"""Caption of the temperature chart of a GPU that charts its junction (no core sensor, such as an MI300X)."""


def device_fields(device: DeviceSample) -> list[tuple[str, str]]:
    """Every field of ``device`` as (label, text with units); unknown values read ``N/A``."""
    capability = device.compute_capability
    badges = ", ".join(label for label, _ in throttle_badges(device.throttle_reasons)) or "none"
    mig = NA if device.mig_mode is None else ("enabled" if device.mig_mode else "disabled")
    vendor = [("vendor", f"{safe_text(device.vendor)} ({safe_text(device.kernel_driver, 16) or NA})")]
    temperatures = [(f"{label} temperature", text) for label, text in extra_temperatures(device)]
    return [
        ("name", safe_text(device.name) or NA),
        *(vendor if is_other_vendor(device) else []),
        ("uuid", safe_text(device.uuid) or NA),
        ("state", "LOST: " + (safe_text(device.error) or "not answering") if device.lost else "ok"),
        ("GPU utilization", fmt_percent(device.utilization_gpu_percent)),
        ("memory controller", fmt_percent(device.utilization_memory_percent)),
        ("memory used/total", memory_pair(device.memory_used_bytes, device.memory_total_bytes)),
        ("memory used %", fmt_percent(percent_of(device.memory_used_bytes, device.memory_total_bytes))),
        ("memory reserved", fmt_bytes(device.memory_reserved_bytes)),
        ("power/limit", power_pair(device.power_watts, device.power_limit_watts)),
        ("energy", NA if device.energy_joules is None else f"{device.energy_joules / 3.6e6:.3f} kWh"),
        ("temperature", fmt_celsius(device.temperature_celsius)),
        *temperatures,
        ("fan", fmt_percent(device.fan_percent)),
        ("SM clock", fmt_mhz(device.clock_sm_mhz)),
        ("memory clock", fmt_mhz(device.clock_memory_mhz)),
        ("performance state", NA if device.pstate is None else f"P{device.pstate}"),
        ("throttle reasons", badges),
        ("PCIe RX", fmt_rate(device.pcie_rx_bytes_per_s)),
        ("PCIe TX", fmt_rate(device.pcie_tx_bytes_per_s)),
        ("SM active (GPM)", gpm_text(device, fmt_percent(device.sm_active_percent))),
        ("SM occupancy (GPM)", gpm_text(device, fmt_percent(device.sm_occupancy_percent))),
        ("tensor active (GPM)", gpm_text(device, fmt_percent(device.tensor_active_percent))),
        ("DRAM active (GPM)", gpm_text(device, fmt_percent(device.dram_active_percent))),
        ("ECC uncorrected", NA if device.ecc_errors_uncorrected is None else str(device.ecc_errors_uncorrected)),
        ("MIG", mig),
        ("compute capability", NA if capability is None else f"{capability[0]}.{capability[1]}"),
    ]


class LabelledChart(Vertical):
    """A chart with a one-line caption holding the metric's name and current value."""

    def __init__(self, title: str, *, ascii_mode: bool, id: str | None = None) -> None:
        super().__init__(id=id, classes="labelled-chart")
        self.title = title
        """Metric name shown in the caption."""
        self.caption = Static(Text(title), classes="chart-caption")
        """The caption line."""
        self.chart = Chart(ascii_mode=ascii_mode, classes="detail-chart")
        """The chart itself."""

    def compose(self) -> ComposeResult:
        """Caption above chart."""
        yield self.caption
        yield self.chart

    @property
    def columns(self) -> int:
        """How many time-grid columns the chart is wide (0 before layout)."""
        return self.chart.size.width

    def show(self, value: str, values: list[float | None], maximum: float | None, scale: str, span: str) -> None:
        """Update the caption (the longest form that leaves a gap at its right) and the series (``values`` as wide as the chart)."""
        self.caption.update(caption_text(self.title, value, scale, span, (self.caption.size.width or self.size.width) - 1))
        self.chart.set_series(values, maximum)


def caption_text(title: str, value: str, scale: str, span: str, width: int) -> Text:
    """A chart's caption in the longest form that fits ``width`` cells, never cut inside its brackets.

    ``title value  (0..scale, last span)``, else without the span, else without the scale, else the
    title and value cut with an ellipsis.
    """
    head = f"{title} {value}"
    for note in (f"  (0..{scale}, last {span})", f"  (0..{scale})", ""):
        if cell_len(head) + cell_len(note) <= width:
            return Text.assemble((title, "bold"), f" {value}", (note, "dim"))
    cut = fit(head, width)
    return Text.assemble((cut[: len(title)], "bold"), cut[len(title):])


class GpuDetailScreen(Screen[None]):
    """All fields of one GPU and its history charts, refreshed with every snapshot."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "app.pop_screen", "Back")]

    def __init__(self, device_index: int, *, ascii_mode: bool = False) -> None:
        super().__init__()
        self.device_index = device_index
        """NVML index of the GPU shown."""
        self.ascii_mode = ascii_mode
        """Draw charts with ASCII only."""
        self._fields = Static(Text("waiting for data"), id="detail-fields")
        self._charts = {
            name: LabelledChart(title, ascii_mode=ascii_mode, id=f"chart-{name}")
            for name, title in {**HISTORY_TITLES, **EXTRA_TITLES}.items()
        }
        self._left = VerticalScroll(id="detail-left")
        self._left.border_title = f"GPU {device_index}"
        self._last_fields: list[tuple[str, str]] | None = None
        self.fields_text = ""
        """The fields and sections shown, one ``label value`` a line (section titles alone), as plain text."""

    def compose(self) -> ComposeResult:
        """Fields on the left; on the right the five histories full width, then the extra charts."""
        with self._left:
            yield self._fields
        with VerticalScroll(id="detail-right"):
            with Vertical(id="detail-histories"):
                yield from (self._charts[name] for name in HISTORY_TITLES)
            with Grid(id="detail-charts"):
                yield from (self._charts[name] for name in EXTRA_TITLES)
        yield FittingFooter()

    def show(self, frame: Frame, choice: ChartChoice) -> None:
        """Refresh fields and charts from ``frame`` at the zoom level of ``choice``."""
        device = self.show_fields(frame.snapshot)
        if device is not None:
            self._show_charts(device, frame.charts, choice)

    def show_fields(self, snapshot: Snapshot) -> DeviceSample | None:
        """Refresh the fields from ``snapshot`` (possible before the screen is mounted: they need no layout, so a
        screen just opened shows them in its first paint); the GPU shown, or None when it is not in the snapshot."""
        device = next((d for d in snapshot.devices if d.index == self.device_index), None)
        if device is None:
            self._fields.update(Text(f"GPU {self.device_index} is not in the latest snapshot."))
            self._last_fields = None
            return None
        fields = device_fields(device)
        sections = detail_sections(device, migs_of(snapshot.mig_devices, device.index), snapshot.processes,
                                   snapshot.timestamp)
        shown = fields + [row for title, rows in sections for row in [(title, ""), *rows]]
        if shown != self._last_fields:
            self._last_fields = shown
            self.fields_text = "\n".join(f"{label} {value}".rstrip() for label, value in shown)
            table = Table.grid(padding=(0, 1))
            table.add_column(style="dim", no_wrap=True)
            table.add_column()
            for label, value in fields:
                table.add_row(label, Text(value))
            for title, rows in sections:
                table.add_row(Text(title, style="bold"), "")
                for label, value in rows:
                    table.add_row(label, Text(value))
            self._fields.update(table)
        self._left.border_title = f"GPU {gpu_number(device)} · {short_gpu_name(device.name)}"
        return device

    def _show_charts(self, device: DeviceSample, charts: ChartView, choice: ChartChoice) -> None:
        def series(metric: str, chart: str | None = None) -> list[float | None]:
            columns = self._charts[chart or metric].columns
            return charts.series(choice.level, self.device_index, metric, columns, paged=choice.paged)

        def span(metric: str) -> str:
            return duration_text(charts.span_seconds(choice.level, self._charts[metric].columns))

        shown = {history.metric: history.metric for history in HISTORIES}
        if device.temperature_celsius is None and device.temperature_junction_celsius is not None:  # no edge sensor
            shown["temperature_celsius"] = JUNCTION.metric
            self._charts["temperature_celsius"].title = JUNCTION_TITLE
        windows = {key: series(metric, key) for key, metric in shown.items()}
        pcie_max = pcie_scale(*(windows[metric] for metric in PCIE_METRICS))
        for key, values in windows.items():
            metric = shown[key]
            maximum = scale_maximum(metric, device, pcie_max)
            scale = _scale_text(metric, maximum)
            self._charts[key].show(value_text(metric, device), values, maximum, scale, span(key))
        clocks = series("clock_sm_mhz")
        clock_max = max((v for v in clocks if v is not None), default=None)
        self._charts["clock_sm_mhz"].show(
            fmt_mhz(device.clock_sm_mhz), clocks, clock_max, fmt_mhz(clock_max), span("clock_sm_mhz")
        )
        self._charts["fan_percent"].show(
            fmt_percent(device.fan_percent), series("fan_percent"), 100.0, "100%", span("fan_percent")
        )
        for metric in GPM_METRICS:
            chart = self._charts[metric]
            chart.display = getattr(device, metric) is not None
            if chart.display:
                chart.show(fmt_percent(getattr(device, metric)), series(metric), 100.0, "100%", span(metric))


def _scale_text(metric: str, maximum: float | None) -> str:
    """The top of a history chart's scale with its unit."""
    if metric == "memory_used_bytes":
        return fmt_bytes(maximum)
    if metric == "power_watts":
        return fmt_watts(maximum)
    if metric.endswith("_celsius"):
        return fmt_celsius(maximum)
    if metric in PCIE_METRICS:
        return fmt_rate(maximum)
    return fmt_percent(maximum)
