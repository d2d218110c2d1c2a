"""A MIG-partitioned GPU for the fake NVML: an H100 cut into 3g.40gb, 2g.20gb and 1g.10gb, each with its processes.

Reusable by any end-to-end test (screen, exporter, ``--check``): ``mig3_gpu(pids)`` gives the ``FakeGpu`` and
``mig3_scenario(pids)`` a whole machine; the expected figures are the constants below. With ``gpm=True`` the
parent supports GPM (Hopper) and each instance reports its own SM/tensor/DRAM activity; with an Ampere name
and ``gpm=False`` no activity figure exists per instance.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from support.fake_nvml import FakeGpu, FakeMig, FakeScenario

GIB = 1 << 30
MIB = 1 << 20

H100_NAME = "NVIDIA H100 80GB HBM3"
"""The parent's name."""

SM_ACTIVE, SM_OCCUPANCY, ANY_TENSOR, DRAM_BANDWIDTH = 2, 3, 5, 10
"""GPM metric ids (NVML_GPM_METRIC_*), written here so the tests do not trust the code under test."""


@dataclass(frozen=True)
class MigSpec:
    """One instance of the three: what the fake is told and what a reader should find."""

    mig_index: int
    gpu_instance_id: int
    profile: str
    uuid: str
    memory_total_bytes: int
    memory_used_bytes: int
    sm_count: int
    slices: tuple[int, int, int]
    process_memory_bytes: int
    gpm: dict[int, float]


MIG3 = (
    MigSpec(0, 2, "3g.40gb", "MIG-2c1e5a70-8d3b-5f0e-9a41-0c7d2b6e4f02", 40192 * MIB, 14 * GIB, 60, (3, 3, 40192),
            12 * GIB, {SM_ACTIVE: 71.5, SM_OCCUPANCY: 40.25, ANY_TENSOR: 55.0, DRAM_BANDWIDTH: 33.5}),
    MigSpec(1, 3, "2g.20gb", "MIG-3d2f6b81-9e4c-5a1f-8b52-1d8e3c7f5a03", 20096 * MIB, 7 * GIB, 32, (2, 2, 20096),
            6 * GIB, {SM_ACTIVE: 12.0, SM_OCCUPANCY: 8.0, ANY_TENSOR: 0.5, DRAM_BANDWIDTH: 4.0}),
    MigSpec(2, 9, "1g.10gb", "MIG-9a0b7c92-af5d-5b2a-9c63-2e9f4d8a6b09", 9856 * MIB, 3 * GIB, 16, (1, 1, 9856),
            3 * GIB, {SM_ACTIVE: 98.0, SM_OCCUPANCY: 60.0, ANY_TENSOR: 90.0, DRAM_BANDWIDTH: 70.0}),
)
"""The three instances, by MIG index."""


def mig3_gpu(pids: Sequence[int], *, gpm: bool = True, name: str = H100_NAME, **gpu: object) -> FakeGpu:
    """The MIG-enabled GPU; ``pids[i]`` runs in instance ``i`` (three pids). ``gpu`` overrides ``FakeGpu`` fields."""
    migs = {
        spec.mig_index: FakeMig(
            gpu_instance_id=spec.gpu_instance_id, compute_instance_id=0, uuid=spec.uuid,
            name=f"{name} MIG {spec.profile}", mem_total=spec.memory_total_bytes, mem_used=spec.memory_used_bytes,
            sm_count=spec.sm_count, slices=spec.slices, compute_processes=[(pid, spec.process_memory_bytes)],
            gpm=dict(spec.gpm) if gpm else {},
        )
        for spec, pid in zip(MIG3, pids, strict=True)
    }
    fields: dict[str, object] = {
        "name": name, "uuid": "GPU-11111111-2222-3333-4444-555555555555", "mig_mode": 1, "util_gpu": 77,
        "mem_used": 24 * GIB, "gpm_supported": 1 if gpm else None, "mig_devices": migs,
        "compute_capability": (9, 0) if gpm else (8, 0),
    }
    fields.update(gpu)
    return FakeGpu(**fields)  # type: ignore[arg-type]


def mig3_scenario(pids: Sequence[int], **options: object) -> FakeScenario:
    """A machine whose one GPU is ``mig3_gpu(pids, **options)``."""
    return FakeScenario(gpus=[mig3_gpu(pids, **options)])  # type: ignore[arg-type]
