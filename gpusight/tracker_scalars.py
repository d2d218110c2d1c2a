"""A snapshot as named scalars for experiment trackers (TensorBoard, MLflow): ``gpu0/power_watts`` and so on.

One table decides the tags and units for every hand-off: ``gpusight --convert FILE --to tensorboard DIR``
and the ``gpusight.torch`` logging into a run's own SummaryWriter or MLflow run. A value that is not
known (None) gives no scalar at all, never 0. ``docs/trackers.md`` lists the tags.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from operator import attrgetter
from typing import Any

from gpusight.facts.speed import utilization_name
from gpusight.snapshot.model import DeviceSample, HostSample, ProcessSample, Snapshot

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

STEP_TIME_PARTS: tuple[tuple[str, str], ...] = (
    ("data", "step_data_percent"),
    ("compute", "step_compute_percent"),
    ("communication", "step_comm_percent"),
    ("copy", "step_copy_percent"),
    ("idle", "step_idle_percent"),
)
"""The step-time breakdown's parts (as the trainer's record names them) and their :class:`ProcessSample` fields;
each is logged as ``step_time/{part}_percent``."""

PROCESS_SCALARS: tuple[tuple[str, str, float], ...] = (
    ("input_wait_percent", "input_wait_percent", 1.0),
    ("steps_per_second", "steps_per_second", 1.0),
    ("samples_per_second", "samples_per_second", 1.0),
    ("tokens_per_second", "tokens_per_second", 1.0),
    ("achieved_tflops", "achieved_tflops", 1.0),
    *((f"step_time/{part}_percent", field, 1.0) for part, field in STEP_TIME_PARTS),
)
"""Per-process scalars the trainer measures itself (``gpusight.torch``): (name after ``pidN/``, :class:`ProcessSample`
field, factor). The FLOP/s utilization comes on top, named after what it is (:func:`utilization_tag`)."""

UTILIZATION_FIELD = "flops_utilization_percent"
"""The :class:`ProcessSample` field of the FLOP/s utilization, logged as ``mfu_percent`` or ``hfu_percent``."""


HOST_SCALARS: tuple[tuple[str, str, float], ...] = (
    ("cpu_percent", "cpu_percent_per_core", 1.0),
    ("iowait_percent", "iowait_percent", 1.0),
    ("memory_used_gib", "memory_used_bytes", 1.0 / GIB),
    ("swap_used_gib", "swap_used_bytes", 1.0 / GIB),
    ("load_1m", "load_average", 1.0),
)
"""Host scalars: (name after ``host/``, :class:`HostSample` field, factor); CPU is the mean over the cores and load
the 1-minute average."""


def snapshot_scalars(snapshot: Snapshot) -> list[tuple[str, float]]:
    """Every known value of ``snapshot`` as (tag, value): each GPU's, the host's, and each trainer's input wait."""
    scalars = [scalar for device in snapshot.devices for scalar in device_scalars(device)]
    scalars += host_scalars(snapshot.host)
    for process in snapshot.processes:
        if process.input_wait_percent is not None or process.steps_per_second is not None:
            scalars += process_scalars(process)
    return scalars


def device_scalars(device: DeviceSample, prefix: str = "") -> list[tuple[str, float]]:
    """A GPU's known values as (``{prefix}gpu{index}/{name}``, value); none for a lost GPU."""
    if device.lost:
        return []
    return _known(_tags(f"{prefix}gpu{device.index}/", "gpu"), _DEVICE_FACTORS, _device_values(device))


def host_scalars(host: HostSample, prefix: str = "") -> list[tuple[str, float]]:
    """The host's known values: mean CPU busy %, iowait %, memory and swap used (GiB), 1-minute load."""
    cores = host.cpu_percent_per_core
    values = (
        sum(cores) / len(cores) if cores else None,
        host.iowait_percent,
        host.memory_used_bytes,
        host.swap_used_bytes,
        None if host.load_average is None else host.load_average[0],
    )
    return _known(_tags(f"{prefix}host/", "host"), _HOST_FACTORS, values)


def process_scalars(process: ProcessSample, prefix: str = "") -> list[tuple[str, float]]:
    """A trainer's own measurements (input wait, throughput, FLOP/s and their utilization, step-time shares) as
    ``{prefix}pid{pid}/...``; none for others."""
    return trainer_scalars(f"{prefix}pid{process.pid}/", lambda field: getattr(process, field),
                           utilization_name(process))


def utilization_tag(name: str) -> str:
    """The tag (after the head) of a FLOP/s utilization named ``name`` ("MFU" or "HFU"): ``mfu_percent``."""
    return f"{name.lower()}_percent"


def trainer_scalars(head: str, value_of: Callable[[str], Any], utilization_name: str) -> list[tuple[str, float]]:
    """A trainer's known measurements as (``{head}{name}``, value): ``value_of`` gives each :class:`ProcessSample`
    field's value (None when unknown); the utilization is tagged after ``utilization_name`` ("MFU" or "HFU")."""
    scalars = _known(_tags(head, "pid"), _PROCESS_FACTORS, tuple(value_of(field) for field in _PROCESS_FIELDS))
    return scalars + _known((head + utilization_tag(utilization_name),), (1.0,), (value_of(UTILIZATION_FIELD),))


_device_values = attrgetter(*(field for _, field, _ in DEVICE_SCALARS))
_PROCESS_FIELDS = tuple(field for _, field, _ in PROCESS_SCALARS)
_DEVICE_FACTORS = tuple(factor for _, _, factor in DEVICE_SCALARS)
_HOST_FACTORS = tuple(factor for _, _, factor in HOST_SCALARS)
_PROCESS_FACTORS = tuple(factor for _, _, factor in PROCESS_SCALARS)
_TABLES = {"gpu": DEVICE_SCALARS, "host": HOST_SCALARS, "pid": PROCESS_SCALARS}


@functools.lru_cache(maxsize=4096)
def _tags(head: str, kind: str) -> tuple[str, ...]:
    """The tags of the ``kind`` (gpu, host, pid) scalars under ``head`` (cached: the same heads come back every snapshot)."""
    return tuple(head + name for name, _, _ in _TABLES[kind])


def _known(tags: tuple[str, ...], factors: tuple[float, ...], values: tuple[Any, ...]) -> list[tuple[str, float]]:
    """(tag, value x factor) for each value that is a finite number; None and non-finite values are left out."""
    return [(tag, value * factor) for tag, factor, value in zip(tags, factors, values, strict=True)
            if value is not None and not isinstance(value, bool) and math.isfinite(value)]
