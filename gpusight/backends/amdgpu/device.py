"""One AMD GPU's figures from its sysfs directory and hwmon sensors, as the amdgpu driver documents them.

Sources (kernel ``Documentation/gpu/amdgpu/driver-misc.rst`` and ``thermal.rst``, ``Documentation/hwmon/amdgpu.rst``):
``gpu_busy_percent`` and ``mem_busy_percent`` (0-100), ``mem_info_vram_used``/``_total`` (bytes), ``pp_dpm_sclk`` and
``pp_dpm_mclk`` (one level a line, ``1: 2100Mhz *``, the current one starred), ``product_name``, ``unique_id``,
the PCI ``current_link_speed`` (``16.0 GT/s PCIe``), ``current_link_width``, ``max_link_*``; RAS counters
``ras/<block>_err_count`` (``ue: N`` and ``ce: N`` lines). hwmon: ``power1_average`` or ``power1_input`` and
``power1_cap`` (microwatts), ``tempN_input`` labelled edge/junction/mem (millidegrees), ``pwm1``/``pwm1_max``,
``freq1_input``/``freq2_input`` (sclk/mclk in Hz), ``energy1_input`` (microjoules). Any file may be missing or hold
garbage: that figure is then None, never 0, and nothing raises. What does not change while the card is there (name,
unique id, VRAM size, power cap, link maxima, where the hwmon sensors are) is read once; the RAS counters every
``RAS_PERIOD_S``; the rest at every poll.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpusight.backends.amdgpu.entry import KERNEL_DRIVER
from gpusight.backends.amdgpu.names import name_from_pci_id
from gpusight.backends.drm.sysfs import DrmCard, hwmon_dir, hwmon_sensors, read_int, read_text, sensor_temperatures
from gpusight.snapshot.model import DeviceHealth, DeviceSample, Vendor

PCIE_GENERATIONS: dict[float, int] = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
"""PCIe transfer rate per lane (GT/s) -> generation."""


def read_percent(path: Path) -> float | None:
    """A 0-100 sysfs percentage; None when missing or out of range."""
    value = read_int(path)
    return float(value) if value is not None and 0 <= value <= 100 else None


def read_scaled(path: Path, scale: float) -> float | None:
    """A non-negative integer file divided by ``scale``; None when missing, garbage or negative."""
    value = read_int(path)
    return value / scale if value is not None and value >= 0 else None


def current_dpm_mhz(text: str | None) -> int | None:
    """The starred level of a ``pp_dpm_*`` table (``1: 2100Mhz *``) in MHz; None without one."""
    for line in (text or "").splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[-1] == "*" and fields[1].lower().endswith("mhz"):
            number = fields[1][:-3]
            if number.isascii() and number.isdigit():
                return int(number)
    return None


def link_generation(text: str | None) -> int | None:
    """The PCIe generation of a link speed such as ``16.0 GT/s PCIe``; None for anything else."""
    number = (text or "").split(" ", 1)[0]
    try:
        return PCIE_GENERATIONS.get(float(number))
    except ValueError:
        return None


def ras_counts(device: Path) -> tuple[int | None, int | None]:
    """Uncorrectable and correctable ECC errors summed over every ``ras/*_err_count`` block; None where none says."""
    try:
        names = sorted(e.name for e in os.scandir(device / "ras") if e.name.endswith("_err_count"))
    except OSError:
        return None, None
    totals: dict[str, int] = {}
    for name in names:
        for line in (read_text(device / "ras" / name) or "").splitlines():
            kind, colon, value = line.partition(":")
            value = value.strip()
            if colon and kind.strip() in ("ue", "ce") and value.isascii() and value.isdigit():
                totals[kind.strip()] = totals.get(kind.strip(), 0) + int(value)
    return totals.get("ue"), totals.get("ce")


RAS_PERIOD_S = 5.0
"""Least time between two reads of a card's RAS error counters (a file per IP block, a dozen on an MI300X); the
last counts are reported in between, as NVML's ECC counts are (``gpusight.backends.nvml.health.HEALTH_PERIOD_S``)."""


@dataclass(frozen=True, slots=True)
class _Fixed:
    """What a card says once: its name, limits, link maxima and where its hwmon sensors are."""

    name: str | None
    uuid: str | None
    memory_total_bytes: int | None
    power_limit_watts: float | None
    link_gen_max: int | None
    link_width_max: int | None
    hwmon: Path | None
    temperatures: tuple[tuple[str, Path], ...]
    """(label, ``tempN_input``) of each sensor, in file order."""
    sclk: Path | None
    """The hwmon ``freqN_input`` labelled ``sclk``."""
    mclk: Path | None
    """The hwmon ``freqN_input`` labelled ``mclk``."""
    pwm_max: int | None


def _read_fixed(card: DrmCard) -> _Fixed:
    """Read what does not change while the card is there."""
    device = card.device
    hwmon = hwmon_dir(device)
    return _Fixed(
        name=read_text(device / "product_name") or name_from_pci_id(card.pci_id),
        uuid=read_text(device / "unique_id") or None,
        memory_total_bytes=_positive(read_int(device / "mem_info_vram_total")),
        power_limit_watts=None if hwmon is None else read_scaled(hwmon / "power1_cap", 1e6),
        link_gen_max=link_generation(read_text(device / "max_link_speed")),
        link_width_max=_positive(read_int(device / "max_link_width")),
        hwmon=hwmon,
        temperatures=() if hwmon is None else hwmon_sensors(hwmon),
        sclk=_hwmon_clock(hwmon, "sclk"),
        mclk=_hwmon_clock(hwmon, "mclk"),
        pwm_max=None if hwmon is None else read_int(hwmon / "pwm1_max"),
    )


def _hwmon_clock(hwmon: Path | None, label: str) -> Path | None:
    """The hwmon ``freqN_input`` labelled ``label`` (``sclk``, ``mclk``), or None."""
    if hwmon is None:
        return None
    for number in (1, 2):
        if (read_text(hwmon / f"freq{number}_label") or "").lower() == label:
            return hwmon / f"freq{number}_input"
    return None


def _clock_mhz(path: Path | None) -> int | None:
    """A hwmon clock in MHz (the file holds Hz)."""
    hertz = None if path is None else read_int(path)
    return hertz // 1_000_000 if hertz is not None and hertz >= 0 else None


def _fan_percent(pwm: int | None, top: int | None) -> float | None:
    """``pwm1`` over ``pwm1_max`` in percent (Instinct boards have no fan: None)."""
    if pwm is None or not top or top <= 0 or not 0 <= pwm <= top:
        return None
    return pwm / top * 100.0


def _positive(value: int | None) -> int | None:
    return value if value is not None and value > 0 else None


class CardReader:
    """Reads one card: what it says once at the first read, its RAS counters every ``RAS_PERIOD_S``, the rest at
    every read. Make a new one for a card that was lost and came back."""

    def __init__(self, card: DrmCard, clock: Callable[[], float]) -> None:
        self.card = card
        """The card read."""
        self._clock = clock
        self._fixed: _Fixed | None = None
        self._ras: tuple[int | None, int | None] = (None, None)
        self._ras_due = 0.0

    def read(self, index: int, version: str | None) -> DeviceSample:
        """Everything the card tells about it now, as GPU ``index`` of driver ``version``."""
        card, device = self.card, self.card.device
        fixed = self._fixed = self._fixed or _read_fixed(card)
        now = self._clock()
        if now >= self._ras_due:
            self._ras_due = now + RAS_PERIOD_S
            self._ras = ras_counts(device)
        hwmon = fixed.hwmon
        temperatures = sensor_temperatures(fixed.temperatures)
        power = energy = fan = None
        if hwmon is not None:
            power = read_scaled(hwmon / "power1_average", 1e6)
            if power is None:
                power = read_scaled(hwmon / "power1_input", 1e6)
            energy = read_scaled(hwmon / "energy1_input", 1e6)
            fan = _fan_percent(read_int(hwmon / "pwm1"), fixed.pwm_max)
        sclk, mclk = _clock_mhz(fixed.sclk), _clock_mhz(fixed.mclk)
        uncorrected, corrected = self._ras
        health = DeviceHealth(
            ecc_aggregate_corrected=corrected, ecc_aggregate_uncorrected=uncorrected,
            pcie_link_gen=link_generation(read_text(device / "current_link_speed")),
            pcie_link_gen_max=fixed.link_gen_max,
            pcie_link_width=_positive(read_int(device / "current_link_width")),
            pcie_link_width_max=fixed.link_width_max,
        )
        return DeviceSample(
            index=index,
            name=fixed.name,
            uuid=fixed.uuid,
            pci_bus_id=card.pci_slot,
            utilization_gpu_percent=read_percent(device / "gpu_busy_percent"),
            utilization_memory_percent=read_percent(device / "mem_busy_percent"),
            memory_used_bytes=_non_negative(read_int(device / "mem_info_vram_used")),
            memory_total_bytes=fixed.memory_total_bytes,
            power_watts=power,
            power_limit_watts=fixed.power_limit_watts,
            temperature_celsius=temperatures.get("edge", temperatures.get("junction")),
            temperature_junction_celsius=temperatures.get("junction"),
            temperature_memory_celsius=temperatures.get("mem"),
            fan_percent=fan,
            clock_sm_mhz=sclk if sclk is not None else current_dpm_mhz(read_text(device / "pp_dpm_sclk")),
            clock_memory_mhz=mclk if mclk is not None else current_dpm_mhz(read_text(device / "pp_dpm_mclk")),
            energy_joules=energy,
            ecc_errors_uncorrected=uncorrected,
            vendor=Vendor.AMD,
            kernel_driver=KERNEL_DRIVER,
            kernel_driver_version=version,
            health=None if health == DeviceHealth() else health,
        )


def _non_negative(value: int | None) -> int | None:
    return value if value is not None and value >= 0 else None
