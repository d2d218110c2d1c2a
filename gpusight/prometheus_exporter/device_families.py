"""GPU metrics under dcgm-exporter's names, units and labels, from the devices of one snapshot."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from gpusight import metric_names as names
from gpusight.prometheus_exporter.health_families import XidTally, health_families
from gpusight.prometheus_exporter.labels import label_value
from gpusight.prometheus_exporter.vendor_families import is_nvidia
from gpusight.snapshot.model import DeviceSample, MigDeviceSample, Snapshot
from gpusight.snapshot.throttle import THROTTLE_REASONS

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


def _mig_free(mig: MigDeviceSample) -> int | None:
    if mig.memory_total_bytes is None or mig.memory_used_bytes is None:
        return None
    return max(0, mig.memory_total_bytes - mig.memory_used_bytes)


_MIG_VALUES: dict[str, Callable[[MigDeviceSample], float | None]] = {
    names.FB_USED.name: lambda g: _mib(g.memory_used_bytes),
    names.FB_FREE.name: lambda g: _mib(_mig_free(g)),
    names.SM_ACTIVE.name: lambda g: _ratio(g.sm_active_percent),
    names.SM_OCCUPANCY.name: lambda g: _ratio(g.sm_occupancy_percent),
    names.TENSOR_ACTIVE.name: lambda g: _ratio(g.tensor_active_percent),
    names.DRAM_ACTIVE.name: lambda g: _ratio(g.dram_active_percent),
}
"""How each of ``names.MIG_METRICS`` is read from a MIG instance: its own memory and GPM activity, never the parent's."""


def device_labels(device: DeviceSample, snapshot: Snapshot, hostname: str) -> list[str]:
    """The values of ``DEVICE_LABELS`` for ``device``: "" where unknown."""
    driver = snapshot.driver.driver_version if snapshot.driver is not None else None
    return [str(device.index), label_value(device.uuid), label_value(device.pci_bus_id),
            "" if device.minor_number is None else f"nvidia{device.minor_number}", label_value(device.name),
            hostname, hostname, label_value(driver)]


def mig_labels(mig: MigDeviceSample, parent: list[str]) -> dict[str, str]:
    """A MIG instance's labels: its parent GPU's ``DEVICE_LABELS`` values, ``GPU_I_ID`` and ``GPU_I_PROFILE``."""
    values = [*parent, str(mig.gpu_instance_id), label_value(mig.profile)]
    return dict(zip(names.DEVICE_LABELS + names.MIG_LABELS, values, strict=True))


def device_families(snapshot: Snapshot, hostname: str, tally: XidTally | None = None,
                    known: dict[int, list[str]] | None = None) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    """One family per device metric with a series for each NVIDIA GPU that knows it; lost GPUs have none but health.

    MIG instances add their own series (``GPU_I_ID``, ``GPU_I_PROFILE``) to the families of ``names.MIG_METRICS``.
    Health and video families follow; ``tally`` counts Xid events across scrapes. A lost GPU whose health was read
    (Xid 79: fallen off the bus) keeps its health series under the labels ``known`` (GPU index -> its
    ``DEVICE_LABELS`` values, updated here from the GPUs present) remembers, or its index alone if never seen. A family no GPU knows is left out
    altogether, as dcgm-exporter leaves out fields a GPU does not support.
    """
    nvidia = [d for d in snapshot.devices if is_nvidia(d)]
    present = [(d, device_labels(d, snapshot, hostname)) for d in nvidia if not d.lost]
    known = {} if known is None else known
    known.update((d.index, labels) for d, labels in present)
    ailing = [(d, known.get(d.index) or device_labels(d, snapshot, hostname)) for d in nvidia
              if d.lost and d.health is not None]
    parents = {d.index: labels for d, labels in present}
    migs = [(g, mig_labels(g, parents[g.device_index])) for g in snapshot.mig_devices
            if g.device_index in parents and g.gpu_instance_id is not None]
    for metric, read in _VALUES:
        family = GaugeMetricFamily(metric.name, metric.help, labels=names.DEVICE_LABELS)
        for device, labels in present:
            value = read(device)
            if value is not None:
                family.add_metric(labels, value)
        read_mig = _MIG_VALUES.get(metric.name)
        if read_mig is not None:
            for mig, mig_label_values in migs:
                mig_value = read_mig(mig)
                if mig_value is not None:
                    family.add_sample(metric.name, mig_label_values, mig_value)
        if family.samples:
            yield family
    for health_family in health_families(present + ailing, hostname, snapshot.timestamp, tally or XidTally()):
        if health_family.samples:
            yield health_family
