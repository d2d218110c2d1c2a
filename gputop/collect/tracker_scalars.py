"""A snapshot as named scalars for experiment trackers (TensorBoard, MLflow): ``gpu0/power_watts`` and so on.

One table decides the tags and units for every hand-off: ``gputop --convert FILE --to tensorboard DIR``
and the ``gputop.torch`` logging into a run's own SummaryWriter or MLflow run. A value that is not
known (None) gives no scalar at all, never 0. ``docs/trackers.md`` lists the tags.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from gputop.collect.model import DeviceSample, HostSample, ProcessSample, Snapshot

GIB = 1024**3
"""Bytes in a GiB (memory is logged in GiB)."""
MB = 1e6
"""Bytes in a MB (transfer rates are logged in MB/s, decimal like the link speeds)."""

DEVICE_SCALARS: tuple[tuple[str, str, float], ...] = (
    ("utilization_percent", "utilization_gpu_percent", 1.0),
    ("memory_utilization_percent", "utilization_memory_percent", 1.0),
    ("memory_used_gib", "memory_used_bytes", 1.0 / GIB),
    ("power_watts", "power_watts", 1.0),
    ("temperature_celsius", "temperature_celsius", 1.0),
    ("fan_percent", "fan_percent", 1.0),
    ("sm_clock_mhz", "clock_sm_mhz", 1.0),
    ("memory_clock_mhz", "clock_memory_mhz", 1.0),
    ("sm_active_percent", "sm_active_percent", 1.0),
    ("sm_occupancy_percent", "sm_occupancy_percent", 1.0),
    ("tensor_active_percent", "tensor_active_percent", 1.0),
    ("dram_active_percent", "dram_active_percent", 1.0),
    ("pcie_rx_mb_per_s", "pcie_rx_bytes_per_s", 1.0 / MB),
    ("pcie_tx_mb_per_s", "pcie_tx_bytes_per_s", 1.0 / MB),
    ("nvlink_rx_mb_per_s", "nvlink_rx_bytes_per_s", 1.0 / MB),
    ("nvlink_tx_mb_per_s", "nvlink_tx_bytes_per_s", 1.0 / MB),
)
"""Per-GPU scalars: (name after ``gpuN/``, :class:`DeviceSample` field, factor from the field's unit)."""

PROCESS_SCALARS: tuple[tuple[str, str, float], ...] = (
    ("input_wait_percent", "input_wait_percent", 1.0),
    ("steps_per_second", "steps_per_second", 1.0),
)
"""Per-process scalars the trainer measures itself (``gputop.torch``): (name after ``pidN/``, field, factor)."""


def snapshot_scalars(snapshot: Snapshot) -> list[tuple[str, float]]:
    """Every known value of ``snapshot`` as (tag, value): each GPU's, the host's, and each trainer's input wait."""
    scalars = [scalar for device in snapshot.devices for scalar in device_scalars(device)]
    scalars += host_scalars(snapshot.host)
    for process in snapshot.processes:
        scalars += process_scalars(process)
    return scalars


def device_scalars(device: DeviceSample, prefix: str = "") -> Iterator[tuple[str, float]]:
    """A GPU's known values as (``{prefix}gpu{index}/{name}``, value); none for a lost GPU."""
    if device.lost:
        return
    head = f"{prefix}gpu{device.index}/"
    for name, field, factor in DEVICE_SCALARS:
        value = _finite(getattr(device, field))
        if value is not None:
            yield head + name, value * factor


def host_scalars(host: HostSample, prefix: str = "") -> list[tuple[str, float]]:
    """The host's known values: mean CPU busy %, iowait %, memory and swap used (GiB), 1-minute load."""
    cores = host.cpu_percent_per_core
    values = (
        ("cpu_percent", sum(cores) / len(cores) if cores else None),
        ("iowait_percent", host.iowait_percent),
        ("memory_used_gib", None if host.memory_used_bytes is None else host.memory_used_bytes / GIB),
        ("swap_used_gib", None if host.swap_used_bytes is None else host.swap_used_bytes / GIB),
        ("load_1m", None if host.load_average is None else host.load_average[0]),
    )
    return [(f"{prefix}host/{name}", known) for name, value in values if (known := _finite(value)) is not None]


def process_scalars(process: ProcessSample, prefix: str = "") -> list[tuple[str, float]]:
    """A trainer's own measurements (input wait, steps per second) as ``{prefix}pid{pid}/...``; none for others."""
    found = []
    for name, field, factor in PROCESS_SCALARS:
        value = _finite(getattr(process, field))
        if value is not None:
            found.append((f"{prefix}pid{process.pid}/{name}", value * factor))
    return found


def _finite(value: object) -> float | None:
    """``value`` as a float when it is a finite number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None
