"""GPU metrics under dcgm-exporter's names, units and labels, from the devices of one snapshot."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily

from gpusight import metric_names as names
from gpusight.collect.model import DeviceSample, Snapshot
from gpusight.collect.nvml.device import THROTTLE_REASONS
from gpusight.prometheus_exporter.labels import label_value

MIB = 1 << 20
"""dcgm-exporter's framebuffer unit: MiB, whole (as DCGM reports them)."""

_BITS = {name: bit for bit, name in THROTTLE_REASONS}


def _mib(value: int | None) -> float | None:
    return None if value is None else float(value // MIB)


def _ratio(percent: float | None) -> float | None:
    """DCGM_FI_PROF_* are ratios 0 to 1; gpusight keeps percents."""
    return None if percent is None else percent / 100.0


def fb_free_bytes(device: DeviceSample) -> int | None:
    """Free framebuffer as NVML counts it: total less used less reserved (reserved is in "used" without v2)."""
    if device.memory_total_bytes is None or device.memory_used_bytes is None:
        return None
    return max(0, device.memory_total_bytes - device.memory_used_bytes - (device.memory_reserved_bytes or 0))


def throttle_mask(device: DeviceSample) -> int:
    """NVML's clock-event reason bitmask again, from the reason names gpusight decoded."""
    return sum(_BITS.get(reason, 0) for reason in device.throttle_reasons)


_VALUES: tuple[tuple[names.MetricName, Callable[[DeviceSample], float | None]], ...] = (
    (names.GPU_UTIL, lambda d: d.utilization_gpu_percent),
    (names.MEM_COPY_UTIL, lambda d: d.utilization_memory_percent),
    (names.FB_USED, lambda d: _mib(d.memory_used_bytes)),
    (names.FB_FREE, lambda d: _mib(fb_free_bytes(d))),
    (names.FB_RESERVED, lambda d: _mib(d.memory_reserved_bytes)),
    (names.POWER_USAGE, lambda d: d.power_watts),
    (names.ENERGY, lambda d: None if d.energy_joules is None else round(d.energy_joules * 1000.0)),
    (names.GPU_TEMP, lambda d: d.temperature_celsius),
    (names.SM_CLOCK, lambda d: None if d.clock_sm_mhz is None else float(d.clock_sm_mhz)),
    (names.MEM_CLOCK, lambda d: None if d.clock_memory_mhz is None else float(d.clock_memory_mhz)),
    (names.CLOCK_EVENTS, lambda d: float(throttle_mask(d))),
    (names.SM_ACTIVE, lambda d: _ratio(d.sm_active_percent)),
    (names.SM_OCCUPANCY, lambda d: _ratio(d.sm_occupancy_percent)),
    (names.TENSOR_ACTIVE, lambda d: _ratio(d.tensor_active_percent)),
    (names.DRAM_ACTIVE, lambda d: _ratio(d.dram_active_percent)),
    (names.PCIE_TX, lambda d: d.pcie_tx_bytes_per_s),
    (names.PCIE_RX, lambda d: d.pcie_rx_bytes_per_s),
    (names.NVLINK_TX, lambda d: d.nvlink_tx_bytes_per_s),
    (names.NVLINK_RX, lambda d: d.nvlink_rx_bytes_per_s),
)
"""Each dcgm-exporter metric and how it is read from a DeviceSample, in its unit (docs/exporter.md's table)."""


def device_labels(device: DeviceSample, snapshot: Snapshot, hostname: str) -> list[str]:
    """The values of ``DEVICE_LABELS`` for ``device``: "" where unknown."""
    driver = snapshot.driver.driver_version if snapshot.driver is not None else None
    return [str(device.index), label_value(device.uuid), label_value(device.pci_bus_id),
            "" if device.minor_number is None else f"nvidia{device.minor_number}", label_value(device.name),
            hostname, hostname, label_value(driver)]


def device_families(snapshot: Snapshot, hostname: str) -> Iterator[GaugeMetricFamily]:
    """One family per device metric with a series for each GPU that knows it; lost GPUs have none.

    A family no GPU knows is left out altogether, as dcgm-exporter leaves out fields a GPU does not support.
    """
    present = [(d, device_labels(d, snapshot, hostname)) for d in snapshot.devices if not d.lost]
    for metric, read in _VALUES:
        family = GaugeMetricFamily(metric.name, metric.help, labels=names.DEVICE_LABELS)
        for device, labels in present:
            value = read(device)
            if value is not None:
                family.add_metric(labels, value)
        if family.samples:
            yield family
