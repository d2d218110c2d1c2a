"""Hand-built snapshots of GPUs with MIG instances, hardware faults and a busy decoder, written as JSONL recordings
for ``gpusight --serve --replay`` (the exporter and cluster tests), as the model holds them (schema 5).

One node's GPUs, by index:
0. an H100 in MIG mode with three instances (1: 3g.40gb with GPM activity, 2: 2g.20gb, 5: a hostile profile), each
   with one process;
1. Xid 79 (fallen off the bus) then Xid 48 (double-bit ECC): drain;
2. a pending row remap: drain;
3. a PCIe link at Gen3 x8 on a Gen5 x16 card, 90 % busy: drain;
4. a healthy GPU whose decoder is at 95 %;
5. a GPU that falls off the bus (Xid 79, lost) after ``LOST_AFTER`` snapshots.
"""

from __future__ import annotations

from pathlib import Path

from gpusight.recordings.opening import open_recorder
from gpusight.snapshot.model import (
    DeviceHealth,
    DeviceSample,
    JobSample,
    MigDeviceSample,
    ProcessSample,
    Snapshot,
    SourceKind,
    WorkloadKind,
    XidEvent,
)

GIB = 1 << 30
HOSTILE_PROFILE = '1g.10gb"\n\x1b[31m{x="y"}'
"""A profile no driver writes: quotes, a newline, an escape and braces, to be escaped in every label."""
MIG_PROFILES = {1: "3g.40gb", 2: "2g.20gb", 5: HOSTILE_PROFILE}
"""GPU instance id -> profile of GPU 0's MIG instances."""
MIG_PIDS = {1: 4101, 2: 4102, 5: 4105}
"""GPU instance id -> the PID of the process running in it."""
LOST_AFTER = 3
"""Snapshots of a recording before GPU 5 falls off the bus."""


def _healthy(**changes: object) -> DeviceHealth:
    base = dict(xid_total=0, ecc_volatile_corrected=0, ecc_aggregate_corrected=3, ecc_aggregate_uncorrected=0,
                remapped_rows_correctable=0, remapped_rows_uncorrectable=0, remap_pending=False, remap_failed=False,
                pcie_link_gen=5, pcie_link_gen_max=5, pcie_link_width=16, pcie_link_width_max=16, pcie_replay_count=0)
    base.update(changes)
    return DeviceHealth(**base)  # type: ignore[arg-type]


def _gpu(index: int, **changes: object) -> DeviceSample:
    base: dict[str, object] = dict(
        name="NVIDIA H100 80GB HBM3", uuid=f"GPU-0000000{index}-aaaa-bbbb-cccc-dddddddddddd",
        pci_bus_id=f"00000000:1{index}:00.0", minor_number=index, utilization_gpu_percent=90.0,
        memory_used_bytes=40 * GIB, memory_total_bytes=80 * GIB, power_watts=500.0, temperature_celsius=60.0,
        ecc_errors_uncorrected=0, mig_mode=False)
    base.update(changes)
    return DeviceSample(index, **base)  # type: ignore[arg-type]


def fleet_snapshot(now: float, lost: bool = True) -> Snapshot:
    """The node's snapshot at epoch seconds ``now`` (GPU 1's Xid events came 60 and 30 s before), GPU 5 ``lost``
    (its Xid 79 a second before) or not yet."""
    xids = (XidEvent(79, now - 60.0), XidEvent(48, now - 30.0))
    gpu5 = (DeviceSample(5, lost=True, error="GPU is lost", health=DeviceHealth(xid_total=1,
                                                                          xid_recent=(XidEvent(79, now - 1.0),)))
            if lost else _gpu(5, utilization_gpu_percent=0.0, memory_used_bytes=0, health=_healthy()))
    devices = (
        _gpu(0, mig_mode=True, utilization_gpu_percent=None, health=_healthy()),
        _gpu(1, ecc_errors_uncorrected=2, health=_healthy(xid_total=2, xid_recent=xids)),
        _gpu(2, health=_healthy(remap_pending=True, remapped_rows_uncorrectable=1)),
        _gpu(3, health=_healthy(pcie_link_gen=3, pcie_link_width=8, pcie_replay_count=12)),
        _gpu(4, utilization_gpu_percent=20.0, decoder_percent=95.0, encoder_percent=0.0, jpeg_percent=40.0,
             health=_healthy()),
        gpu5,
    )
    migs = tuple(
        MigDeviceSample(0, place, gpu_instance_id=gi, compute_instance_id=0, profile=profile,
                        uuid=f"MIG-0000000{gi}-1111-2222-3333-444444444444", memory_used_bytes=gi * GIB,
                        memory_total_bytes=10 * GIB * gi,
                        sm_active_percent=50.0 if gi == 1 else None, tensor_active_percent=25.0 if gi == 1 else None,
                        utilization_note=None if gi == 1 else "NVML gives no utilization per MIG device before GPM")
        for place, (gi, profile) in enumerate(MIG_PROFILES.items()))
    processes = tuple(ProcessSample(pid, device_index=0, name=f"train{gi}", user="ana", gpu_memory_bytes=gi * GIB,
                                    gpu_instance_id=gi, compute_instance_id=0, job=job)
                      for job, (gi, pid) in enumerate(MIG_PIDS.items(), start=1))
    jobs = tuple(JobSample(job, WorkloadKind.TRAINING, "hand-built", (pid,), (0,))
                 for job, pid in enumerate(MIG_PIDS.values(), start=1))
    return Snapshot(now, SourceKind.NVML, devices=devices, processes=processes, jobs=jobs, mig_devices=migs)


def write_fleet_recording(path: Path, start: float, seconds: int = 600) -> Path:
    """A JSONL recording of the node, one snapshot a second from ``start``; returns ``path``."""
    recorder = open_recorder(path)
    for step in range(seconds):
        recorder.write(fleet_snapshot(start + step, lost=step >= LOST_AFTER))
    recorder.close()
    return path
