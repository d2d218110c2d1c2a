"""Per-GPU panels: full charts when there is room, one or two lines with mini-charts when there is not.

Each panel draws itself with the line API from the latest ``DeviceSample`` and the sampler's
history, so a tick costs one refresh per panel and no widget tree changes. ``GpuArea`` mounts
one panel per GPU (remounting only when the set of GPUs changes) and applies the layout the app
picks with :func:`choose_layout`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import ClassVar

from rich.style import Style
from textual.containers import VerticalScroll
from textual.events import Click
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

from gputop.collect.gpu_selection import gpu_number
from gputop.collect.history import History
from gputop.collect.model import DeviceSample, Snapshot
from gputop.textsafe import safe_text
from gputop.ui.chart import StyleFor, chart_rows
from gputop.ui.format import (
    CachedStyles,
    LineBuilder,
    fit,
    memory_pair,
    power_pair,
    short_gpu_name,
    throttle_badges,
)
from gputop.ui.line_diff import ChangedLinesRefresh
from gputop.units import fmt_celsius, fmt_mhz, fmt_percent, fmt_rate

MODE_FULL = "full"
"""Title line, a line of labelled values and a row of multi-line charts."""

MODE_COMPACT2 = "compact2"
"""Two lines: values with inline mini-charts, then clocks, PCIe and throttle badges."""

MODE_COMPACT1 = "compact1"
"""One line: values with inline mini-charts."""

MIN_CHART_ROWS = 2
"""Shortest chart in full mode."""

MAX_CHART_ROWS = 5
"""Tallest chart in full mode; extra space goes to the process table."""

HOT_CELSIUS = 85.0
"""Temperature drawn in the alarm colour."""

FULL_SIX_CHARTS_MIN_WIDTH = 100
"""Narrower panels show four charts (PCIe moves to the title line)."""

MINI_CHART_MIN = 4
"""Narrowest inline chart in the compact modes."""

MINI_CHART_MAX = 24
"""Widest inline chart in the compact modes."""

PCIE_SCALE_SAMPLES = 200
"""Newest PCIe samples the full layout's shared RX/TX scale is chosen from."""

_FULL_METRICS: tuple[str, ...] = (
    "utilization_gpu_percent",
    "memory_used_bytes",
    "power_watts",
    "temperature_celsius",
    "pcie_rx_bytes_per_s",
    "pcie_tx_bytes_per_s",
)
"""Metrics charted by the full layout."""

_COMPACT_METRICS: tuple[str, ...] = ("utilization_gpu_percent", "memory_used_bytes", "power_watts")
"""Metrics charted inline by the compact layouts."""

PCIE_FLOOR = 1e6
"""Smallest PCIe chart scale (1 MB/s), so an idle link does not magnify noise."""


def panel_height(mode: str, chart_rows_count: int) -> int:
    """Lines one GPU panel takes in ``mode``."""
    if mode == MODE_FULL:
        return 2 + chart_rows_count
    return 2 if mode == MODE_COMPACT2 else 1


def choose_layout(count: int, budget: int, full_budget: int | None = None) -> tuple[str, int]:
    """Pick the richest mode (and chart height) that fits ``count`` GPUs in ``budget`` lines.

    Full charts must also fit ``full_budget`` (default ``budget``), so they do not crowd out the
    process table; the compact modes may use the whole budget.
    """
    full_budget = budget if full_budget is None else min(budget, full_budget)
    for rows in range(MAX_CHART_ROWS, MIN_CHART_ROWS - 1, -1):
        if count * panel_height(MODE_FULL, rows) <= full_budget:
            return MODE_FULL, rows
    if count * 2 <= budget:
        return MODE_COMPACT2, 0
    return MODE_COMPACT1, 0


def nice_ceiling(value: float, floor: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten that is at least ``value`` (and ``floor``)."""
    value = max(value, floor)
    exponent = math.floor(math.log10(value))
    for step in (1.0, 2.0, 5.0, 10.0):
        candidate = step * 10.0**exponent
        if candidate >= value:
            return candidate
    return 10.0 ** (exponent + 1)


def pcie_scale(rx: Sequence[float | None], tx: Sequence[float | None]) -> float:
    """Shared fixed scale for the RX and TX charts: a round number above the peak on screen."""
    peak = max((v for v in (*rx, *tx) if v is not None), default=0.0)
    return nice_ceiling(peak, PCIE_FLOOR)


class GpuPanel(ChangedLinesRefresh, CachedStyles, Widget, can_focus=True):
    """One GPU: name, values with units, throttle badges and history charts.

    Focus it (Tab or click) and press Enter for the detail screen.
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "gpu-panel--title",
        "gpu-panel--title-focus",
        "gpu-panel--label",
        "gpu-panel--value",
        "gpu-panel--dim",
        "gpu-panel--badge",
        "gpu-panel--badge-benign",
        "gpu-panel--lost",
        "gpu-panel--util",
        "gpu-panel--mem",
        "gpu-panel--power",
        "gpu-panel--temp",
        "gpu-panel--hot",
        "gpu-panel--pcie",
    }
    """Styles of the panel's parts and chart colours (set in gputop.tcss)."""

    def __init__(self, device_index: int, *, ascii_mode: bool = False) -> None:
        super().__init__(id=f"gpu-{device_index}")
        self.device_index = device_index
        """NVML index of the GPU shown."""
        self.ascii_mode = ascii_mode
        """Draw charts and separators with ASCII only."""
        self.device: DeviceSample | None = None
        """Latest sample of this GPU."""
        self.mode = MODE_FULL
        """Current layout mode."""
        self.chart_rows_count = 3
        """Chart height in full mode."""
        self._history: History | None = None
        self._inputs: tuple[object, ...] | None = None
        self._lines: list[Strip] | None = None
        self._lines_width = -1

    def show(self, device: DeviceSample, history: History) -> None:
        """Display a new sample (and the history it extends); rebuilds only when what it draws changed."""
        self.device = device
        self._history = history
        inputs = self._drawn_inputs(device)
        if inputs == self._inputs and self._lines is not None:
            return
        self._inputs = inputs
        self._update_changed_lines()

    def _drawn_inputs(self, device: DeviceSample) -> tuple[object, ...]:
        """Everything the panel's lines are built from: the sample (less the ever-growing energy
        counter, which is not drawn), the layout, and the newest history each chart can show."""
        if self.mode == MODE_FULL:  # charts up to the panel's width; the PCIe scale looks further back
            window, metrics = max(self.size.width, PCIE_SCALE_SAMPLES), _FULL_METRICS
        else:
            window, metrics = MINI_CHART_MAX, _COMPACT_METRICS
        series = tuple(tuple(self._series(metric, window)) for metric in metrics)
        layout = (self.mode, self.chart_rows_count, self.size.width, self.has_focus)
        return (dataclasses.replace(device, energy_joules=None), layout, series)

    def set_layout(self, mode: str, chart_rows_count: int) -> None:
        """Switch layout mode; the panel's height follows."""
        if (mode, chart_rows_count) == (self.mode, self.chart_rows_count):
            return
        self.mode, self.chart_rows_count = mode, chart_rows_count
        self.styles.height = panel_height(mode, chart_rows_count)
        self._invalidate()

    def on_mount(self) -> None:
        """Size the panel for its mode."""
        self.styles.height = panel_height(self.mode, self.chart_rows_count)

    def on_focus(self) -> None:
        """Highlight the title when focused."""
        self._invalidate()

    def on_blur(self) -> None:
        """Drop the highlight."""
        self._invalidate()

    async def on_click(self, event: Click) -> None:
        """A double click opens this GPU's detail screen."""
        if event.chain >= 2:
            await self.app.run_action(f"gpu_detail({self.device_index})")

    def render_line(self, y: int) -> Strip:
        """One line of the panel."""
        width = self.size.width
        if self._lines is None or self._lines_width != width:
            self._lines = self._build(width)
            self._lines_width = width
        return self._lines[y] if y < len(self._lines) else Strip.blank(width, self.base_style)

    def _style(self, name: str) -> Style:
        return self.component_style(f"gpu-panel--{name}")

    def _series(self, metric: str, count: int) -> list[float | None]:
        if self._history is None or count <= 0:
            return []
        return self._history.device(self.device_index, metric, last=count)

    def _build(self, width: int) -> list[Strip]:
        device = self.device
        if device is None:
            line = LineBuilder(width, self.base_style)
            line.add_cut(f" GPU {self.device_index}: waiting for data", self._style("dim"))
            return [line.strip()]
        if device.lost:
            return self._build_lost(device, width)
        if self.mode == MODE_FULL:
            return self._build_full(device, width)
        lines = [self._compact_main(device, width, badges=self.mode == MODE_COMPACT1)]
        if self.mode == MODE_COMPACT2:
            lines.append(self._compact_details(device, width))
        return lines

    def _title_style(self) -> Style:
        return self._style("title-focus" if self.has_focus else "title")

    def _build_lost(self, device: DeviceSample, width: int) -> list[Strip]:
        title = self._title_style()
        line = LineBuilder(width, self.base_style)
        line.add(f" GPU {gpu_number(device)} ", title)
        line.add(f"{short_gpu_name(device.name)} ", title)
        line.add(" LOST ", self._style("lost"))
        line.add_cut(f" {safe_text(device.error) or 'the GPU stopped answering'}", title)
        lines = [line.strip(title)]
        return lines + [Strip.blank(width, self.base_style)] * (panel_height(self.mode, self.chart_rows_count) - 1)

    def _detail_items(self, device: DeviceSample) -> list[tuple[str, str]]:
        """(label, value) pairs shown beside the name: only fields the GPU reports."""
        items = []
        if device.pstate is not None:
            items.append(("", f"P{device.pstate}"))
        items.append(("fan ", fmt_percent(device.fan_percent)))
        items.append(("SM ", fmt_mhz(device.clock_sm_mhz)))
        items.append(("mem ", fmt_mhz(device.clock_memory_mhz)))
        if device.sm_active_percent is not None:
            items.append(("SM act ", fmt_percent(device.sm_active_percent)))
        if device.tensor_active_percent is not None:
            items.append(("tensor ", fmt_percent(device.tensor_active_percent)))
        if device.ecc_errors_uncorrected:
            items.append(("ECC ", str(device.ecc_errors_uncorrected)))
        if device.mig_mode:
            items.append(("", "MIG"))
        return items

    def _add_badges(self, line: LineBuilder, device: DeviceSample) -> None:
        for label, costly in throttle_badges(device.throttle_reasons):
            text = f"[{label}]" if self.ascii_mode else f" {label} "
            if not line.add(" ", None) or not line.add(text, self._style("badge" if costly else "badge-benign")):
                break

    def _build_full(self, device: DeviceSample, width: int) -> list[Strip]:
        rows = self.chart_rows_count
        title = self._title_style()
        head = LineBuilder(width, self.base_style)
        head.add(f" GPU {gpu_number(device)} ", title)
        head.add_cut(f" {short_gpu_name(device.name)} ", title)
        self._add_badges(head, device)
        details = self._detail_items(device)
        columns = self._full_columns(device)
        if width < FULL_SIX_CHARTS_MIN_WIDTH:
            columns = columns[:4]
            details = _pcie_items(device) + details
        self._add_items(head, details)
        label, value = self._style("label"), self._style("value")
        count = len(columns)
        column_width = max(1, (width - (count - 1)) // count)
        labels = LineBuilder(width, self.base_style)
        chart_lines = [LineBuilder(width, self.base_style) for _ in range(rows)]
        for position, (name, text, metric, maximum, style) in enumerate(columns):
            start = position * (column_width + 1)
            labels.pad_to(start)
            full = f"{name} {text}"
            if len(full) <= column_width:
                labels.add(f"{name} ", label)
                labels.add(text, value)
            else:
                labels.add(fit(text, column_width), value)
            strips = chart_rows(
                self._series(metric, column_width),
                column_width,
                rows,
                maximum,
                style,
                ascii_mode=self.ascii_mode,
                blank=self.base_style,
            )
            for builder, strip in zip(chart_lines, strips, strict=True):
                builder.pad_to(start)
                builder.add_strip(strip)
        return [head.strip(title), labels.strip()] + [b.strip() for b in chart_lines]

    def _full_columns(self, device: DeviceSample) -> list[tuple[str, str, str, float | None, Style | StyleFor]]:
        """(label, value text, metric, scale maximum, style) of each chart, most important first."""
        hot, temp = self._style("hot"), self._style("temp")
        pcie_max = pcie_scale(
            self._series("pcie_rx_bytes_per_s", PCIE_SCALE_SAMPLES), self._series("pcie_tx_bytes_per_s", PCIE_SCALE_SAMPLES)
        )
        return [
            ("util", fmt_percent(device.utilization_gpu_percent), "utilization_gpu_percent", 100.0, self._style("util")),
            (
                "mem",
                memory_pair(device.memory_used_bytes, device.memory_total_bytes),
                "memory_used_bytes",
                device.memory_total_bytes,
                self._style("mem"),
            ),
            (
                "power",
                power_pair(device.power_watts, device.power_limit_watts),
                "power_watts",
                device.power_limit_watts,
                self._style("power"),
            ),
            (
                "temp",
                fmt_celsius(device.temperature_celsius),
                "temperature_celsius",
                100.0,
                lambda v: hot if v >= HOT_CELSIUS else temp,
            ),
            ("PCIe RX", fmt_rate(device.pcie_rx_bytes_per_s), "pcie_rx_bytes_per_s", pcie_max, self._style("pcie")),
            ("PCIe TX", fmt_rate(device.pcie_tx_bytes_per_s), "pcie_tx_bytes_per_s", pcie_max, self._style("pcie")),
        ]

    def _compact_main(self, device: DeviceSample, width: int, *, badges: bool) -> Strip:
        """``0 H100 80GB │util ▂▅█ 97% │mem ▃▄ 61/80GiB │pwr ▅▆ 612/700W │71C``."""
        title = self._title_style()
        label, value = self._style("label"), self._style("value")
        wide = width >= 100
        sep = (" | " if self.ascii_mode else " │ ") if wide else " "
        memory = memory_pair(device.memory_used_bytes, device.memory_total_bytes)
        power = power_pair(device.power_watts, device.power_limit_watts)
        fields = [
            ("util ", f"{fmt_percent(device.utilization_gpu_percent):>4}", "utilization_gpu_percent", 100.0, "util"),
            ("mem ", f"{memory:>12}", "memory_used_bytes", device.memory_total_bytes, "mem"),
            ("pwr ", f"{power:>8}", "power_watts", device.power_limit_watts, "power"),
        ]
        temp_text = f"{fmt_celsius(device.temperature_celsius):>4}"
        name = f"{fit(short_gpu_name(device.name), 18 if wide else 14):<{18 if wide else 14}}"
        number = f" {gpu_number(device)} "
        fixed = len(number) + 1 + len(name) + len(sep) * 4 + len(temp_text)
        fixed += sum(len(f[0]) + len(f[1]) for f in fields)
        spare = width - fixed
        charts = min(len(fields), max(0, spare // (MINI_CHART_MIN + 1)))
        chart_width = min(MINI_CHART_MAX, spare // charts - 1) if charts else 0
        line = LineBuilder(width, self.base_style)
        line.add(number, title)
        line.add(" ")
        line.add(name, value)
        for position, (text_label, text, metric, maximum, colour) in enumerate(fields):
            line.add(sep, self._style("dim"))
            if not line.add(text_label, label):
                break
            if position < charts:
                strip = chart_rows(
                    self._series(metric, chart_width),
                    chart_width,
                    1,
                    maximum,
                    self._style(colour),
                    ascii_mode=self.ascii_mode,
                    blank=self.base_style,
                )[0]
                line.add_strip(strip)
                line.add(" ")
            if not line.add(text, value):
                line.add_cut(text, value)
                break
        if line.add(sep, self._style("dim")):
            line.add(temp_text, self._style("hot") if (device.temperature_celsius or 0) >= HOT_CELSIUS else value)
        if badges:
            self._add_badges(line, device)
        return line.strip()

    def _compact_details(self, device: DeviceSample, width: int) -> Strip:
        """Second compact line: badges, clocks, fan, PCIe and GPM activity."""
        line = LineBuilder(width, self.base_style)
        line.add("   ")
        self._add_badges(line, device)
        self._add_items(line, _pcie_items(device) + self._detail_items(device))
        return line.strip()

    def _add_items(self, line: LineBuilder, items: list[tuple[str, str]]) -> None:
        """Append ``label value`` pairs while they fit whole."""
        label, value = self._style("label"), self._style("value")
        for name, text in items:
            if line.room < len(name) + len(text) + 2:
                break
            line.add("  ")
            line.add(name, label)
            line.add(text, value)


def _pcie_items(device: DeviceSample) -> list[tuple[str, str]]:
    """PCIe receive and transmit rates as label/value pairs."""
    return [("PCIe RX ", fmt_rate(device.pcie_rx_bytes_per_s)), ("TX ", fmt_rate(device.pcie_tx_bytes_per_s))]


class GpuArea(VerticalScroll, can_focus=False):
    """The stack of GPU panels; scrolls when even the one-line mode does not fit."""

    def __init__(self, *, ascii_mode: bool = False, id: str | None = None) -> None:
        super().__init__(id=id)
        self.ascii_mode = ascii_mode
        """Passed on to every panel."""
        self._indexes: tuple[int, ...] | None = None
        self.mode = MODE_FULL
        """Layout mode applied to every panel."""
        self.chart_rows_count = 3
        """Chart height in full mode."""

    @property
    def panels(self) -> list[GpuPanel]:
        """The mounted panels, in GPU order."""
        return list(self.query_children(GpuPanel))

    @property
    def gpu_count(self) -> int:
        """How many GPUs the last snapshot had."""
        return len(self._indexes or ())

    async def show(self, snapshot: Snapshot, history: History) -> None:
        """Show ``snapshot``'s GPUs, mounting panels only when the set of GPUs changed."""
        indexes = tuple(d.index for d in snapshot.devices)
        if indexes != self._indexes:
            self._indexes = indexes
            await self.remove_children()
            if indexes:
                panels = [GpuPanel(i, ascii_mode=self.ascii_mode) for i in indexes]
                for panel in panels:
                    panel.set_layout(self.mode, self.chart_rows_count)
                await self.mount_all(panels)
            else:
                await self.mount(Static(self._no_gpu_text(snapshot), classes="no-gpus"))
        if not indexes:
            return
        # Fewer panels than GPUs while the app tears the screen down (a snapshot can still arrive then).
        for panel, device in zip(self.panels, snapshot.devices, strict=False):
            panel.show(device, history)

    @staticmethod
    def _no_gpu_text(snapshot: Snapshot) -> str:
        reason = next((e for e in snapshot.errors if e.scope in ("nvml", "gpu")), None)
        detail = f": {safe_text(reason.message)}" if reason else ""
        return f"No GPU data{detail}"

    def apply_layout(self, mode: str, chart_rows_count: int, budget: int) -> None:
        """Use ``mode`` for every panel and take at most ``budget`` lines."""
        self.mode, self.chart_rows_count = mode, chart_rows_count
        for panel in self.panels:
            panel.set_layout(mode, chart_rows_count)
        need = max(1, self.gpu_count) * panel_height(mode, chart_rows_count)
        self.styles.height = max(1, min(need, budget))

