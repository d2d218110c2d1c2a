"""One Intel card's figures from sysfs and hwmon, each None where the driver does not expose it or it is garbage.

Sources (kernel ABI documents, ``Documentation/ABI/testing/``):

- ``sysfs-driver-intel-xe-hwmon`` and ``sysfs-driver-intel-i915-hwmon``: ``energy1_input`` (microjoules, a
  counter), ``power1_max`` (the sustained PL1 limit in microwatts; 0 means disabled) and ``power1_rated_max`` (the
  card's default limit, microwatts). xe adds temperatures on newer kernels (``tempN_input`` in millidegrees with a
  ``tempN_label`` of ``pkg`` or ``vram``) and ``fan1_input`` in RPM. i915's hwmon has no temperature.
- GT frequency: xe ``device/tile0/gt0/freq0/act_freq`` (MHz, ``xe_gt_freq.c``); i915 ``cardN/gt_act_freq_mhz``, or
  ``cardN/gt/gt0/rps_act_freq_mhz`` (``intel_gt_sysfs_pm.c``). The actual frequency is shown as the SM clock.
- VRAM size: xe ``device/tileN/physical_vram_size_bytes`` (physical VRAM per tile, summed; it includes memory the
  driver reserves, so it slightly overstates what programs can allocate). i915 publishes its memory regions only
  through the ``DRM_I915_QUERY_MEMORY_REGIONS`` ioctl, so its total is None.

The fan is None: the ABI gives RPM with no maximum to make a percent of.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from gpusight.backends.drm.sysfs import DrmCard, hwmon_dir, hwmon_temperatures, read_int

MICRO = 1e-6
"""Microwatts and microjoules per watt and joule."""
MAX_PLAUSIBLE_MHZ = 10_000
"""A GT frequency above this is garbage."""


@dataclass(frozen=True, slots=True)
class CardFigures:
    """What sysfs says about one card now."""

    energy_joules: float | None = None
    """``energy1_input`` in joules: a counter since the driver loaded."""
    power_limit_watts: float | None = None
    """``power1_max`` where enabled, else ``power1_rated_max``."""
    temperature_celsius: float | None = None
    """xe's ``pkg`` sensor."""
    temperature_memory_celsius: float | None = None
    """xe's ``vram`` sensor."""
    clock_mhz: int | None = None
    """The GT's actual frequency."""
    memory_total_bytes: int | None = None
    """xe's physical VRAM over every tile."""


def read_card(card: DrmCard) -> CardFigures:
    """The card's figures now."""
    hwmon = hwmon_dir(card.device)
    energy = _positive(hwmon / "energy1_input") if hwmon else None
    temperatures = hwmon_temperatures(hwmon) if hwmon else {}
    return CardFigures(
        energy_joules=None if energy is None else energy * MICRO,
        power_limit_watts=_power_limit(hwmon) if hwmon else None,
        temperature_celsius=_plausible_celsius(temperatures.get("pkg")),
        temperature_memory_celsius=_plausible_celsius(temperatures.get("vram")),
        clock_mhz=_clock(card),
        memory_total_bytes=_vram_total(card.device) if card.driver == "xe" else None,
    )


def _positive(path: Path) -> int | None:
    value = read_int(path)
    return value if value is not None and value >= 0 else None


def _power_limit(hwmon: Path) -> float | None:
    for name in ("power1_max", "power1_rated_max"):
        value = read_int(hwmon / name)
        if value is not None and value > 0:
            return value * MICRO
    return None


def _plausible_celsius(value: float | None) -> float | None:
    return value if value is not None and -50.0 < value < 200.0 else None


def _clock(card: DrmCard) -> int | None:
    if card.driver == "xe":
        paths = [card.device / "tile0" / "gt0" / "freq0" / "act_freq"]
    else:
        sysfs_card = card.device.parent
        paths = [sysfs_card / "gt_act_freq_mhz", sysfs_card / "gt" / "gt0" / "rps_act_freq_mhz"]
    for path in paths:
        value = read_int(path)
        if value is not None and 0 <= value <= MAX_PLAUSIBLE_MHZ:
            return value
    return None


def _vram_total(device: Path) -> int | None:
    try:
        tiles = sorted(e.name for e in os.scandir(device) if e.name.startswith("tile") and e.name[4:].isdigit())
    except OSError:
        return None
    sizes = [read_int(device / tile / "physical_vram_size_bytes") for tile in tiles]
    known = [size for size in sizes if size is not None and size > 0]
    return sum(known) if known and len(known) == len(sizes) else None
