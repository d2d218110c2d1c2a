"""The values each metric can honestly take, declared once beside :mod:`gpusight.metric_names`.

Values read back from a Prometheus server are untrusted: an exporter may write -1 for "unknown", DCGM writes its
"blank" sentinels (about 9.2e18), and Prometheus passes NaN, +Inf, -Inf and 1e308 through. :func:`plausible` turns
every value outside its metric's range into None (shown as N/A, ``null`` in JSON), so no surface shows ``-1%`` or
``-1C`` and no NaN reaches JSON or a chart's scale. The one clamp: a percentage or ratio a little above its top
(within ``ValueRange.slack``, rounding in the exporter) is clamped to the top, since the true value is the top.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpusight import metric_names as m

SENTINEL_LIMIT = 1e15
"""dcgm-exporter writes DCGM's 'blank' sentinels (about 9.2e18) for unknown values; a count at or above is unknown."""


@dataclass(frozen=True, slots=True)
class ValueRange:
    """The values a metric can take: ``low`` to ``high``, both included."""

    low: float
    """The least possible value."""
    high: float
    """The greatest possible value."""
    slack: float = 0.0
    """How far above ``high`` a value is clamped to ``high`` rather than unknown (rounding, for percentages)."""


PERCENT = ValueRange(0.0, 100.0, slack=1.0)
"""A share of one thing in %."""
RATIO = ValueRange(0.0, 1.0, slack=0.01)
"""dcgm-exporter's ``DCGM_FI_PROF_*`` activity ratios."""
CPU_PERCENT = ValueRange(0.0, 100.0 * 4096)
"""CPU use where 100 is one core, up to 4096 cores."""
MIB = ValueRange(0.0, float(1 << 30))
"""Framebuffer in MiB, up to 1 PiB."""
BYTES = ValueRange(0.0, float(1 << 50))
"""Memory in bytes, up to 1 PiB."""
CELSIUS = ValueRange(0.0, 200.0)
"""A GPU's temperature: NVML reads it as an unsigned number, so below 0 is a sentinel (-1), not a cold GPU."""
WATTS = ValueRange(0.0, 5000.0)
"""One GPU's power draw (the largest boards draw about 1.2 kW)."""
MHZ = ValueRange(0.0, 100_000.0)
"""A clock frequency."""
BYTES_PER_SECOND = ValueRange(0.0, 1e13)
"""A link's rate (PCIe 6.0 x16 is about 1.3e11 bytes/s, NVLink 5 about 1.8e12)."""
COUNT = ValueRange(0.0, SENTINEL_LIMIT - 1)
"""A count, a flag, an error or an Xid number: never negative, and below DCGM's sentinels."""
SECONDS = ValueRange(0.0, SENTINEL_LIMIT - 1)
"""An age in seconds."""

RANGES: dict[str, ValueRange] = {
    **{metric.name: PERCENT for metric in (m.GPU_UTIL, m.MEM_COPY_UTIL, m.ENC_UTIL, m.DEC_UTIL, m.JPEG_UTIL,
                                           m.OFA_UTIL, m.PROCESS_SM, m.INPUT_WAIT, m.HOST_CPU, m.HOST_CORE_CPU,
                                           m.HOST_IOWAIT)},
    **{metric.name: RATIO for metric in (m.SM_ACTIVE, m.SM_OCCUPANCY, m.TENSOR_ACTIVE, m.DRAM_ACTIVE)},
    **{metric.name: MIB for metric in (m.FB_USED, m.FB_FREE, m.FB_RESERVED)},
    **{metric.name: BYTES for metric in (m.PROCESS_MEMORY, m.JOB_MEMORY, m.HOST_MEMORY_USED, m.HOST_MEMORY_TOTAL)},
    **{metric.name: BYTES_PER_SECOND for metric in (m.PCIE_TX, m.PCIE_RX, m.NVLINK_TX, m.NVLINK_RX)},
    **{metric.name: CPU_PERCENT for metric in (m.PROCESS_CPU, m.WORKERS_CPU)},
    **{metric.name: MHZ for metric in (m.SM_CLOCK, m.MEM_CLOCK)},
    **{metric.name: COUNT for metric in (*m.HEALTH_METRICS, m.WORKERS, m.JOB_WORLD_SIZE, m.GPU_LOST)},
    m.GPU_TEMP.name: CELSIUS,
    m.POWER_USAGE.name: WATTS,
    m.SNAPSHOT_AGE.name: SECONDS,
    m.JOB_STEPS.name: ValueRange(0.0, 1e6),
    m.JOB_SAMPLES.name: ValueRange(0.0, 1e12),
    m.JOB_TOKENS.name: ValueRange(0.0, 1e13),
    m.JOB_FLOPS.name: ValueRange(0.0, 1e19),  # ten exaFLOP/s on one node
    m.JOB_PEAK_FLOPS.name: ValueRange(0.0, 1e19),
    m.JOB_STEP_TIME.name: ValueRange(0.0, 100.0),  # parts must sum to 100: no clamping
}
"""Each metric's range by name; a metric not listed may take any finite value below DCGM's sentinels."""


def plausible(metric: str, value: float | None) -> float | None:
    """``value`` of the metric named ``metric`` when it is in its range (a percentage just above 100 clamped to
    100), else None; NaN and infinities are always None, and so are DCGM's sentinels for a metric without a range
    (a range says what is believable on its own: a node's FLOP/s reach well past the sentinels' 1e15)."""
    if value is None or not math.isfinite(value):
        return None
    bounds = RANGES.get(metric)
    if bounds is None:
        return value if abs(value) < SENTINEL_LIMIT else None
    if bounds.high < value <= bounds.high + bounds.slack:
        return bounds.high
    return value if bounds.low <= value <= bounds.high else None
