"""Words and numbers the cluster view shows, derived from a :class:`~gpusight.cluster.frame.ClusterFrame`.

Everything that comes from a remote exporter (host names, models, process names, users, containers,
notes, advice) is untrusted: it is escaped here with :func:`~gpusight.textsafe.safe_text`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gpusight.cluster.counts import counted
from gpusight.cluster.frame import ClusterFrame, ClusterGpu, ClusterHistory, ClusterProcess
from gpusight.metric_names import FB_USED, GPU_TEMP, GPU_UTIL, PCIE_RX, PCIE_TX, POWER_USAGE
from gpusight.snapshot.model import Severity
from gpusight.textsafe import safe_text
from gpusight.ui.widgets.chart_choice import TEMPERATURE_SCALE, nice_ceiling
from gpusight.ui.widgets.format import severity_rank
from gpusight.units import NA

MIB = 1024 * 1024
"""Bytes in a MiB (dcgm-exporter's framebuffer unit)."""

POWER_FLOOR_WATTS = 100.0
"""Least top of a power chart's scale."""

STALE_SLACK_SECONDS = 1.0
"""The poll age is shown once the data on screen is older than the interval plus this."""

PCIE_FLOOR = 1e6
"""Least top of a PCIe chart's scale, in bytes per second."""


@dataclass(frozen=True, slots=True)
class ChartMetric:
    """A history the cluster view charts: its metric and how it is labelled and scaled."""

    metric: str
    """The metric's name in ``ClusterFrame.history``."""
    label: str
    """Short caption."""
    style: str
    """Suffix of the component class that colours it (``util``, ``mem``, ...)."""


UTIL = ChartMetric(GPU_UTIL.name, "util", "util")
"""GPU utilization, 0-100 %."""
MEMORY = ChartMetric(FB_USED.name, "mem", "mem")
"""Framebuffer used (MiB), 0-total."""
POWER = ChartMetric(POWER_USAGE.name, "power", "power")
"""Power draw (W), 0-a round number above the peak."""
TEMPERATURE = ChartMetric(GPU_TEMP.name, "temp", "temp")
"""GPU temperature, 0-100 C."""
PCIE_RX_CHART = ChartMetric(PCIE_RX.name, "PCIe RX", "pcie")
"""PCIe receive rate (bytes/s)."""
PCIE_TX_CHART = ChartMetric(PCIE_TX.name, "PCIe TX", "pcie")
"""PCIe transmit rate (bytes/s)."""

HOST_CHARTS = (UTIL, MEMORY, POWER, TEMPERATURE, PCIE_RX_CHART, PCIE_TX_CHART)
"""The drill-in screen's charts, most useful first."""


def mean(values: Iterable[float | None]) -> float | None:
    """Mean of the known values; None when none is known."""
    known = [value for value in values if value is not None]
    return sum(known) / len(known) if known else None


def host_text(host: str, width: int = 40) -> str:
    """A host name as shown (escaped, at most ``width`` cells)."""
    return safe_text(host, width) or NA


def missing_panels_line(frame: ClusterFrame) -> str | None:
    """The frame's lines on panels that need ``gpusight --serve`` (and where), joined into one; None when none."""
    if not frame.missing_panels:
        return None
    return "; ".join(safe_text(line, 200) for line in frame.missing_panels)


def poll_line(frame: ClusterFrame | None, seconds: float | None, interval: float, shown_at: float | None) -> str:
    """When the screen's data is from and what it cost: ``last poll 14:03:07 · queries 0.41 s``.

    ``seconds`` is how long the poll took and ``shown_at`` the wall-clock time it was shown; the age is
    named once the data is older than the interval (a poll is overdue), and a poll slower than ``interval`` is named, since
    polls then follow each other at its pace.
    """
    if frame is None or shown_at is None:
        return f"waiting for the first poll of {safe_text(None if frame is None else frame.url, 80) or 'the server'}"
    parts = [f"last poll {time.strftime('%H:%M:%S', time.localtime(frame.timestamp))}"]
    age = time.time() - shown_at
    if age > interval + STALE_SLACK_SECONDS:
        parts[0] += f" ({age:.0f} s ago)"
    if frame.query_seconds is not None:
        parts.append(f"queries {frame.query_seconds:.2f} s")
    if seconds is not None and seconds > interval:
        parts.append(f"poll took {seconds:.1f} s (slower than the {interval:g} s interval)")
    return " · ".join(parts)


def severity_counts(severities: Iterable[Severity]) -> list[tuple[Severity, int]]:
    """(severity, count) for each severity present, most severe first."""
    counts: dict[Severity, int] = {}
    for severity in severities:
        counts[severity] = counts.get(severity, 0) + 1
    return sorted(counts.items(), key=lambda item: severity_rank(item[0]))


def node_advice_line(frame: ClusterFrame) -> str | None:
    """``node advice: 2 CRIT, 5 WARN on 3 hosts (Enter on a host reads it)``; None without node advice."""
    if not frame.node_advice:
        return None
    counts = severity_counts(advice.severity for _, advice in frame.node_advice)
    hosts = len({host for host, _ in frame.node_advice})
    text = ", ".join(f"{count} {severity.value.upper()}" for severity, count in counts)
    return f"node advice: {text} on {counted(hosts, 'host')} (Enter on a host reads it)"


def process_place(process: ClusterProcess) -> str:
    """Where a process runs: its pod, container or Slurm job, ``host`` when none (escaped)."""
    if process.pod:
        pod = f"{process.namespace}/{process.pod}" if process.namespace else process.pod
        return "pod " + safe_text(pod, 60)
    if process.container:
        return "ctr " + safe_text(process.container, 40)
    if process.slurm_job_id:
        return "slurm " + safe_text(process.slurm_job_id, 20)
    return "host"


def history_by_metric(frame: ClusterFrame) -> dict[str, ClusterHistory]:
    """The frame's histories by metric name."""
    return {history.metric: history for history in frame.history}


def series_of(histories: dict[str, ClusterHistory], metric: str, host: str, index: int) -> tuple[float | None, ...]:
    """One GPU's history of ``metric``; empty when the frame has none."""
    history = histories.get(metric)
    return () if history is None else history.series.get((host, index), ())


def chart_maximum(metric: ChartMetric, gpu: ClusterGpu, peak: float) -> float | None:
    """Top of ``metric``'s fixed scale for ``gpu``: 100 %, its memory in MiB, 100 C, or a round number above ``peak``."""
    if metric is UTIL:
        return 100.0
    if metric is MEMORY:
        return None if gpu.memory_total_bytes is None else gpu.memory_total_bytes / MIB
    if metric is TEMPERATURE:
        return TEMPERATURE_SCALE
    if metric is POWER:
        return nice_ceiling(peak, POWER_FLOOR_WATTS)
    return nice_ceiling(peak, PCIE_FLOOR)


def peak(series: Iterable[Sequence[float | None]]) -> float:
    """Largest known value in any of ``series`` (0 when none)."""
    return max((value for values in series for value in values if value is not None), default=0.0)
