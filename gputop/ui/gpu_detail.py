"""The GPU detail screen (Enter on a GPU): every field of the device and larger history charts."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from gputop.collect.gpu_selection import gpu_number
from gputop.collect.history import History
from gputop.collect.model import DeviceSample, Snapshot
from gputop.textsafe import safe_text
from gputop.ui.chart import Chart
from gputop.ui.format import (
    memory_pair,
    percent_of,
    power_pair,
    short_gpu_name,
    throttle_badges,
)
from gputop.ui.gpu_panel import pcie_scale
from gputop.units import (
    NA,
    fmt_bytes,
    fmt_celsius,
    fmt_mhz,
    fmt_percent,
    fmt_rate,
    fmt_watts,
)

CHART_HISTORY = 400
"""Most samples fetched for a detail chart (wider than any terminal column)."""

GPM_METRICS = ("sm_active_percent", "tensor_active_percent", "dram_active_percent")
"""Charts shown only when the GPU reports them (Hopper and later)."""


def device_fields(device: DeviceSample) -> list[tuple[str, str]]:
    """Every field of ``device`` as (label, text with units); unknown values read ``N/A``."""
    capability = device.compute_capability
    badges = ", ".join(label for label, _ in throttle_badges(device.throttle_reasons)) or "none"
    mig = NA if device.mig_mode is None else ("enabled" if device.mig_mode else "disabled")
    return [
        ("name", safe_text(device.name) or NA),
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
        ("fan", fmt_percent(device.fan_percent)),
        ("SM clock", fmt_mhz(device.clock_sm_mhz)),
        ("memory clock", fmt_mhz(device.clock_memory_mhz)),
        ("performance state", NA if device.pstate is None else f"P{device.pstate}"),
        ("throttle reasons", badges),
        ("PCIe RX", fmt_rate(device.pcie_rx_bytes_per_s)),
        ("PCIe TX", fmt_rate(device.pcie_tx_bytes_per_s)),
        ("SM active (GPM)", fmt_percent(device.sm_active_percent)),
        ("SM occupancy (GPM)", fmt_percent(device.sm_occupancy_percent)),
        ("tensor active (GPM)", fmt_percent(device.tensor_active_percent)),
        ("DRAM active (GPM)", fmt_percent(device.dram_active_percent)),
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

    def show(self, value: str, values: list[float | None], maximum: float | None, scale: str) -> None:
        """Update the caption and the series."""
        self.caption.update(Text.assemble((self.title, "bold"), f" {value}", (f"  (0..{scale})", "dim")))
        width = self.chart.size.width or CHART_HISTORY
        self.chart.set_series(values[-width:], maximum)


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
        self._charts: dict[str, LabelledChart] = {}
        self._last_fields: list[tuple[str, str]] | None = None

    def compose(self) -> ComposeResult:
        """Fields on the left, charts in a grid on the right."""
        names = [
            "utilization_gpu_percent",
            "memory_used_bytes",
            "power_watts",
            "temperature_celsius",
            "pcie_rx_bytes_per_s",
            "pcie_tx_bytes_per_s",
            "clock_sm_mhz",
            "fan_percent",
            *GPM_METRICS,
        ]
        titles = {
            "utilization_gpu_percent": "GPU util",
            "memory_used_bytes": "memory used",
            "power_watts": "power",
            "temperature_celsius": "temperature",
            "pcie_rx_bytes_per_s": "PCIe RX",
            "pcie_tx_bytes_per_s": "PCIe TX",
            "clock_sm_mhz": "SM clock",
            "fan_percent": "fan",
            "sm_active_percent": "SM active",
            "tensor_active_percent": "tensor active",
            "dram_active_percent": "DRAM active",
        }
        for name in names:
            self._charts[name] = LabelledChart(titles[name], ascii_mode=self.ascii_mode, id=f"chart-{name}")
        with VerticalScroll(id="detail-left") as left:
            left.border_title = f"GPU {self.device_index}"
            yield self._fields
        with Grid(id="detail-charts"):
            yield from self._charts.values()
        yield Footer()

    def show(self, snapshot: Snapshot, history: History) -> None:
        """Refresh fields and charts from ``snapshot`` and ``history``."""
        device = next((d for d in snapshot.devices if d.index == self.device_index), None)
        if device is None:
            self._fields.update(Text(f"GPU {self.device_index} is not in the latest snapshot."))
            self._last_fields = None
            return
        fields = device_fields(device)
        if fields != self._last_fields:
            self._last_fields = fields
            table = Table.grid(padding=(0, 1))
            table.add_column(style="dim", no_wrap=True)
            table.add_column()
            for label, value in fields:
                table.add_row(label, Text(value))
            self._fields.update(table)
        left = self.query_one("#detail-left")
        left.border_title = f"GPU {gpu_number(device)} · {short_gpu_name(device.name)}"
        self._show_charts(device, history)

    def _show_charts(self, device: DeviceSample, history: History) -> None:
        def series(metric: str) -> list[float | None]:
            return history.device(self.device_index, metric, last=CHART_HISTORY)

        rx, tx = series("pcie_rx_bytes_per_s"), series("pcie_tx_bytes_per_s")
        pcie_max = pcie_scale(rx, tx)
        clocks = [v for v in series("clock_sm_mhz") if v is not None]
        clock_max = max(clocks, default=None)
        total = device.memory_total_bytes
        limit = device.power_limit_watts
        charts = self._charts
        charts["utilization_gpu_percent"].show(
            fmt_percent(device.utilization_gpu_percent), series("utilization_gpu_percent"), 100.0, "100%"
        )
        charts["memory_used_bytes"].show(
            memory_pair(device.memory_used_bytes, total), series("memory_used_bytes"), total, fmt_bytes(total)
        )
        charts["power_watts"].show(
            power_pair(device.power_watts, limit), series("power_watts"), limit, fmt_watts(limit)
        )
        charts["temperature_celsius"].show(
            fmt_celsius(device.temperature_celsius), series("temperature_celsius"), 100.0, "100C"
        )
        charts["pcie_rx_bytes_per_s"].show(fmt_rate(device.pcie_rx_bytes_per_s), rx, pcie_max, fmt_rate(pcie_max))
        charts["pcie_tx_bytes_per_s"].show(fmt_rate(device.pcie_tx_bytes_per_s), tx, pcie_max, fmt_rate(pcie_max))
        charts["clock_sm_mhz"].show(fmt_mhz(device.clock_sm_mhz), series("clock_sm_mhz"), clock_max, fmt_mhz(clock_max))
        charts["fan_percent"].show(fmt_percent(device.fan_percent), series("fan_percent"), 100.0, "100%")
        for metric in GPM_METRICS:
            values = series(metric)
            known = any(v is not None for v in values)
            chart = charts[metric]
            chart.display = known
            if known:
                chart.show(fmt_percent(getattr(device, metric)), values, 100.0, "100%")
