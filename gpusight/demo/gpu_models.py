"""The kinds of GPU a demo machine holds, and what each vendor's backend can read of them.

An NVIDIA GPU is read through NVML, which gives everything the demo simulates. An AMD GPU is read from the amdgpu
driver's sysfs, hwmon and DRM fdinfo (see :mod:`gpusight.backends.drm`), which give no GPM figures, NVLink rates,
clock-event reasons, MIG, energy counter, fan (passively cooled boards), PCIe rates, video engines or per-process
memory-controller share: those stay None (N/A), never 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpusight.snapshot.model import Vendor

MIB = 1024**2
"""Bytes in a MiB."""


@dataclass(frozen=True, slots=True)
class GpuModel:
    """One kind of simulated GPU: its identity, its fixed figures and how the demo's H100-based workloads map to it."""

    name: str
    """The name its backend reports."""
    vendor: Vendor
    """Who made it."""
    kernel_driver: str | None
    """The kernel driver that runs it where it is not NVIDIA's (whose versions ``Snapshot.driver`` holds)."""
    kernel_driver_version: str | None
    """That driver's version."""
    memory_total_bytes: int
    """Device memory its backend reports."""
    memory_reserved_bytes: int | None
    """Memory the driver reserves; None where the backend does not say."""
    power_limit_watts: float
    """Board power limit."""
    memory_clock_mhz: int
    """Memory clock."""
    power_scale: float
    """Power of a workload on this GPU relative to an H100 SXM (the workloads' ranges are an H100's)."""
    clock_scale: float
    """Core clock relative to an H100 SXM's (1980 MHz boost)."""
    clock_step_mhz: int
    """The steps its core clock moves in."""
    pci_domain: str
    """The PCI domain as its backend writes bus ids: NVML's eight digits, sysfs's four."""

    @property
    def nvidia(self) -> bool:
        """True for a GPU read through NVML (which gives GPM, NVLink, clock-event reasons and energy)."""
        return self.vendor is Vendor.NVIDIA


H100 = GpuModel(
    name="NVIDIA H100 80GB HBM3", vendor=Vendor.NVIDIA, kernel_driver=None, kernel_driver_version=None,
    memory_total_bytes=81559 * MIB,
    memory_reserved_bytes=541 * MIB, power_limit_watts=700.0, memory_clock_mhz=2619, power_scale=1.0,
    clock_scale=1.0, clock_step_mhz=15, pci_domain="00000000",
)
"""An H100 SXM as NVML reports it: 80 GiB HBM3 (81559 MiB, 541 reserved), 700 W, HBM3 at 2619 MHz."""

MI300X = GpuModel(
    name="AMD Instinct MI300X", vendor=Vendor.AMD, kernel_driver="amdgpu", kernel_driver_version="6.10.5",
    memory_total_bytes=205_822_885_888,
    memory_reserved_bytes=None, power_limit_watts=750.0, memory_clock_mhz=1300, power_scale=750.0 / 700.0,
    clock_scale=2100.0 / 1980.0, clock_step_mhz=1, pci_domain="0000",
)
"""An AMD Instinct MI300X (OAM) as amdgpu's sysfs reports it: 192 GB HBM3 (``mem_info_vram_total`` 205822885888
bytes), amdgpu 6.10.5 (``/sys/module/amdgpu/version`` of a ROCm 6.3 DKMS driver), 750 W, peak engine clock 2100 MHz, HBM3 at 1300 MHz (AMD's MI300X data sheet). Its SMU (13.0.6) has no
edge sensor, only junction and memory (hwmon ``temp2``/``temp3``; nvtop issue 514), so its core temperature is None."""


KFD_USAGE_NOTE = "ROCm via /dev/kfd: fdinfo engine counters flat"
"""Why a ROCm process's GPU usage is unknown: compute submitted through ``/dev/kfd`` may leave the DRM fdinfo engine
counters flat (amdgpu_top's tracker), so the share is N/A with this reason, never 0."""

JUNCTION_OVER_CORE = 9.0
"""Degrees the hottest spot (junction) runs above the workloads' H100-style core temperature under load."""
MEMORY_UNDER_CORE = 4.0
"""Degrees the HBM runs below that core temperature."""
