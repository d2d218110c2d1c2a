"""A job's speed as short text, the same in ``--cluster --once`` and the cluster view: throughput, MFU, step time.

Unknown figures read N/A, never 0; the job's key (from the exporters) goes through ``safe_text``.
"""

from __future__ import annotations

from gpusight.cluster.counts import counted
from gpusight.cluster.frame import ClusterJob, ClusterJobSpeed
from gpusight.textsafe import safe_text
from gpusight.units import NA, fmt_percent

_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
"""Decimal prefixes for rates, largest first."""

KEY_WIDTH = 40
"""Longest job key shown."""


def rate_text(value: float | None, unit: str) -> str:
    """``value`` per second with a decimal prefix and three significant figures, e.g. ``51.2k tokens/s``."""
    if value is None:
        return NA
    for scale, prefix in _PREFIXES:
        if value >= scale:
            return f"{value / scale:.3g}{prefix} {unit}/s"
    return f"{value:.3g} {unit}/s"


def throughput_text(speed: ClusterJob | ClusterJobSpeed) -> str:
    """Tokens per second where the batches hold tokens, else samples per second."""
    if speed.tokens_per_second is not None:
        return rate_text(speed.tokens_per_second, "tokens")
    return rate_text(speed.samples_per_second, "samples")


def utilization_text(speed: ClusterJobSpeed) -> str:
    """``MFU 35%`` (or HFU); ``MFU N/A`` while no node reports FLOP/s and a peak."""
    return f"{speed.utilization_name or 'MFU'} {fmt_percent(speed.flops_utilization_percent)}"


def step_time_text(parts: tuple[tuple[str, float], ...] | None) -> str:
    """``data 28% compute 60% communication 8% copy 2% idle 2%``; N/A when not profiled."""
    return NA if parts is None else " ".join(f"{part} {fmt_percent(percent)}" for part, percent in parts)


def speed_line(speed: ClusterJobSpeed) -> str:
    """One line on a job's speed across its nodes."""
    nodes = counted(len(speed.hosts), "node")
    if len(speed.reporting_hosts) < len(speed.hosts):
        nodes += f" ({len(speed.reporting_hosts)} reporting)"
    flops = ""
    if speed.flops_per_second is not None and speed.peak_flops_per_second is not None:
        flops = f" ({rate_text(speed.flops_per_second, 'FLOP')} of {rate_text(speed.peak_flops_per_second, 'FLOP')})"
    return (f"{safe_text(speed.key, KEY_WIDTH)}  {nodes}  {rate_text(speed.steps_per_second, 'steps')}  "
            f"{throughput_text(speed)}  {utilization_text(speed)}{flops}  step time: {step_time_text(speed.step_time_percent)}")
