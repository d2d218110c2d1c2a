"""Per-process figures on AMD GPUs: DRM fdinfo clients joined with KFD's per-process VRAM.

One :class:`~gpusight.snapshot.model.ProcessSample` per (process, GPU): the process is the one that opened the DRM
client (its forked DataLoader workers, which inherit the descriptor, are not counted again), the GPU the one whose
PCI slot ``drm-pdev`` names. Its figures:

- ``gpu_memory_bytes``: the VRAM of its clients on that GPU (``drm-resident-vram``, else ``drm-total-vram`` or the
  older ``drm-memory-vram``); for a process that holds only ``/dev/kfd`` on that GPU, KFD's ``vram_<gpu_id>``.
- ``sm_percent``: the busier of the ``gfx`` and ``compute`` engine classes since the last poll. Both kinds of queue
  run on the same compute units, so their busy times overlap; the larger is what the units were surely busy for,
  where a sum could claim more than they did. Each class is summed over the process's clients, at most 100.
- ``encoder_percent`` / ``decoder_percent``: the ``enc*`` / ``dec*`` classes; VCN's unified ring (``vcn*``) carries
  both, so it counts for each.

The KFD trap: ROCm compute submitted through ``/dev/kfd`` need not move the fdinfo engine counters. A process that
holds ``/dev/kfd`` and whose counters show no work gets ``sm_percent=None`` with :data:`KFD_USAGE_NOTE`, never 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from gpusight.backends.amdgpu.kfd import process_vram, rocm_pids
from gpusight.backends.drm.clients import ClientScan, DrmClient
from gpusight.snapshot.model import ProcessSample

KFD_USAGE_NOTE = "ROCm compute through /dev/kfd is not counted by fdinfo"
"""Why a ROCm process's usage is N/A."""

COMPUTE_ENGINES = ("gfx", "compute")
"""amdgpu's engine classes that run shaders."""


@dataclass
class _Use:
    """What one process does on one GPU, gathered over its clients."""

    memory: int | None = None
    engines: dict[str, float] = field(default_factory=dict)


def client_vram(client: DrmClient) -> int | None:
    """The VRAM of one client: resident where the kernel says, else allocated."""
    stats = client.stats
    return stats.memory_resident.get("vram", stats.memory_total.get("vram"))


def _add(into: int | None, value: int | None) -> int | None:
    return value if into is None else into if value is None else into + value


def _busiest(engines: dict[str, float], prefixes: Iterable[str]) -> float | None:
    found = [min(100.0, value) for name, value in engines.items() if name.startswith(tuple(prefixes))]
    return max(found) if found else None


def _sample(pid: int, index: int, use: _Use, rocm: bool) -> ProcessSample:
    sm = _busiest(use.engines, COMPUTE_ENGINES)
    trapped = rocm and not any(value > 0 for value in use.engines.values())
    return ProcessSample(
        pid=pid, device_index=index, gpu_memory_bytes=use.memory,
        sm_percent=None if trapped else sm,
        encoder_percent=_busiest(use.engines, ("enc", "vcn")),
        decoder_percent=_busiest(use.engines, ("dec", "vcn")),
        gpu_usage_note=KFD_USAGE_NOTE if trapped else None,
    )


def amdgpu_processes(scan: ClientScan, indexes: dict[str, int], kfd_slots: dict[int, str],
                     sysfs: Path) -> tuple[ProcessSample, ...]:
    """The processes using the GPUs whose PCI slots ``indexes`` maps to GPU indexes, ordered by GPU then pid."""
    uses: dict[tuple[int, int], _Use] = {}
    for client in scan.clients:
        index = indexes.get(client.stats.pdev or "")
        if index is None:
            continue
        drm = uses.setdefault((client.pid, index), _Use())
        drm.memory = _add(drm.memory, client_vram(client))
        for engine, percent in client.engine_percent.items():
            drm.engines[engine] = drm.engines.get(engine, 0.0) + percent
    rocm = set(scan.kfd_pids) | rocm_pids(sysfs)
    for pid in sorted(rocm):
        for gpu_id, size in process_vram(sysfs, pid).items():
            index = indexes.get(kfd_slots.get(gpu_id, ""))
            if index is None:
                continue
            use = uses.get((pid, index))
            if use is None and size > 0:
                uses[(pid, index)] = _Use(memory=size)
            elif use is not None and use.memory is None:
                use.memory = size
    return tuple(_sample(pid, index, use, pid in rocm)
                 for (pid, index), use in sorted(uses.items(), key=lambda item: (item[0][1], item[0][0])))
