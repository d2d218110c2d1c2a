"""Device metrics of GPUs other than NVIDIA's: AMD's under AMD device-metrics-exporter's names where it has one, the
rest (and every Intel GPU's) under gpusight's own names; docs/exporter.md has the tables."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily

from gpusight import metric_names as names
from gpusight.prometheus_exporter.labels import label_value
from gpusight.snapshot.model import DeviceSample, Snapshot, Vendor

MB = 1 << 20
"""AMD's exporter's "MB" of VRAM: amdsmi's MiB (bytes // 2**20)."""

PCIE_GT_PER_S = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0, 7: 128.0}
"""Transfer rate per lane of each PCIe generation (PCI-SIG), AMD's ``pcie_speed`` unit."""


def is_nvidia(device: DeviceSample) -> bool:
    """True for an NVIDIA GPU, served under dcgm-exporter's names (recordings before schema 6 hold no vendor)."""
    return device.vendor in (None, Vendor.NVIDIA)


def _free(device: DeviceSample) -> float | None:
    if device.memory_total_bytes is None or device.memory_used_bytes is None:
        return None
    return float(max(0, device.memory_total_bytes - device.memory_used_bytes))


def _edge(device: DeviceSample) -> float | None:
    """The edge temperature: None where ``temperature_celsius`` is the junction's (the amdgpu backend falls back to it
    on GPUs without an edge sensor, such as the MI300X, where AMD's exporter has no edge series either)."""
    temperature, junction = device.temperature_celsius, device.temperature_junction_celsius
    return None if junction is not None and temperature == junction else temperature


def _hertz(mhz: int | None) -> float | None:
    return None if mhz is None else mhz * 1e6


def _number(value: float | None) -> float | None:
    return None if value is None else float(value)


def _link_gen(device: DeviceSample, highest: bool) -> float | None:
    health = device.health
    if health is None:
        return None
    return _number(health.pcie_link_gen_max if highest else health.pcie_link_gen)


def _gt_per_s(generation: float) -> float | None:
    return PCIE_GT_PER_S.get(int(generation))


@dataclass(frozen=True, slots=True)
class VendorField:
    """One device metric: read in gpusight's unit, served under gpusight's name or AMD's (converted to its unit)."""

    own: names.MetricName
    """gpusight's name, unit and help."""
    read: Callable[[DeviceSample], float | None]
    """The value in ``own``'s unit; None where unknown (then no series)."""
    amd: names.MetricName | None = None
    """AMD device-metrics-exporter's name for it, or None where it has none."""
    to_amd: Callable[[float], float | None] = float
    """``own``'s unit to ``amd``'s (None: no value in AMD's unit, as for an unknown PCIe generation)."""
    own_labels: tuple[str, ...] = ()
    """Values of ``own.labels``."""
    amd_labels: tuple[str, ...] = ()
    """Values of ``amd.labels``."""


FIELDS = (
    VendorField(names.OWN_GPU_UTIL, lambda d: d.utilization_gpu_percent, names.AMD_GFX_ACTIVITY),
    VendorField(names.OWN_MEM_UTIL, lambda d: d.utilization_memory_percent, names.AMD_UMC_ACTIVITY),
    VendorField(names.OWN_MEM_USED, lambda d: _number(d.memory_used_bytes), names.AMD_USED_VRAM, lambda b: b // MB),
    VendorField(names.OWN_MEM_TOTAL, lambda d: _number(d.memory_total_bytes), names.AMD_TOTAL_VRAM, lambda b: b // MB),
    VendorField(names.OWN_MEM_FREE, _free, names.AMD_FREE_VRAM, lambda b: b // MB),
    VendorField(names.OWN_POWER, lambda d: d.power_watts, names.AMD_POWER_USAGE),
    VendorField(names.OWN_POWER_LIMIT, lambda d: d.power_limit_watts),
    VendorField(names.OWN_ENERGY, lambda d: d.energy_joules, names.AMD_ENERGY, lambda j: round(j * 1e6)),
    VendorField(names.OWN_TEMP, _edge, names.AMD_EDGE_TEMP),
    VendorField(names.OWN_JUNCTION_TEMP, lambda d: d.temperature_junction_celsius, names.AMD_JUNCTION_TEMP),
    VendorField(names.OWN_MEMORY_TEMP, lambda d: d.temperature_memory_celsius, names.AMD_MEMORY_TEMP),
    VendorField(names.OWN_CLOCK, lambda d: _hertz(d.clock_sm_mhz), names.AMD_CLOCK, lambda hz: hz / 1e6,
                ("compute",), ("0", "system")),
    VendorField(names.OWN_CLOCK, lambda d: _hertz(d.clock_memory_mhz), names.AMD_CLOCK, lambda hz: hz / 1e6,
                ("memory",), ("1", "memory")),
    VendorField(names.OWN_FAN, lambda d: d.fan_percent),
    VendorField(names.OWN_PCIE_GEN, lambda d: _link_gen(d, False), names.AMD_PCIE_SPEED, _gt_per_s),
    VendorField(names.OWN_PCIE_MAX_GEN, lambda d: _link_gen(d, True), names.AMD_PCIE_MAX_SPEED, _gt_per_s),
)
"""Every device metric of a GPU other than NVIDIA's, in docs/exporter.md's order."""


def vendor_families(snapshot: Snapshot, hostname: str) -> Iterator[GaugeMetricFamily]:
    """One family per name with a series for each GPU other than NVIDIA's that knows the value; never a 0 for N/A.

    An AMD GPU's value goes under AMD's name where ``FIELDS`` gives one, else (and for Intel) under gpusight's.
    """
    others = [d for d in snapshot.devices if not d.lost and not is_nvidia(d)]
    families: dict[str, GaugeMetricFamily] = {}
    for field in FIELDS:
        for device in others:
            value = field.read(device)
            if value is not None and field.amd is not None and device.vendor == Vendor.AMD:
                metric, labels = field.amd, [*field.amd_labels, str(device.index), label_value(device.name), hostname]
                value = field.to_amd(value)
                label_names = metric.labels + names.AMD_DEVICE_LABELS
            else:
                metric = field.own
                labels = [hostname, hostname, str(device.index), label_value(device.uuid), str(device.vendor),
                          *field.own_labels]
                label_names = names.OWN_DEVICE_LABELS + metric.labels
            if value is None:
                continue
            if metric.name not in families:
                families[metric.name] = GaugeMetricFamily(metric.name, metric.help, labels=label_names)
            families[metric.name].add_metric(labels, value)
    yield from families.values()
