"""How other vendors' GPUs are written: the drivers beside NVIDIA's, junction and memory temperatures, GPM figures
that only NVIDIA GPUs give, and why a process's GPU share is unknown.

The header, the GPU panel and detail screen, the process table and popup, ``gpusight --once`` and the Markdown and
HTML exports all write them with these functions, so they agree. Pure text: no Textual or Rich. Driver versions and
notes come from outside and are escaped here.
"""

from __future__ import annotations

from gpusight.snapshot.model import DeviceSample, ProcessSample, Snapshot, Vendor
from gpusight.textsafe import safe_text
from gpusight.units import NA, fmt_celsius

GPM_NVIDIA_ONLY = "NVIDIA-only"
"""What a GPM figure (SM active, occupancy, tensor, DRAM active) says on another vendor's GPU."""

DRIVER_WIDTH = 40
"""Cells a driver's name and version may take."""

NOTE_WIDTH = 80
"""Cells a process's GPU-usage note may take."""


def other_drivers(snapshot: Snapshot) -> list[str]:
    """``["amdgpu 6.10.5"]``: each other vendor's kernel driver its GPUs name, with its version where known, once."""
    names = []
    for device in snapshot.devices:
        if device.kernel_driver:
            version = safe_text(device.kernel_driver_version, DRIVER_WIDTH)
            name = safe_text(device.kernel_driver, DRIVER_WIDTH) + (f" {version}" if version else "")
            if name not in names:
                names.append(name)
    return names


def driver_parts(snapshot: Snapshot) -> list[str]:
    """``["driver 550.90.07", "CUDA 12.4", "amdgpu 6.10.5"]``: NVIDIA's versions where NVML answered (N/A where it
    could not say), then each other vendor's driver."""
    driver = snapshot.driver
    nvidia = [] if driver is None else [f"driver {safe_text(driver.driver_version) or NA}",
                                        f"CUDA {safe_text(driver.cuda_driver_version) or NA}"]
    return nvidia + other_drivers(snapshot)


def is_other_vendor(device: DeviceSample) -> bool:
    """True for a GPU that is not NVIDIA's (None, from a recording before schema 6, is NVIDIA's)."""
    return device.vendor is not None and device.vendor is not Vendor.NVIDIA


def gpm_text(device: DeviceSample, value: str) -> str:
    """``value``, a GPM figure as written, or that GPM is NVIDIA-only where the GPU is another vendor's."""
    return f"{NA} ({GPM_NVIDIA_ONLY})" if is_other_vendor(device) else value


def extra_temperatures(device: DeviceSample) -> list[tuple[str, str]]:
    """(label, text) of the junction and memory temperatures the GPU reports: ``[("junction", "84C"), ...]``."""
    pairs = (("junction", device.temperature_junction_celsius), ("memory", device.temperature_memory_celsius))
    return [(label, fmt_celsius(value)) for label, value in pairs if value is not None]


def compact_temperature(device: DeviceSample) -> tuple[str, str]:
    """(label, text) of the one temperature a narrow row shows: the core's (no label), or the junction's
    (``"jct "``) on a GPU with no core sensor (MI300X), else N/A."""
    if device.temperature_celsius is None and device.temperature_junction_celsius is not None:
        return "jct ", fmt_celsius(device.temperature_junction_celsius)
    return "", fmt_celsius(device.temperature_celsius)


def gpu_usage_reason(process: ProcessSample) -> str:
    """Why the process's GPU share is N/A (``GPU use N/A: ROCm via /dev/kfd...``); "" when it is known or no
    reason is given."""
    if process.sm_percent is not None or not process.gpu_usage_note:
        return ""
    return f"GPU use {NA}: {safe_text(process.gpu_usage_note, NOTE_WIDTH)}"
