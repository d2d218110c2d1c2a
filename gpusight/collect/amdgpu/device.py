"""One AMD GPU's figures from its sysfs directory and hwmon sensors, as the amdgpu driver documents them.

Sources (kernel ``Documentation/gpu/amdgpu/driver-misc.rst`` and ``thermal.rst``, ``Documentation/hwmon/amdgpu.rst``):
``gpu_busy_percent`` and ``mem_busy_percent`` (0-100), ``mem_info_vram_used``/``_total`` (bytes), ``pp_dpm_sclk`` and
``pp_dpm_mclk`` (one level a line, ``1: 2100Mhz *``, the current one starred), ``product_name``, ``unique_id``,
the PCI ``current_link_speed`` (``16.0 GT/s PCIe``), ``current_link_width``, ``max_link_*``; RAS counters
``ras/<block>_err_count`` (``ue: N`` and ``ce: N`` lines). hwmon: ``power1_average`` or ``power1_input`` and
``power1_cap`` (microwatts), ``tempN_input`` labelled edge/junction/mem (millidegrees), ``pwm1``/``pwm1_max``,
``freq1_input``/``freq2_input`` (sclk/mclk in Hz), ``energy1_input`` (microjoules). Any file may be missing or hold
garbage: that figure is then None, never 0, and nothing raises.
"""

from __future__ import annotations

import os
from pathlib import Path

from gpusight.collect.amdgpu.names import name_from_pci_id
from gpusight.collect.drm.sysfs import DrmCard, hwmon_dir, hwmon_temperatures, read_int, read_text
from gpusight.collect.model import DeviceHealth, DeviceSample, Vendor

KERNEL_DRIVER = "amdgpu"
"""The kernel driver this backend reads."""

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


def _hwmon_clock_mhz(hwmon: Path | None, label: str) -> int | None:
    """The hwmon ``freqN_input`` labelled ``label`` (``sclk``, ``mclk``) in MHz."""
    if hwmon is None:
        return None
    for number in (1, 2):
        if (read_text(hwmon / f"freq{number}_label") or "").lower() == label:
            hertz = read_int(hwmon / f"freq{number}_input")
            return hertz // 1_000_000 if hertz is not None and hertz >= 0 else None
    return None


def _fan_percent(hwmon: Path) -> float | None:
    """``pwm1`` over ``pwm1_max`` in percent (Instinct boards have no fan: None)."""
    pwm, top = read_int(hwmon / "pwm1"), read_int(hwmon / "pwm1_max")
    if pwm is None or not top or top <= 0 or not 0 <= pwm <= top:
        return None
    return pwm / top * 100.0


def read_health(device: Path) -> DeviceHealth | None:
    """PCIe link and RAS ECC counts; None when the card tells none of them."""
    uncorrected, corrected = ras_counts(device)
    health = DeviceHealth(
        ecc_aggregate_corrected=corrected, ecc_aggregate_uncorrected=uncorrected,
        pcie_link_gen=link_generation(read_text(device / "current_link_speed")),
        pcie_link_gen_max=link_generation(read_text(device / "max_link_speed")),
        pcie_link_width=_positive(read_int(device / "current_link_width")),
        pcie_link_width_max=_positive(read_int(device / "max_link_width")),
    )
    return None if health == DeviceHealth() else health


def _positive(value: int | None) -> int | None:
    return value if value is not None and value > 0 else None


def read_device(card: DrmCard, index: int) -> DeviceSample:
    """Everything the card's sysfs and hwmon tell about it now, as GPU ``index``."""
    device = card.device
    hwmon = hwmon_dir(device)
    temperatures = hwmon_temperatures(hwmon) if hwmon is not None else {}
    power = None
    limit = None
    energy = None
    fan = None
    if hwmon is not None:
        power = read_scaled(hwmon / "power1_average", 1e6)
        if power is None:
            power = read_scaled(hwmon / "power1_input", 1e6)
        limit = read_scaled(hwmon / "power1_cap", 1e6)
        energy = read_scaled(hwmon / "energy1_input", 1e6)
        fan = _fan_percent(hwmon)
    sclk = _hwmon_clock_mhz(hwmon, "sclk")
    mclk = _hwmon_clock_mhz(hwmon, "mclk")
    health = read_health(device)
    return DeviceSample(
        index=index,
        name=read_text(device / "product_name") or name_from_pci_id(card.pci_id),
        uuid=read_text(device / "unique_id") or None,
        pci_bus_id=card.pci_slot,
        utilization_gpu_percent=read_percent(device / "gpu_busy_percent"),
        utilization_memory_percent=read_percent(device / "mem_busy_percent"),
        memory_used_bytes=_non_negative(read_int(device / "mem_info_vram_used")),
        memory_total_bytes=_positive(read_int(device / "mem_info_vram_total")),
        power_watts=power,
        power_limit_watts=limit,
        temperature_celsius=temperatures.get("edge", temperatures.get("junction")),
        temperature_junction_celsius=temperatures.get("junction"),
        temperature_memory_celsius=temperatures.get("mem"),
        fan_percent=fan,
        clock_sm_mhz=sclk if sclk is not None else current_dpm_mhz(read_text(device / "pp_dpm_sclk")),
        clock_memory_mhz=mclk if mclk is not None else current_dpm_mhz(read_text(device / "pp_dpm_mclk")),
        energy_joules=energy,
        ecc_errors_uncorrected=None if health is None else health.ecc_aggregate_uncorrected,
        vendor=Vendor.AMD,
        kernel_driver=KERNEL_DRIVER,
        health=health,
    )


def _non_negative(value: int | None) -> int | None:
    return value if value is not None and value >= 0 else None
