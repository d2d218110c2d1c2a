"""Per-GPU panels: every GPU's five histories on the time grid, in as many lines as the terminal allows.

Three layouts, richest first: *full* (a title line, a line of labelled values and multi-row
charts), *strip* (two lines: labelled values above one-row charts of all five histories) and
*line* (one line: the values and one chart of the metric ``v`` picks). Each panel draws itself
with the line API from the newest frame (its ``DeviceSample`` and the time grid's chart view),
so a tick costs one refresh per panel and no widget tree changes. ``GpuArea`` mounts one panel
per GPU (remounting only when the set of GPUs changes), applies the layout the app picks with
:func:`choose_layout` and tells how much time the charts span.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from rich.style import Style
from textual.containers import VerticalScroll
from textual.events import Click
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

from gpusight.facts.gpu_selection import gpu_number
from gpusight.facts.health import HealthLevel
from gpusight.sampling.frame import Frame
from gpusight.sampling.timegrid import ChartView
from gpusight.snapshot.model import DeviceSample, MigDeviceSample, Snapshot
from gpusight.textsafe import safe_text
from gpusight.ui.main.panel import PanelContext
from gpusight.ui.terminal.line_diff import ChangedLinesRefresh
from gpusight.ui.widgets.chart import StyleFor, chart_rows
from gpusight.ui.widgets.chart_choice import (
    HISTORIES,
    HOT_CELSIUS,
    JUNCTION,
    PCIE_FLOOR,
    PCIE_METRICS,
    ChartChoice,
    ChartedMetric,
    duration_text,
    pcie_scale,
    scale_maximum,
    value_text,
)
from gpusight.ui.widgets.format import CachedStyles, LineBuilder, fit, memory_pair, power_pair, short_gpu_name, throttle_badges
from gpusight.ui.widgets.gpu_hardware import (
    DECODER,
    HealthBadge,
    engine_busy,
    engine_items,
    health_badge,
    mig_line,
    mig_short,
    mig_summary,
    migs_of,
)
from gpusight.units import fmt_celsius, fmt_mhz, fmt_percent, fmt_rate
from gpusight.vendor_text import GPM_NVIDIA_ONLY, compact_temperature, extra_temperatures, is_other_vendor

MODE_FULL = "full"
"""Title line, a line of labelled values and a row of multi-line charts."""

MODE_STRIP = "strip"
"""Two lines: labelled values above one-row charts of all five histories."""

MODE_LINE = "line"
"""One line: values and one chart of the chosen metric."""

MIN_CHART_ROWS = 2
"""Shortest chart in full mode."""

MAX_CHART_ROWS = 5
"""Tallest chart in full mode; extra space goes to the process table."""

FULL_SIX_CHARTS_MIN_WIDTH = 100
"""Narrower full panels show four charts (PCIe moves to the title line)."""

STRIP_GUTTER = 14
"""Columns left of the strip layout's charts: the GPU's number and name above, badges or clock below."""

LINE_CHART_MIN = 8
"""Narrowest chart of the one-line layout."""

WIDE_LINE = 100
"""One-line panels at least this wide add the GPU name and separators."""


def panel_height(mode: str, chart_rows_count: int) -> int:
    """Lines one GPU panel takes in ``mode``."""
    if mode == MODE_FULL:
        return 2 + chart_rows_count
    return 2 if mode == MODE_STRIP else 1


def choose_layout(count: int, budget: int, full_budget: int | None = None) -> tuple[str, int]:
    """Pick the richest mode (and chart height) that fits ``count`` GPUs in ``budget`` lines.

    Full charts must also fit ``full_budget`` (default ``budget``), so they do not crowd out the
    process table; the strip and line modes may use the whole budget.
    """
    full_budget = budget if full_budget is None else min(budget, full_budget)
    for rows in range(MAX_CHART_ROWS, MIN_CHART_ROWS - 1, -1):
        if count * panel_height(MODE_FULL, rows) <= full_budget:
            return MODE_FULL, rows
    if count * panel_height(MODE_STRIP, 0) <= budget:
        return MODE_STRIP, 0
    return MODE_LINE, 0


def chart_width(mode: str, width: int) -> int:
    """Width of each chart of a ``width``-column panel in a full or strip ``mode``."""
    if mode == MODE_STRIP:
        return max(1, (width - STRIP_GUTTER + 1) // len(HISTORIES) - 1)
    count = len(HISTORIES) if width >= FULL_SIX_CHARTS_MIN_WIDTH else 4
    return max(1, (width - (count - 1)) // count)


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
        "gpu-panel--badge-warn",
        "gpu-panel--dec",
        "gpu-panel--lost",
        "gpu-panel--util",
        "gpu-panel--mem",
        "gpu-panel--power",
        "gpu-panel--temp",
        "gpu-panel--hot",
        "gpu-panel--pcie",
    }
    """Styles of the panel's parts and chart colours (set in gpusight.tcss)."""

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
        self.choice = ChartChoice()
        """Zoom level, chart motion and the one-line layout's metric."""
        self._charts: ChartView | None = None
        self._series: dict[str, list[float | None]] = {}
        self._pcie_maximum = PCIE_FLOOR
        self._chart_cache: dict[str, tuple[tuple[object, ...], list[Strip]]] = {}
        self._chart_line: tuple[tuple[object, ...], Strip] | None = None
        self._inputs: tuple[object, ...] | None = None
        self._lines: list[Strip] | None = None
        self._lines_width = -1
        self.migs: tuple[MigDeviceSample, ...] = ()
        """The GPU's MIG devices (none on a whole GPU)."""
        self.health: HealthBadge | None = None
        """The health badge; None when nothing is wrong or health was not read."""

    def show(
        self, device: DeviceSample, charts: ChartView, choice: ChartChoice,
        migs: tuple[MigDeviceSample, ...] = (), now: float | None = None,
    ) -> None:
        """Display a new sample and chart view, with the GPU's MIG devices and its health judged at ``now`` (the
        snapshot's time); rebuilds only when what it draws changed."""
        self.device, self._charts, self.choice, self.migs = device, charts, choice, migs
        self.health = None if now is None else health_badge(device, now)
        self._set_series(self._fetch_series(device))
        layout = (self.mode, self.chart_rows_count, self.size.width, self.has_focus, choice)
        # Everything the lines are built from: the sample (less the ever-growing energy counter,
        # which is not drawn), the layout and the chart windows.
        inputs = (dataclasses.replace(device, energy_joules=None), layout, tuple(map(tuple, self._series.values())),
                  migs, self.health)
        if inputs == self._inputs and self._lines is not None:
            return
        self._inputs = inputs
        self._update_changed_lines()

    def _set_series(self, series: dict[str, list[float | None]]) -> None:
        """Keep the chart windows to draw, and the PCIe scale they share."""
        self._series = series
        self._pcie_maximum = pcie_scale(*(series.get(metric, ()) for metric in PCIE_METRICS))

    def _fetch_series(self, device: DeviceSample) -> dict[str, list[float | None]]:
        """The chart windows this layout draws, by metric (PCIe both ways whenever one is drawn)."""
        charts, width = self._charts, self.size.width
        if charts is None or width <= 0 or device.lost:
            return {}
        if self.mode == MODE_LINE:
            metric = self.choice.history.metric
            count = self._line_chart_width(device, width)
            metrics: tuple[str, ...] = PCIE_METRICS if metric in PCIE_METRICS else (metric,)
        else:
            count = chart_width(self.mode, width)
            metrics = tuple(history.metric for history in self._histories(device, width))
        level, paged = self.choice.level, self.choice.paged
        return {
            metric: charts.series(level, self.device_index, metric, count, paged=paged) for metric in metrics
        }

    def _histories(self, device: DeviceSample, width: int) -> tuple[ChartedMetric, ...]:
        """The charts of the full and strip layouts: four in a narrow full panel; a busy video decoder or encoder
        takes the last place (the temperature moves to the title line of a narrow panel)."""
        shown = HISTORIES if self.mode == MODE_STRIP or width >= FULL_SIX_CHARTS_MIN_WIDTH else HISTORIES[:4]
        if device.temperature_celsius is None and device.temperature_junction_celsius is not None:
            shown = tuple(JUNCTION if history.metric == "temperature_celsius" else history for history in shown)
        if engine_busy(device):
            shown = (*shown[:-1], DECODER)
        return shown

    @property
    def chart_columns(self) -> int:
        """Width of the panel's charts, in columns of the time grid (0 before it has drawn any)."""
        return max((len(values) for values in self._series.values()), default=0)

    def set_layout(self, mode: str, chart_rows_count: int) -> None:
        """Switch layout mode; the panel's height follows."""
        if (mode, chart_rows_count) == (self.mode, self.chart_rows_count):
            return
        self.mode, self.chart_rows_count = mode, chart_rows_count
        self.styles.height = panel_height(mode, chart_rows_count)
        self._redraw()

    def _redraw(self) -> None:
        """Fetch the chart windows again (the layout or width changed) and redraw."""
        if self.device is not None:
            self._set_series(self._fetch_series(self.device))
        self._invalidate()

    def on_mount(self) -> None:
        """Size the panel for its mode."""
        self.styles.height = panel_height(self.mode, self.chart_rows_count)

    def notify_style_update(self) -> None:
        """Drop the cached chart strips with the styles they were drawn in."""
        super().notify_style_update()
        if hasattr(self, "_chart_cache"):  # Textual may call this before __init__ has finished
            self._chart_cache.clear()
            self._chart_line = None

    def on_resize(self) -> None:
        """Charts follow the panel's width."""
        self._redraw()

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

    def _build(self, width: int) -> list[Strip]:
        device = self.device
        if device is None:
            line = LineBuilder(width, self.base_style)
            line.add_cut(f" GPU {self.device_index}: waiting for data", self._style("dim"), self.ascii_mode)
            return [line.strip()]
        if device.lost:
            return self._build_lost(device, width)
        if self.mode == MODE_FULL:
            return self._build_full(device, width)
        if self.mode == MODE_STRIP:
            return self._build_strip(device, width)
        return [self._build_line(device, width)]

    def _title_style(self) -> Style:
        return self._style("title-focus" if self.has_focus else "title")

    def _build_lost(self, device: DeviceSample, width: int) -> list[Strip]:
        title = self._title_style()
        line = LineBuilder(width, self.base_style)
        line.add(f" GPU {gpu_number(device)} ", title)
        line.add(f"{short_gpu_name(device.name)} ", title)
        line.add(" LOST ", self._style("lost"))
        line.add_cut(f" {safe_text(device.error) or 'the GPU stopped answering'}", title, self.ascii_mode)
        lines = [line.strip(title)]
        return lines + [Strip.blank(width, self.base_style)] * (panel_height(self.mode, self.chart_rows_count) - 1)

    def _detail_items(self, device: DeviceSample) -> list[tuple[str, str]]:
        """(label, value) pairs shown beside the name: only fields the GPU reports."""
        items = []
        if device.pstate is not None:
            items.append(("", f"P{device.pstate}"))
        items += [(_TEMPERATURE_LABELS[label], text) for label, text in extra_temperatures(device)]
        items.append(("fan ", fmt_percent(device.fan_percent)))
        items.append(("SM ", fmt_mhz(device.clock_sm_mhz)))
        items.append(("mem ", fmt_mhz(device.clock_memory_mhz)))
        if device.sm_active_percent is not None:
            items.append(("SM act ", fmt_percent(device.sm_active_percent)))
        if device.tensor_active_percent is not None:
            items.append(("tensor ", fmt_percent(device.tensor_active_percent)))
        items += engine_items(device)
        if device.ecc_errors_uncorrected:
            items.append(("ECC ", str(device.ecc_errors_uncorrected)))
        if device.mig_mode:
            items.append(("", f"MIG {len(self.migs)}" if self.migs else "MIG"))
        if is_other_vendor(device):
            items.append(("GPM ", GPM_NVIDIA_ONLY))
        return items

    def _badge_texts(self, device: DeviceSample, short: bool = False) -> list[tuple[str, Style]]:
        """The health badge (its ``short`` form in the strip layout), then throttle badges as (text, style), the
        costly ones first."""
        badges = sorted(throttle_badges(device.throttle_reasons), key=lambda badge: not badge[1])
        texts = [(label, "badge" if costly else "badge-benign") for label, costly in badges]
        if self.health is not None:
            texts.insert(0, (self.health.short if short else self.health.text, _LEVEL_PARTS[self.health.level]))
        return [(f"[{label}]" if self.ascii_mode else f" {label} ", self._style(part)) for label, part in texts]

    def _add_badges(self, line: LineBuilder, device: DeviceSample) -> None:
        for text, style in self._badge_texts(device):
            if not line.add(" ", None) or not line.add(text, style):
                break

    def _chart_style(self, history: ChartedMetric) -> Style | StyleFor:
        """The chart colour of ``history`` (temperature turns to the alarm colour when hot)."""
        if history.metric == "temperature_celsius":
            hot, temp = self._style("hot"), self._style("temp")
            return lambda value: hot if value >= HOT_CELSIUS else temp
        return self._style(history.part)

    def _chart(self, device: DeviceSample, history: ChartedMetric, width: int, rows: int) -> list[Strip]:
        """``rows`` strips of one chart ``width`` wide on the metric's fixed scale.

        Between two columns of the time grid most polls change only the numbers, so the strips of
        each metric are kept until its window, scale or size changes.
        """
        values = self._series.get(history.metric, [])
        maximum = scale_maximum(history.metric, device, self._pcie_maximum)
        key = (values, width, rows, maximum, self.base_style)
        cached = self._chart_cache.get(history.metric)
        if cached is not None and cached[0] == key:
            return cached[1]
        strips = chart_rows(
            values, width, rows, maximum, self._chart_style(history), ascii_mode=self.ascii_mode, blank=self.base_style
        )
        self._chart_cache[history.metric] = (key, strips)
        return strips

    def _add_value(self, line: LineBuilder, history: ChartedMetric, device: DeviceSample, room: int) -> None:
        """``label value`` in at most ``room`` cells (the value alone, cut, when both do not fit)."""
        text = value_text(history.metric, device)
        if history.metric == "utilization_gpu_percent" and device.mig_mode and device.utilization_gpu_percent is None:
            text = "N/A on MIG"
        value = self._style("hot") if _is_hot(history, device) else self._style("value")
        if len(history.label) + 1 + len(text) <= room:
            line.add(f"{history.label} ", self._style("label"))
            line.add(text, value)
        else:
            line.add(fit(text, room, self.ascii_mode), value)

    def _build_full(self, device: DeviceSample, width: int) -> list[Strip]:
        rows = self.chart_rows_count
        title = self._title_style()
        head = LineBuilder(width, self.base_style)
        head.add(f" GPU {gpu_number(device)} ", title)
        head.add_cut(f" {short_gpu_name(device.name)} ", title, self.ascii_mode)
        self._add_badges(head, device)
        details = self._detail_items(device)
        histories = self._histories(device, width)
        if width < FULL_SIX_CHARTS_MIN_WIDTH:
            details = _pcie_items(device) + details
            if DECODER in histories:
                details.insert(0, ("temp ", fmt_celsius(device.temperature_celsius)))
        self._add_items(head, details)
        column_width = chart_width(MODE_FULL, width)
        labels = LineBuilder(width, self.base_style)
        chart_lines = [LineBuilder(width, self.base_style) for _ in range(rows)]
        for position, history in enumerate(histories):
            start = position * (column_width + 1)
            labels.pad_to(start)
            self._add_value(labels, history, device, column_width)
            for builder, strip in zip(chart_lines, self._chart(device, history, column_width, rows), strict=True):
                builder.pad_to(start)
                builder.add_strip(strip)
        if self.migs:
            chart_lines = self._mig_lines(width, rows)
        return [head.strip(title), labels.strip()] + [b.strip() for b in chart_lines]

    def _mig_lines(self, width: int, rows: int) -> list[LineBuilder]:
        """A MIG-enabled GPU's chart rows give way to its MIG devices (its own utilization is N/A, so its charts
        would say little): one a line with a memory bar while they fit, else packed several to a line in short
        form (``g2 3g.40gb 31.6/39.4GiB SM 86%``), the last line counting any left over."""
        lines = []
        if len(self.migs) <= rows:
            bar = 10 if width >= 70 else 0
            for mig in self.migs:
                line = LineBuilder(width, self.base_style)
                line.add(" " + ("|-" if self.ascii_mode else "├") + " ", self._style("dim"))
                for text, part in mig_line(mig, bar, self.ascii_mode):
                    line.add_cut(text, self._style(part), self.ascii_mode)
                lines.append(line)
        else:
            pending = list(self.migs)
            while pending and len(lines) < rows:
                line = LineBuilder(width, self.base_style)
                line.add(" ")
                while pending and line.add(mig_short(pending[0]) + "  ", self._style("value")):
                    pending.pop(0)
                if line.used == 1:  # not even one fits whole: cut it
                    line.add_cut(mig_short(pending.pop(0)), self._style("value"), self.ascii_mode)
                lines.append(line)
            if pending:
                lines[-1].add_cut(f"+{len(pending)} more (Enter: details)", self._style("dim"), self.ascii_mode)
        while len(lines) < rows:
            lines.append(LineBuilder(width, self.base_style))
        return lines

    def _build_strip(self, device: DeviceSample, width: int) -> list[Strip]:
        """``0 H100 80GB  util 97%      mem 61/80GiB ...`` above ``P0 1980MHz  ▃▅▆█ ...``."""
        top, bottom = LineBuilder(width, self.base_style), LineBuilder(width, self.base_style)
        title = self._title_style()
        top.add(fit(f" {gpu_number(device)} {short_gpu_name(device.name)}", STRIP_GUTTER - 1, self.ascii_mode).ljust(STRIP_GUTTER - 1),
                title)
        badges = self._badge_texts(device, short=True)
        if badges:
            text, style = badges[0]
            bottom.add(" ")
            bottom.add(fit(text, STRIP_GUTTER - 2, self.ascii_mode), style)
        else:
            state = "" if device.pstate is None else f"P{device.pstate} "
            bottom.add(fit(f" {state}{fmt_mhz(device.clock_sm_mhz)}", STRIP_GUTTER - 1, self.ascii_mode), self._style("dim"))
        column_width = chart_width(MODE_STRIP, width)
        histories = self._histories(device, width)
        charts = [self._chart(device, history, column_width, 1)[0] for history in histories]
        for position, history in enumerate(histories):
            top.pad_to(STRIP_GUTTER + position * (column_width + 1))
            self._add_value(top, history, device, column_width)
        if self.migs:  # one line sums up the MIG devices in place of the charts
            bottom.pad_to(STRIP_GUTTER)
            bottom.add_cut(mig_summary(self.migs), self._style("value"), self.ascii_mode)
            return [top.strip(), bottom.strip()]
        return [top.strip(), self._kept_line(bottom, charts, column_width)]

    def _kept_line(self, line: LineBuilder, charts: list[Strip], column_width: int) -> Strip:
        """``line`` followed by one-row ``charts`` at their columns: the very strip of the last build
        when the charts and the start of the line are the same, so the diff skips it at once."""
        key = (tuple(line.segments), tuple(map(id, charts)), column_width)
        if self._chart_line is not None and self._chart_line[0] == key:
            return self._chart_line[1]
        for position, chart in enumerate(charts):
            line.pad_to(STRIP_GUTTER + position * (column_width + 1))
            line.add_strip(chart)
        strip = line.strip()
        self._chart_line = (key, strip)
        return strip

    def _line_fields(self, device: DeviceSample, width: int) -> tuple[str, list[tuple[str, str, str]], str]:
        """The one-line layout's number, (label, padded text, value part) fields and separator."""
        memory = memory_pair(device.memory_used_bytes, device.memory_total_bytes)
        power = power_pair(device.power_watts, device.power_limit_watts)
        hot = "hot" if _hot(device) else "value"
        temperature_label, temperature = compact_temperature(device)
        fields = [
            ("util ", f"{fmt_percent(device.utilization_gpu_percent):>4}", "value"),
            ("mem ", f"{memory:>12}", "value"),
            ("pwr ", f"{power:>8}", "value"),
            (temperature_label, f"{temperature:>4}", hot),
        ]
        separator = (" | " if self.ascii_mode else " │ ") if width >= WIDE_LINE else " "
        name = f" {gpu_number(device)} "
        if width >= WIDE_LINE:
            name += f"{fit(short_gpu_name(device.name), 18, self.ascii_mode):<18}"
        return name, fields, separator

    def _line_chart_label(self, device: DeviceSample) -> str:
        """What precedes the one-line chart: its metric's label, and its value for PCIe (not among the fields)."""
        history = self.choice.history
        if history.metric in PCIE_METRICS:
            return f"{history.label} {value_text(history.metric, device):>9} "
        return f"{history.label} "

    def _line_chart_width(self, device: DeviceSample, width: int) -> int:
        """Cells left for the one-line layout's chart (at least :data:`LINE_CHART_MIN`)."""
        name, fields, separator = self._line_fields(device, width)
        used = len(name) + sum(len(label) + len(text) + len(separator) for label, text, _ in fields)
        used += len(separator) + len(self._line_chart_label(device))
        room = width - used - 1
        badges = sum(1 + len(text) for text, _ in self._badge_texts(device))
        return max(LINE_CHART_MIN, room - badges if room - badges >= LINE_CHART_MIN else room)

    def _build_line(self, device: DeviceSample, width: int) -> Strip:
        """`` 0 util  97% mem 61.2/80GiB pwr 612/700W  71C util ▂▃▅▆█▇`` and badges where they fit."""
        name, fields, separator = self._line_fields(device, width)
        line = LineBuilder(width, self.base_style)
        line.add(name, self._title_style())
        for label, text, part in fields:
            line.add(separator, self._style("dim"))
            line.add(label, self._style("label"))
            line.add(text, self._style(part))
        history = self.choice.history
        line.add(separator, self._style("dim"))
        line.add(self._line_chart_label(device), self._style(history.part))
        line.add_strip(self._chart(device, history, self._line_chart_width(device, width), 1)[0])
        self._add_badges(line, device)
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


_TEMPERATURE_LABELS = {"junction": "jct ", "memory": "mem temp "}
"""The panel's short label of each extra temperature :func:`extra_temperatures` names."""

_LEVEL_PARTS = {HealthLevel.DRAIN: "badge", HealthLevel.WARN: "badge-warn", HealthLevel.NOTICE: "badge-benign",
                HealthLevel.OK: "badge-benign"}
"""Style part of the health badge at each level."""


def _is_hot(history: ChartedMetric, device: DeviceSample) -> bool:
    """True for the temperature of a hot GPU."""
    return history.metric == "temperature_celsius" and _hot(device)


def _hot(device: DeviceSample) -> bool:
    """True when the GPU is at or above :data:`HOT_CELSIUS`."""
    return (device.temperature_celsius or 0) >= HOT_CELSIUS


def _pcie_items(device: DeviceSample) -> list[tuple[str, str]]:
    """PCIe receive and transmit rates as label/value pairs."""
    return [("PCIe RX ", fmt_rate(device.pcie_rx_bytes_per_s)), ("TX ", fmt_rate(device.pcie_tx_bytes_per_s))]


class GpuArea(VerticalScroll, can_focus=False):
    """The stack of GPU panels; scrolls when even the one-line mode does not fit.

    Its top border names the time the charts span, the time per column and the keys that change them.
    """

    def __init__(self, *, ascii_mode: bool = False, choice: ChartChoice | None = None, id: str | None = None) -> None:
        super().__init__(id=id)
        self.ascii_mode = ascii_mode
        """Passed on to every panel."""
        self._indexes: tuple[int, ...] | None = None
        self._frame: Frame | None = None
        self.mode = MODE_FULL
        """Layout mode applied to every panel."""
        self.chart_rows_count = 3
        """Chart height in full mode."""
        self._budget: int | None = None
        self.choice = ChartChoice() if choice is None else choice
        """Zoom level, chart motion and the one-line layout's metric, shared by every panel."""

    @property
    def panels(self) -> list[GpuPanel]:
        """The mounted panels, in GPU order."""
        return list(self.query_children(GpuPanel))

    @property
    def gpu_count(self) -> int:
        """How many GPUs the last snapshot had."""
        return len(self._indexes or ())

    async def show_frame(self, frame: Frame, context: PanelContext) -> None:
        """Show ``frame``'s GPUs (the panel interface; see :meth:`show`)."""
        await self.show(frame)

    async def show(self, frame: Frame) -> None:
        """Show ``frame``'s GPUs, mounting panels only when the set of GPUs changed."""
        self._frame = frame
        snapshot = frame.snapshot
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
            self._fit()
        self._show_panels()

    def set_choice(self, choice: ChartChoice) -> None:
        """Chart at another zoom level, motion or one-line metric; applied at once."""
        self.choice = choice
        self._show_panels()

    def _show_panels(self) -> None:
        frame = self._frame
        if frame is None or not self._indexes:
            self.border_title = None
            return
        # Fewer panels than GPUs while the app tears the screen down (a snapshot can still arrive then).
        panels = self.panels
        snapshot = frame.snapshot
        for panel, device in zip(panels, snapshot.devices, strict=False):
            panel.show(device, frame.charts, self.choice, migs_of(snapshot.mig_devices, device.index), snapshot.timestamp)
        columns = max((panel.chart_columns for panel in panels), default=0)
        title = self._title(frame, columns)
        if title != self.border_title:  # setting it, even unchanged, repaints the whole area
            self.border_title = title

    def _title(self, frame: Frame, columns: int) -> str:
        """``8× H100 80GB HBM3 · last 25s · 1s/column · z zoom`` (plus the one-line layout's metric and key)."""
        charts = frame.charts
        level = charts.levels[self.choice.level]
        names = {device.name for device in frame.snapshot.devices}
        count = len(frame.snapshot.devices)
        times = "x" if self.ascii_mode else "×"
        parts = [f"{count}{times} {short_gpu_name(names.pop())}" if len(names) == 1 else "GPU history"]
        if columns:
            parts.append(f"last {duration_text(charts.span_seconds(self.choice.level, columns))}")
        parts += [f"{duration_text(level.seconds)}/column", "z zoom"]
        if self.mode == MODE_LINE:
            parts.append(f"v chart: {self.choice.history.label}")
        return " · ".join(parts) if not self.ascii_mode else " - ".join(parts)

    @staticmethod
    def _no_gpu_text(snapshot: Snapshot) -> str:
        reason = next((e for e in snapshot.errors if e.scope in ("nvml", "gpu")), None)
        detail = f": {safe_text(reason.message)}" if reason else ""
        return f"No GPU data{detail}"

    def apply_layout(self, mode: str, chart_rows_count: int, budget: int) -> None:
        """Use ``mode`` for every panel and take at most ``budget`` lines (its top border included)."""
        self.mode, self.chart_rows_count, self._budget = mode, chart_rows_count, budget
        for panel in self.panels:
            panel.set_layout(mode, chart_rows_count)
        self._fit()
        self._show_panels()

    def _fit(self) -> None:
        """Take at most the budget (none before the app gave one): the panels size the area (CSS ``height: auto``),
        and it scrolls beyond. Without GPU panels (none yet, or none found) it keeps the room of one panel."""
        if self._budget is None:
            return
        self.styles.max_height = self._budget
        if self._indexes:
            if self.styles.inline.has_rule("height"):
                self.styles.height = None
        else:
            self.styles.height = min(self._budget, panel_height(self.mode, self.chart_rows_count) + 1)
