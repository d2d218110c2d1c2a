"""The throttle vocabulary: why a GPU runs its clocks below what they could be, by name and by bit.

The names are what ``DeviceSample.throttle_reasons`` holds and what the screen, the advice and the exporter show;
the bits are NVML's clocks-event reasons (``nvmlClocksEventReason*``), which dcgm-exporter also serves as
``DCGM_FI_DEV_CLOCK_THROTTLE_REASONS``. Another vendor's backend gives the same names where its driver says why.
"""

from __future__ import annotations

THROTTLE_REASONS = (
    (0x001, "gpu_idle"),
    (0x002, "applications_clocks_setting"),
    (0x004, "sw_power_cap"),
    (0x008, "hw_slowdown"),
    (0x010, "sync_boost"),
    (0x020, "sw_thermal"),
    (0x040, "hw_thermal"),
    (0x080, "hw_power_brake"),
    (0x100, "display_clock_setting"),
)
"""Clocks-event (throttle) reason bits and the names gpusight shows."""


def decode_throttle_reasons(mask: int) -> tuple[str, ...]:
    """Names of the reason bits set in ``mask``, in bit order; unknown bits are ignored."""
    return tuple(name for bit, name in THROTTLE_REASONS if mask & bit)
