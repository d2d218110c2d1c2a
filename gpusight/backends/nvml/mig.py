"""MIG devices of one MIG-enabled GPU: their ids, profile, memory, processes and (Hopper and later) GPM activity.

Each poll walks the parent's MIG slots (``nvmlDeviceGetMigDeviceHandleByIndex``, NOT_FOUND for an empty
one) and reads each MIG device's UUID, which tells whether the instance is the one seen before: its ids,
profile and SM count are read once per UUID, its memory every poll. So instances created or destroyed
while gpusight runs appear and disappear on the next poll. Every call is a plain query that answers in
microseconds; none blocks.

NVML gives no utilization for a MIG device (``nvmlDeviceGetUtilizationRates`` and process utilization
answer NOT_SUPPORTED in MIG mode); on GPUs with GPM (Hopper and later) ``nvmlGpmMigSampleGet`` samples each
GPU instance, and its SM/tensor/DRAM activity is read as the whole GPU's is.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import pynvml

from gpusight.backends.nvml.calls import CallGuard, raw_text_call
from gpusight.backends.nvml.gpm import GpmReader
from gpusight.snapshot.model import GpuProcessType, MigDeviceSample, ProcessRole, ProcessSample

NO_GPM_NOTE = "NVML gives no utilization per MIG device; GPM needs Hopper or later"
"""Why a MIG device's activity is N/A on a GPU without GPM."""

NO_MIG_SAMPLING_NOTE = "NVML gives no utilization per MIG device, and GPM here does not sample MIG instances"
"""Why a MIG device's activity is N/A on a GPU with GPM whose driver refuses ``nvmlGpmMigSampleGet``."""

FIRST_SAMPLE_NOTE = "GPM per MIG instance needs two samples: figures from the next poll on"
"""Why a MIG device's activity is N/A on the first poll of a GPU with GPM."""

NOT_AVAILABLE = 0xFFFFFFFF
"""What NVML puts in a process's gpuInstanceId / computeInstanceId outside MIG."""

_mig_name = raw_text_call(pynvml.nvmlDeviceGetName)
_mig_uuid = raw_text_call(pynvml.nvmlDeviceGetUUID)
_MIG_WORD = " MIG "


def profile_from_name(name: str | None) -> str | None:
    """The profile the driver puts after "MIG" in a MIG device's name: ``"3g.40gb"`` of
    ``"NVIDIA H100 80GB HBM3 MIG 3g.40gb"``, ``"1c.3g.40gb"`` for a compute instance using one of three slices."""
    if name is None or _MIG_WORD not in name:
        return None
    profile = name.rsplit(_MIG_WORD, 1)[1].strip()
    return profile or None


def profile_from_attributes(attributes: Any) -> str | None:
    """The profile spelled from ``nvmlDeviceGetAttributes_v2``: ``{gi slices}g.{GB}gb``, with ``{ci slices}c.``
    in front when the compute instance uses fewer slices than its GPU instance (as nvidia-smi writes it)."""
    slices, compute, megabytes = (int(attributes.gpuInstanceSliceCount), int(attributes.computeInstanceSliceCount),
                                  int(attributes.memorySizeMB))
    if slices <= 0 or megabytes <= 0:
        return None
    profile = f"{slices}g.{math.ceil(megabytes / 1024)}gb"  # 40192 MB is "40gb", 4864 MB "5gb"
    return profile if compute <= 0 or compute >= slices else f"{compute}c.{profile}"


@dataclass
class _Instance:
    """What is read once about one MIG device (one UUID)."""

    gpu_instance_id: int | None
    compute_instance_id: int | None
    profile: str | None
    sm_count: int | None
    gpm: GpmReader | None = field(default=None)


class MigReader:
    """The MIG devices of the MIG-enabled GPU ``index`` (handle ``parent``), read once per poll.

    The profile is taken from the MIG device's name (the driver appends it, e.g. ``MIG 3g.40gb``), as
    nvidia-smi shows it and dcgm-exporter labels ``GPU_I_PROFILE``; where the name lacks it, it is spelled
    from the slice counts and memory of ``nvmlDeviceGetAttributes_v2``.
    """

    def __init__(self, index: int, parent: object, guard: CallGuard) -> None:
        # calls made every poll are keyed by MIG index (``mig1_memory``), so that one failing MIG device is
        # noted once and the others' successes do not make that note repeat
        self._index = index
        self._parent = parent
        self._guard = guard
        self._slots: int | None = None
        self._known: dict[tuple[int, str], _Instance] = {}

    def read(self, now: float, with_processes: bool) -> tuple[list[MigDeviceSample], list[ProcessSample]]:
        """The MIG devices present now, and (``with_processes``) the processes each MIG handle lists."""
        devices: list[MigDeviceSample] = []
        processes: list[ProcessSample] = []
        seen: set[tuple[int, str]] = set()
        for mig_index in range(self._slot_count()):
            handle = self._guard.call(f"mig{mig_index}_handle", pynvml.nvmlDeviceGetMigDeviceHandleByIndex,
                                      self._parent, mig_index)
            if handle is None:
                continue
            uuid = self._guard.call(f"mig{mig_index}_uuid", _mig_uuid, handle)
            key = (mig_index, uuid or "")
            seen.add(key)
            instance = self._known.get(key)
            if instance is None:
                instance = self._known[key] = self._identify(handle)
            devices.append(self._sample(mig_index, uuid, handle, instance, now))
            if with_processes:
                processes.extend(self._processes(mig_index, handle, instance))
        for gone in set(self._known) - seen:
            self._forget(gone)
        return devices, processes

    def close(self) -> None:
        """Free the GPM buffers of every instance."""
        for key in list(self._known):
            self._forget(key)

    def _slot_count(self) -> int:
        if self._slots is None:
            count = self._guard.call("mig_max", pynvml.nvmlDeviceGetMaxMigDeviceCount, self._parent)
            if count is None and self._guard.supported("mig_max"):
                return 0
            self._slots = int(count or 0)
        return self._slots

    def _identify(self, handle: object) -> _Instance:
        g = self._guard
        attributes = g.call("mig_attributes", pynvml.nvmlDeviceGetAttributes_v2, handle)
        profile = profile_from_name(g.call("mig_name", _mig_name, handle))
        if profile is None and attributes is not None:
            profile = profile_from_attributes(attributes)
        gpu_instance = g.call("mig_gpu_instance", pynvml.nvmlDeviceGetGpuInstanceId, handle)
        instance = _Instance(
            gpu_instance_id=gpu_instance,
            compute_instance_id=g.call("mig_compute_instance", pynvml.nvmlDeviceGetComputeInstanceId, handle),
            profile=profile,
            sm_count=None if attributes is None else int(attributes.multiprocessorCount) or None,
        )
        if gpu_instance is not None:
            instance.gpm = GpmReader(self._parent, g, gpu_instance_id=int(gpu_instance))
        return instance

    def _sample(self, mig_index: int, uuid: str | None, handle: object, instance: _Instance,
                now: float) -> MigDeviceSample:
        memory = self._guard.call(f"mig{mig_index}_memory", pynvml.nvmlDeviceGetMemoryInfo, handle)
        gpm = None if instance.gpm is None else instance.gpm.read(now)
        if gpm is not None:
            note = None
        elif instance.gpm is not None and instance.gpm.supported:
            note = FIRST_SAMPLE_NOTE
        elif not (self._guard.supported("gpm_mig_sample") and self._guard.supported("gpm_mig_metrics")):
            note = NO_MIG_SAMPLING_NOTE
        else:
            note = NO_GPM_NOTE
        return MigDeviceSample(
            device_index=self._index, mig_index=mig_index, gpu_instance_id=instance.gpu_instance_id,
            compute_instance_id=instance.compute_instance_id, profile=instance.profile, uuid=uuid,
            sm_count=instance.sm_count,
            memory_used_bytes=None if memory is None else int(memory.used),
            memory_total_bytes=None if memory is None else int(memory.total),
            sm_active_percent=None if gpm is None else gpm.sm_active_percent,
            sm_occupancy_percent=None if gpm is None else gpm.sm_occupancy_percent,
            tensor_active_percent=None if gpm is None else gpm.tensor_active_percent,
            dram_active_percent=None if gpm is None else gpm.dram_active_percent,
            utilization_note=note,
        )

    def _processes(self, mig_index: int, handle: object, instance: _Instance) -> list[ProcessSample]:
        infos = self._guard.call(f"mig{mig_index}_compute_procs", pynvml.nvmlDeviceGetComputeRunningProcesses, handle)
        samples = []
        for info in infos or ():
            used = info.usedGpuMemory
            samples.append(ProcessSample(
                pid=int(info.pid), role=ProcessRole.GPU, device_index=self._index,
                gpu_memory_bytes=None if used is None else int(used), gpu_process_type=GpuProcessType.COMPUTE,
                gpu_instance_id=instance_id(info.gpuInstanceId, instance.gpu_instance_id),
                compute_instance_id=instance_id(info.computeInstanceId, instance.compute_instance_id),
            ))
        return samples

    def _forget(self, key: tuple[int, str]) -> None:
        instance = self._known.pop(key)
        if instance.gpm is not None:
            instance.gpm.close()


def instance_id(value: Any, fallback: int | None = None) -> int | None:
    """A process struct's gpuInstanceId / computeInstanceId, or ``fallback`` where NVML left it unset."""
    if value is None or int(value) == NOT_AVAILABLE:
        return fallback
    return int(value)


def merge_processes(parent: list[ProcessSample], per_instance: list[ProcessSample]) -> list[ProcessSample]:
    """The parent's processes joined with those the MIG handles list: a process both list appears once.

    The MIG handle's entry places it on its instance (the parent's graphics list, for one, gives no
    instance); the same process in another instance stays a separate entry.
    """
    merged = list(parent)
    at = {p.pid: i for i, p in enumerate(parent)}
    for process in per_instance:
        i = at.get(process.pid)
        known = None if i is None else merged[i]
        placed = known is not None and known.gpu_instance_id is not None
        if i is None or known is None or placed and (known.gpu_instance_id, known.compute_instance_id) != (
                process.gpu_instance_id, process.compute_instance_id):
            merged.append(process)
            continue
        kinds = {GpuProcessType.COMPUTE.value}
        if known.gpu_process_type is not None:
            kinds |= set(known.gpu_process_type.value.split("+"))
        sizes = [b for b in (known.gpu_memory_bytes, process.gpu_memory_bytes) if b is not None]
        merged[i] = dataclasses.replace(
            known, gpu_instance_id=process.gpu_instance_id, compute_instance_id=process.compute_instance_id,
            gpu_process_type=GpuProcessType("+".join(sorted(kinds))), gpu_memory_bytes=max(sizes, default=None))
    return merged


def mig_uuids(parent: object) -> tuple[str, ...]:
    """The UUIDs of the MIG devices of the GPU ``parent`` (none outside MIG mode or where NVML does not say)."""
    try:
        if not pynvml.nvmlDeviceGetMigMode(parent)[0]:
            return ()
        slots = int(pynvml.nvmlDeviceGetMaxMigDeviceCount(parent))
    except pynvml.NVMLError:
        return ()
    found = []
    for mig_index in range(slots):
        try:
            found.append(_mig_uuid(pynvml.nvmlDeviceGetMigDeviceHandleByIndex(parent, mig_index)))
        except pynvml.NVMLError:
            continue
    return tuple(found)
