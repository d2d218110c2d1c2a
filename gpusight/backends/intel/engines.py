"""The engine classes and memory regions of xe and i915 clients, and what they add up to per process and device.

Engine classes (``Documentation/gpu/drm-usage-stats.rst`` and the drivers' own pages): i915 reports
``drm-engine-<class>`` busy nanoseconds for ``render``, ``copy``, ``video``, ``video-enhance`` and ``compute``; xe
reports ``drm-cycles-<class>`` over ``drm-total-cycles-<class>`` for ``rcs``, ``bcs``, ``vcs``, ``vecs`` and ``ccs``.
Render and compute carry a training job's kernels, so they give a process's ``sm_percent``. Intel's video engine
(``video``/``vcs``) both decodes and encodes and the kernel does not say which; in a training job's input pipeline it
decodes, so its busy percent is the decoder figure, and the encoder figure is None (unknown) rather than a guess.

Memory regions: xe ``vram0``, ``vram1``... and i915 ``local0``, ``local1``... are device memory; ``system``/
``system0``, ``gtt`` and ``stolen`` are not. A client's device memory is its ``drm-resident-<region>`` where
given, else ``drm-total-<region>``.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpusight.backends.drm.clients import DrmClient
from gpusight.snapshot.model import ProcessSample

COMPUTE_CLASSES = frozenset({"render", "compute", "rcs", "ccs"})
"""Engine classes whose busy time is a training job's kernels."""
VIDEO_CLASSES = frozenset({"video", "vcs"})
"""Engine classes of the media engine (decode and encode)."""
DEVICE_MEMORY_PREFIXES = ("vram", "local")
"""Memory region names that are the card's own memory."""
FIRST_READING_NOTE = "usage needs a second reading of the engine counters"
"""Why a process's usage is None on the first poll that sees its client."""


def device_memory_bytes(client: DrmClient) -> int:
    """The client's bytes in device memory (resident where given, else allocated)."""
    stats = client.stats
    regions = {r for r in (*stats.memory_total, *stats.memory_resident) if r.startswith(DEVICE_MEMORY_PREFIXES)}
    return sum(stats.memory_resident.get(r, stats.memory_total.get(r, 0)) for r in regions)


def class_sums(clients: Iterable[DrmClient]) -> dict[str, float]:
    """Busy percent per engine class summed over ``clients`` (each class capped at 100)."""
    sums: dict[str, float] = {}
    for client in clients:
        for engine, percent in client.engine_percent.items():
            sums[engine] = min(100.0, sums.get(engine, 0.0) + percent)
    return sums


def busiest(sums: dict[str, float], classes: frozenset[str] | None = None) -> float | None:
    """The highest of ``sums`` among ``classes`` (every class when None); None when none was measured."""
    values = [v for k, v in sums.items() if classes is None or k in classes]
    return max(values) if values else None


def process_samples(clients_by_owner: dict[tuple[int, int], list[DrmClient]]) -> tuple[ProcessSample, ...]:
    """One sample per (process, device index) from its clients: device memory, compute and video usage."""
    samples = []
    for (pid, index), clients in sorted(clients_by_owner.items()):
        measured = all(c.engine_percent or not _has_counters(c) for c in clients)
        sums = class_sums(clients)
        compute = busiest(sums, COMPUTE_CLASSES) if measured else None
        video = busiest(sums, VIDEO_CLASSES) if measured else None
        samples.append(ProcessSample(
            pid=pid, device_index=index, gpu_memory_bytes=sum(device_memory_bytes(c) for c in clients),
            sm_percent=compute, decoder_percent=video,
            gpu_usage_note=None if measured else FIRST_READING_NOTE,
        ))
    return tuple(samples)


def _has_counters(client: DrmClient) -> bool:
    """True when the client's fdinfo carries engine counters (a reading then needs a previous one)."""
    return bool(client.stats.engine_ns or client.stats.cycles)
