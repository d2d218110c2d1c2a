"""Advice scoped to MIG instances: an idle instance holding memory, a free instance, an input-bound job on its slice;
and the GPU-scoped rules stay quiet on a MIG parent, whose utilization is no one job's (table-driven, through a real
History and AdviceEngine)."""

from __future__ import annotations

import dataclasses

import pytest

from gpusight.snapshot.model import MigDeviceSample, ProcessSample, Snapshot
from support.advice_frames import GIB, Case, check, gpu, host, run, snapshot, trainer, workers

PROFILES = {1: ("3g.40gb", 40.0), 5: ("2g.20gb", 20.0), 13: ("1g.10gb", 10.0)}
"""GPU instance id -> (profile, memory in GiB) of the three instances on GPU 0."""


def instance(gi: int, used: float = 0.0, active: float | None = None, device: int = 0, **fields) -> MigDeviceSample:
    """MIG device ``gi`` of GPU ``device`` with ``used`` GiB in use and GPM SM activity ``active``."""
    profile, total = PROFILES[gi]
    return MigDeviceSample(device_index=device, mig_index=sorted(PROFILES).index(gi), gpu_instance_id=gi,
                           compute_instance_id=0, profile=profile, uuid=f"MIG-aaaa-{gi}",
                           memory_used_bytes=int(used * GIB), memory_total_bytes=int(total * GIB),
                           sm_active_percent=active, **fields)


def parent(util: float | None = None, used: float = 70.0) -> object:
    """GPU 0 in MIG mode; NVML gives no utilization for it (None) unless ``util`` says otherwise."""
    return gpu(0, util=util, used=used, mig_mode=True)


def on(gi: int, process: ProcessSample) -> ProcessSample:
    """``process`` placed on GPU instance ``gi``."""
    return dataclasses.replace(process, gpu_instance_id=gi, compute_instance_id=0)


def mig_frame(migs, processes, util: float | None = None, used: float = 70.0, host_sample=None):
    """The same MIG readings at every poll."""
    def frame(t: float) -> Snapshot:
        snap = snapshot(t, [parent(util, used)], processes, host_sample)
        return dataclasses.replace(snap, mig_devices=tuple(migs))
    return frame


BUSY = on(1, trainer(pid=100, mem=30.0, workers=4))
IDLE = on(5, trainer(pid=200, mem=8.0, workers=0, cpu=0.5, user="bob", cmdline="jupyter kernel"))
THREE = [instance(1, 30.0, 85.0), instance(5, 8.0, 0.0), instance(13, 0.0, 0.0)]
STARVED = [on(1, trainer(pid=100, mem=30.0, cpu=35.0, workers=4, input_wait_percent=60.0)), *workers()]

CASES = [
    Case("idle instance holding memory", mig_frame(THREE, [BUSY, IDLE]), "mig_idle_holding:mig0.5", True, "warn",
         ("MIG 0.5 (2g.20gb)", "PID 200 (bob)", "8.0 GiB", "0 % active"), seconds=130.0, action=("kill 200",)),
    Case("idle instance, not for long enough", mig_frame(THREE, [BUSY, IDLE]), "mig_idle_holding:mig0.5", False,
         seconds=60.0),
    Case("idle instance whose activity is N/A: silent, never guessed",
         mig_frame([instance(1, 30.0), instance(5, 8.0), instance(13)], [BUSY, IDLE]), "mig_idle_holding:mig0.5", False,
         seconds=130.0),
    Case("busy instance is not idle", mig_frame(THREE, [BUSY, IDLE]), "mig_idle_holding:mig0.1", False, seconds=130.0),
    Case("free instance", mig_frame(THREE, [BUSY, IDLE]), "mig_free:mig0.13", True, "info",
         ("MIG 0.13 (1g.10gb)", "no processes"), seconds=40.0, action=("CUDA_VISIBLE_DEVICES=MIG-aaaa-13",)),
    Case("instance with a process is not free", mig_frame(THREE, [BUSY, IDLE]), "mig_free:mig0.5", False, seconds=40.0),
    Case("input-bound job on its slice", mig_frame([instance(1, 30.0, 12.0), *THREE[1:]], STARVED),
         "input_bound:mig0.1", True, "warn", ("MIG 0.1 (3g.40gb)", "waits 60 % of each step", "SMs active 12 % (GPM)"),
         absent=("input_bound:gpu0",)),
    Case("input-bound on a slice whose activity is N/A: the measured wait decides",
         mig_frame([instance(1, 30.0), *THREE[1:]], STARVED), "input_bound:mig0.1", True, "warn",
         ("MIG 0.1 (3g.40gb) activity N/A",)),
    Case("slice busy: not input-bound", mig_frame(THREE, STARVED), "input_bound:mig0.1", False),
    Case("slice activity N/A and only CPU-busy workers: no guess",
         mig_frame([instance(1, 30.0), *THREE[1:]], [on(1, trainer(pid=100, cpu=35.0, workers=4)), *workers()]),
         "input_bound:mig0.1", False),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_mig_rule(case: Case) -> None:
    check(case)


GPU_SCOPED = ("idle_holding:", "free_capacity:", "gpu_underused:", "imbalance:", "straggler:", "oom_risk:",
              "input_bound:gpu", "batch_headroom:", "healthy:")


@pytest.mark.parametrize("util", [None, 0.0, 30.0], ids=["util N/A", "util 0", "util 30"])
def test_gpu_scoped_rules_stay_quiet_on_a_mig_parent(util: float | None) -> None:
    """Whatever the parent reads, the advice speaks of its instances, never of the parent as if it were one GPU:
    an idle instance is not an idle GPU, a full partitioning is not an out-of-memory risk."""
    trainers = [BUSY, IDLE, on(13, trainer(pid=300, mem=9.5, cpu=35.0, workers=4)), *workers(trainer_pid=300)]
    advice = {a.id: a for a in run(mig_frame(THREE, trainers, util=util, used=78.0, host_sample=host()), 130.0)}
    scoped = [i for i in advice if i.startswith(GPU_SCOPED) or i.endswith(":pid200")]
    assert not scoped, {i: advice[i].title for i in scoped}
    assert "mig_idle_holding:mig0.5" in advice


def test_instances_of_a_lost_parent_get_no_advice() -> None:
    def frame(t: float) -> Snapshot:
        lost = dataclasses.replace(parent(), lost=True)
        return dataclasses.replace(snapshot(t, [lost], [BUSY, IDLE]), mig_devices=tuple(THREE))
    assert not [a.id for a in run(frame, 130.0) if a.id.startswith("mig")]
