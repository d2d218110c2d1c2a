"""What the GPU charts show: the five histories, declared once, and the user's zoom and metric choice.

Every layout charts :data:`HISTORIES` (utilization, memory, power, temperature, PCIe RX and TX) on
the sampler's time grid. The one-line layout has room for one chart per GPU, so ``v`` cycles the
metric it charts; ``z`` zooms the time scale of every chart. The choice is an immutable
:class:`ChartChoice` the app replaces on each key.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from gpusight.sampling.timegrid import ZOOM_FACTORS
from gpusight.snapshot.model import DeviceSample
from gpusight.ui.widgets.format import memory_pair, power_pair
from gpusight.units import fmt_celsius, fmt_percent, fmt_rate


@dataclass(frozen=True)
class ChartedMetric:
    """One charted metric: where its values come from and how it is labelled and coloured."""

    metric: str
    """DeviceSample field and time-grid metric."""
    label: str
    """Short label written beside its value."""
    part: str
    """GPU panel component part (``gpu-panel--<part>``) that colours its chart."""


HISTORIES: tuple[ChartedMetric, ...] = (
    ChartedMetric("utilization_gpu_percent", "util", "util"),
    ChartedMetric("memory_used_bytes", "mem", "mem"),
    ChartedMetric("power_watts", "pwr", "power"),
    ChartedMetric("temperature_celsius", "temp", "temp"),
    ChartedMetric("pcie_rx_bytes_per_s", "RX", "pcie"),
    ChartedMetric("pcie_tx_bytes_per_s", "TX", "pcie"),
)
"""The histories every layout offers, in screen order."""

JUNCTION = ChartedMetric("temperature_junction_celsius", "jct", "temp")
"""The temperature chart of a GPU with a junction sensor but no core (edge) sensor, such as an MI300X."""

PCIE_METRICS = ("pcie_rx_bytes_per_s", "pcie_tx_bytes_per_s")
"""The two PCIe histories, which share one scale so RX and TX compare at a glance."""

PCIE_FLOOR = 1e6
"""Smallest PCIe chart scale (1 MB/s), so an idle link does not magnify noise."""

HOT_CELSIUS = 85.0
"""Temperature drawn in the alarm colour."""

TEMPERATURE_SCALE = 100.0
"""Top of the temperature charts, in Celsius."""


@dataclass(frozen=True)
class ChartChoice:
    """The zoom level, the chart motion and the metric the one-line layout charts."""

    level: int = 0
    """Zoom level of the time grid (0: the closest, e.g. 1 s per column)."""
    paged: bool = True
    """Move charts a quarter of their width at a time (True) or one column at a time."""
    metric: int = 0
    """Index in :data:`HISTORIES` of the metric the one-line layout charts."""

    @property
    def history(self) -> ChartedMetric:
        """The metric the one-line layout charts."""
        return HISTORIES[self.metric % len(HISTORIES)]

    def zoomed(self) -> ChartChoice:
        """The next zoom level, back to the closest after the farthest."""
        return replace(self, level=(self.level + 1) % len(ZOOM_FACTORS))

    def next_metric(self) -> ChartChoice:
        """The next metric for the one-line layout."""
        return replace(self, metric=(self.metric + 1) % len(HISTORIES))


def value_text(metric: str, device: DeviceSample) -> str:
    """The current value of a charted metric as the panels write it (``N/A`` when unknown)."""
    if metric.endswith("_percent"):
        return fmt_percent(getattr(device, metric))
    if metric == "memory_used_bytes":
        return memory_pair(device.memory_used_bytes, device.memory_total_bytes)
    if metric == "power_watts":
        return power_pair(device.power_watts, device.power_limit_watts)
    if metric.endswith("_celsius"):
        return fmt_celsius(getattr(device, metric))
    return fmt_rate(getattr(device, metric))


def scale_maximum(metric: str, device: DeviceSample, pcie_maximum: float) -> float | None:
    """Top of a metric's fixed chart scale (None when unknown, which draws the chart blank)."""
    if metric.endswith("_percent"):
        return 100.0
    if metric == "memory_used_bytes":
        return device.memory_total_bytes
    if metric == "power_watts":
        return device.power_limit_watts
    if metric.endswith("_celsius"):
        return TEMPERATURE_SCALE
    return pcie_maximum


def nice_ceiling(value: float, floor: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten that is at least ``value`` (and ``floor``)."""
    value = max(value, floor)
    exponent = math.floor(math.log10(value))
    for step in (1.0, 2.0, 5.0, 10.0):
        candidate = step * 10.0**exponent
        if candidate >= value:
            return candidate
    return 10.0 ** (exponent + 1)


def pcie_scale(*series: Sequence[float | None]) -> float:
    """Shared fixed scale for PCIe charts: a round number above the peak of what they show."""
    peak = max((v for values in series for v in values if v is not None), default=0.0)
    return nice_ceiling(peak, PCIE_FLOOR)


def duration_text(seconds: float) -> str:
    """A span of time in the largest unit that keeps it short: ``45s``, ``10m``, ``2h30m``, ``1.5s``."""
    if seconds < 10 and seconds != int(seconds):
        return f"{seconds:.1f}s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 60:
        rest = whole % 60
        return f"{minutes}m{rest:02d}s" if rest and minutes < 10 else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if minutes else f"{hours}h"
