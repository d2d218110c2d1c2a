"""GPU processes of one device: compute and graphics contexts, memory, and per-process SM / memory use."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pynvml

from gpusight.backends.cadence import same_period
from gpusight.backends.nvml.calls import CallGuard
from gpusight.backends.nvml.mig import instance_id
from gpusight.snapshot.model import GpuProcessType, ProcessRole, ProcessSample

PROCESS_LIST_PERIOD_S = 1.0
"""How often a device's process lists (compute and graphics) and the processes' utilization samples are read:
once as the clock enters each new period; the rows last built are returned in between.

The process table shows them once a second, as it shows the ``/proc`` details, so a process that starts
or ends shows within a second; the device's own figures are still read at every poll. The lists are read in
step with the details (:mod:`gpusight.backends.cadence`).
"""

UTILIZATION_PERIOD_S = PROCESS_LIST_PERIOD_S
"""How often nvmlDeviceGetProcessUtilization is called on one device: with the lists.

One call costs about 2.4 ms (H100, driver 580.159.04), more than all other calls of a poll together
apart from the energy counter; the process table shows SM % once a second.
"""

UTILIZATION_LEAST_GAP_S = 0.5
"""Lists read sooner than this after the last utilization call keep its samples: a one-shot's second poll, 0.3 s
after its first and across a second's boundary, would find no sample newer than the first's and show none."""

_Utilization = tuple[float | None, float | None, float | None, float | None, int]
"""A process's latest sample: SM, memory, encoder and decoder percent, and its timestamp."""
_NO_SAMPLE: _Utilization = (None, None, None, None, 0)

_LISTS = (
    ("compute", (("compute_procs", "nvmlDeviceGetComputeRunningProcesses_v3"),
                 ("compute_procs_v2", "nvmlDeviceGetComputeRunningProcesses_v2"))),
    ("graphics", (("graphics_procs", "nvmlDeviceGetGraphicsRunningProcesses_v3"),
                  ("graphics_procs_v2", "nvmlDeviceGetGraphicsRunningProcesses_v2"))),
)


class DeviceProcessLister:
    """Lists the processes on one device and joins their latest utilization samples.

    The driver keeps one sample per process (about every 200 ms on an H100) and returns, per process,
    the latest one newer than the timestamp asked for, and none for a process it saw no activity of
    since then. So a process's SM, memory, encoder and decoder % are those of its sample in the latest call, and None
    when that call had none for it, as ``nvidia-smi pmon`` shows ``-``; an older sample is not kept.
    """

    def __init__(self, index: int, handle: object, guard: CallGuard) -> None:
        self._index = index
        self._handle = handle
        self._guard = guard
        self._last_seen = 0
        self._read_at = 0.0
        self._utilization_at = -math.inf
        self._mig = False
        self._rows: tuple[ProcessSample, ...] | None = None
        self._utilization: dict[int, _Utilization] = {}
        self._denied: set[str] = set()

    @property
    def denied(self) -> bool:
        """True once the GPU, in MIG mode, refused its compute process list (NO_PERMISSION: NVML gives a MIG-enabled
        GPU's list only to privileged users); a refused list is not asked again and the MIG devices' own lists
        stand in."""
        return "compute" in self._denied

    def read(self, now: float, mig: bool = False) -> list[ProcessSample]:
        """The device's GPU processes (NVML fields only), compute ones first; ``now`` is a monotonic time.

        The lists are read once every ``PROCESS_LIST_PERIOD_S`` (when the clock enters a new period); in between,
        the same rows (the same objects) are returned. With ``mig`` (the GPU is in MIG mode) a process carries the GPU and compute
        instance NVML gives it, and a refused list sets ``denied`` instead of making a note.
        """
        if self._rows is None or mig != self._mig or not same_period(self._read_at, now, PROCESS_LIST_PERIOD_S):
            self._read_at = now
            self._mig = mig
            self._rows = self._read_rows(now, mig)
        return list(self._rows)

    def _read_rows(self, now: float, mig: bool) -> tuple[ProcessSample, ...]:
        """Read both lists and, when there are processes, their utilization samples; the rows they make."""
        found: dict[int, tuple[set[str], int | None]] = {}
        instances: dict[int, tuple[int | None, int | None]] = {}
        for kind, variants in _LISTS:
            for info in self._list(kind, variants, mig):
                kinds, memory = found.setdefault(info.pid, (set(), None))
                kinds.add(kind)
                if instances.get(info.pid, (None, None))[0] is None:
                    instances[info.pid] = (instance_id(getattr(info, "gpuInstanceId", None)),
                                           instance_id(getattr(info, "computeInstanceId", None)))
                used = info.usedGpuMemory
                if used is not None and (memory is None or used > memory):
                    found[info.pid] = (kinds, int(used))
        if found and now - self._utilization_at >= UTILIZATION_LEAST_GAP_S:
            self._utilization_at = now
            self._update_utilization()
        self._utilization = {pid: u for pid, u in self._utilization.items() if pid in found}
        samples = []
        for pid, (kinds, memory) in found.items():
            sm, mem, enc, dec, _ = self._utilization.get(pid, _NO_SAMPLE)
            gpu_instance, compute_instance = instances.get(pid, (None, None))
            samples.append(ProcessSample(
                pid=pid, role=ProcessRole.GPU, device_index=self._index, gpu_memory_bytes=memory,
                sm_percent=sm, gpu_memory_percent=mem, gpu_process_type=GpuProcessType("+".join(sorted(kinds))),
                encoder_percent=enc, decoder_percent=dec,
                gpu_instance_id=gpu_instance, compute_instance_id=compute_instance,
            ))
        return tuple(samples)

    def _list(self, kind: str, variants: tuple[tuple[str, str], ...], mig: bool) -> list[Any]:
        """pynvml's process-info structs from the first of ``variants`` (guard key, function name) the driver supports."""
        if mig and kind in self._denied:
            return []
        for key, name in variants:
            if self._guard.supported(key):
                function = getattr(pynvml, name, None)
                result = self._guard.call(key, self._permitted(kind, function) if mig and function else function,
                                          self._handle)
                if kind in self._denied:
                    return []
                if result is not None or self._guard.supported(key):
                    return result or []
        return []

    def _permitted(self, kind: str, function: Callable[[object], Any]) -> Callable[[object], Any]:
        """``function`` with NO_PERMISSION turned into a refused ``kind`` of list and no result (a MIG GPU's list for a
        plain user)."""
        def call(handle: object) -> Any:
            try:
                return function(handle)
            except pynvml.NVMLError as error:
                if error.value != pynvml.NVML_ERROR_NO_PERMISSION:
                    raise
                self._denied.add(kind)
                return None

        return call

    def _update_utilization(self) -> None:
        """Replace the samples with those newer than the last seen; none (NOT_FOUND) means no activity."""
        samples = self._guard.call("process_utilization", pynvml.nvmlDeviceGetProcessUtilization,
                                   self._handle, self._last_seen)
        latest: dict[int, _Utilization] = {}
        for sample in samples or ():
            stamp = int(sample.timeStamp)
            self._last_seen = max(self._last_seen, stamp)
            if sample.pid not in latest or stamp >= latest[sample.pid][4]:
                latest[sample.pid] = (float(sample.smUtil), float(sample.memUtil), float(sample.encUtil),
                                      float(sample.decUtil), stamp)
        self._utilization = latest
