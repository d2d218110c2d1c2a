"""The demo's hardware beyond the load: a GPU's health counters and Xid events, and its MIG devices.

Both are pure functions of the scenario and the clock, like the rest of the demo: an Xid that arrives
during the run arrives at the same simulated second whatever order the times are asked in.
"""

from __future__ import annotations

import math

from gpusight.demo.noise import SmoothNoise
from gpusight.demo.scenarios import FREE, Faults, MigSlice, Workload
from gpusight.snapshot.model import XID_RECENT_LIMIT, DeviceHealth, MigDeviceSample, XidEvent

MIB = 1024**2
"""Bytes in a MiB."""

PCIE_MAX = (5, 16)
"""The generation and width an H100 SXM's link can run."""

MIG_RESERVED_MIB = 13
"""Memory NVML counts as used in an empty MIG instance."""

_IDLE = FREE
"""A free slice's load: GPM reads 0 % activity on it."""


def xid_events(faults: Faults, start: float, t: float) -> list[XidEvent]:
    """Every Xid ``faults`` has delivered by ``t`` (the run began at ``start``), oldest first."""
    events = [XidEvent(code, start - before) for before, code in sorted(faults.xids_before, reverse=True)]
    if faults.xid_during is not None and t > start:
        period, code = faults.xid_during
        events += [XidEvent(code, start + period * k) for k in range(1, int((t - start) / period) + 1)]
    return events


def demo_health(faults: Faults, start: float, t: float) -> DeviceHealth:
    """The health a GPU with ``faults`` reports at ``t``."""
    events = xid_events(faults, start, t)
    gen, width = faults.pcie_link
    replays = math.floor(faults.pcie_replays_per_min * max(0.0, t - start) / 60.0) + (
        40 if faults.pcie_replays_per_min else 0
    )
    return DeviceHealth(
        xid_total=len(events),
        xid_recent=tuple(events[-XID_RECENT_LIMIT:]),
        ecc_volatile_corrected=faults.ecc_corrected,
        ecc_aggregate_corrected=faults.ecc_corrected * 10,
        ecc_aggregate_uncorrected=faults.ecc_aggregate_uncorrected,
        remapped_rows_correctable=faults.remapped_correctable,
        remapped_rows_uncorrectable=faults.remapped_uncorrectable,
        remap_pending=faults.remap_pending,
        remap_failed=False,
        pcie_link_gen=gen,
        pcie_link_gen_max=PCIE_MAX[0],
        pcie_link_width=width,
        pcie_link_width_max=PCIE_MAX[1],
        pcie_replay_count=replays,
        nvlink_crc_flit_errors=0,
        nvlink_crc_data_errors=0,
        nvlink_replay_errors=0,
        nvlink_recovery_errors=0,
    )


def mig_device(
    mig: MigSlice, mig_index: int, uuid: str, workload: Workload | None, used_bytes: int, noise: SmoothNoise, t: float
) -> MigDeviceSample:
    """MIG device ``mig`` at ``t``: its memory and GPM activity (Hopper samples each MIG instance);
    ``workload`` is its job's load (None for a free slice), ``used_bytes`` its processes' memory."""
    x = noise.unit(t)
    busy = workload if workload is not None else _IDLE
    util = busy.util[0] + (busy.util[1] - busy.util[0]) * x
    return MigDeviceSample(
        device_index=mig.gpu,
        mig_index=mig_index,
        gpu_instance_id=mig.gpu_instance_id,
        compute_instance_id=0,
        profile=mig.profile,
        uuid=uuid,
        sm_count=mig.sm_count,
        memory_used_bytes=used_bytes + MIG_RESERVED_MIB * MIB,
        memory_total_bytes=mig.memory_mib * MIB,
        sm_active_percent=round(util * busy.sm_share, 1),
        sm_occupancy_percent=round(util * busy.occupancy_share, 1),
        tensor_active_percent=round(util * busy.tensor_share, 1),
        dram_active_percent=round(util * busy.dram_share, 1),
    )
