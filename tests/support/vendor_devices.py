"""DeviceSamples holding only what each vendor's backend can read: AMD's amdgpu fields (no GPM, NVLink or throttle
reasons), Intel's xe fields, and an NVIDIA GPU as NVML gives it, for mixed machines.

The AMD fields are those the issue lists for amdgpu (gpu_busy_percent, mem_busy_percent, mem_info_vram_*, power,
edge/junction/mem temperatures, fan, pp_dpm_* clocks, PCIe link); Intel's xe has no busy percent of its own in sysfs
here, but has memory, power, energy, temperature and clocks.
"""

from __future__ import annotations

from pathlib import Path

from gpusight.recordings.opening import open_recorder
from gpusight.snapshot.model import DeviceHealth, DeviceSample, Snapshot, SourceKind, Vendor

GIB = 1 << 30


def amd_gpu(index: int, **changes: object) -> DeviceSample:
    """An AMD Instinct MI300X with amdgpu's fields only: no edge sensor, so its temperature is the junction's, as
    the amdgpu backend reports it."""
    base: dict[str, object] = dict(
        name="AMD Instinct MI300X", uuid=None, pci_bus_id=f"0000:{0x10 + index:02x}:00.0", vendor=Vendor.AMD,
        kernel_driver="amdgpu", utilization_gpu_percent=87.0, utilization_memory_percent=41.0,
        memory_used_bytes=100 * GIB, memory_total_bytes=192 * GIB, power_watts=612.0, power_limit_watts=750.0,
        energy_joules=123456.5, temperature_celsius=71.0, temperature_junction_celsius=71.0,
        temperature_memory_celsius=58.0, clock_sm_mhz=2100, clock_memory_mhz=1300,
        health=DeviceHealth(pcie_link_gen=5, pcie_link_gen_max=5, pcie_link_width=16, pcie_link_width_max=16))
    base.update(changes)
    return DeviceSample(index, **base)  # type: ignore[arg-type]


def intel_gpu(index: int, **changes: object) -> DeviceSample:
    """An Intel Data Center GPU Max 1550 with xe's fields only."""
    base: dict[str, object] = dict(
        name="Intel(R) Data Center GPU Max 1550", pci_bus_id=f"0000:{0x30 + index:02x}:00.0", vendor=Vendor.INTEL,
        kernel_driver="xe", utilization_gpu_percent=64.0, memory_used_bytes=20 * GIB, memory_total_bytes=128 * GIB,
        power_watts=410.0, energy_joules=5000.0, temperature_celsius=55.0, clock_sm_mhz=1600)
    base.update(changes)
    return DeviceSample(index, **base)  # type: ignore[arg-type]


def nvidia_gpu(index: int, **changes: object) -> DeviceSample:
    """An NVIDIA H100 as NVML reads it, with GPM and NVLink."""
    base: dict[str, object] = dict(
        name="NVIDIA H100 80GB HBM3", uuid=f"GPU-0000000{index}-aaaa-bbbb-cccc-dddddddddddd", vendor=Vendor.NVIDIA,
        kernel_driver="nvidia", pci_bus_id=f"00000000:1{index}:00.0", minor_number=index,
        utilization_gpu_percent=90.0, utilization_memory_percent=30.0, memory_used_bytes=40 * GIB,
        memory_total_bytes=80 * GIB, power_watts=500.0, temperature_celsius=60.0, clock_sm_mhz=1980,
        clock_memory_mhz=2619, sm_active_percent=80.0, nvlink_tx_bytes_per_s=1e10, nvlink_rx_bytes_per_s=1e10)
    base.update(changes)
    return DeviceSample(index, **base)  # type: ignore[arg-type]


def write_recording(path: Path, devices: tuple[DeviceSample, ...], start: float, seconds: int = 120) -> Path:
    """A JSONL recording of a node with ``devices``, one snapshot a second from ``start``; returns ``path``."""
    recorder = open_recorder(path)
    for step in range(seconds):
        recorder.write(Snapshot(timestamp=start + step, source=SourceKind.NVML, devices=devices))
    recorder.close()
    return path
