"""Recordings made on a real NVIDIA H100 (driver 580.159.04), replayed through the real advice engine.

``tests/data/real-h100/README.md`` says how each was made. The advice is recomputed on replay (the
sampler replaces what was recorded), so these tests check today's rules against real data: the
input-bound run is named as such, the fed bf16 run is not, DataLoader workers sit under their
trainer, two processes share the GPU, and SM and tensor-core activity move when bf16 is switched on.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from gpusight.advice.engine import AdviceEngine
from gpusight.recordings.replay import ReplaySource
from gpusight.sampling.history import History
from gpusight.sampling.sampler import Sampler
from gpusight.snapshot.model import ProcessRole, Snapshot

DATA = Path(__file__).parent / "data" / "real-h100"
"""Folder of the real-hardware recordings."""

INPUT_RULES = ("input_bound:", "few_workers:")
"""Advice ids that name an input-pipeline problem."""

RECORDED_TRAINER = "gputop.examples.convnet"
"""The trainer's module in the recordings' command lines (they were made before the rename to gpusight)."""

RECORDED_SERVER = "gputop.examples.serve"
"""The inference server's module in the recordings' command lines."""

SETTLED_S = 45.0
"""Seconds into a run after which its job has warmed up and a 30 s advice window is full."""

TEARDOWN_S = 3.0
"""The last seconds of a recording, when the jobs were being stopped before the recorder."""


def replay(name: str) -> list[Snapshot]:
    """Every snapshot of the recording, as the sampler hands it out with fresh advice."""
    source = ReplaySource(DATA / name)
    sampler = Sampler(source, history=History(), advisor=AdviceEngine())
    snapshots = []
    while not source.finished:
        snapshots.append(sampler.poll_once())
    sampler.stop()
    return snapshots


def settled(snapshots: list[Snapshot]) -> list[Snapshot]:
    """The snapshots from ``SETTLED_S`` into the recording until ``TEARDOWN_S`` before its end."""
    start, end = snapshots[0].timestamp, snapshots[-1].timestamp
    return [s for s in snapshots if s.timestamp - start >= SETTLED_S and end - s.timestamp > TEARDOWN_S]


def trainer_of(snapshot: Snapshot, module: str) -> int | None:
    """PID of the GPU process whose command line runs ``module``, if present."""
    return next((p.pid for p in snapshot.processes if p.role == ProcessRole.GPU and module in (p.cmdline or "")), None)


def input_advice(snapshot: Snapshot) -> list[str]:
    """Ids of the advice that names an input-pipeline problem."""
    return [a.id for a in snapshot.advice if a.id.startswith(INPUT_RULES)]


@pytest.mark.parametrize("name", ["input-bound.jsonl.gz", "fed-bf16.jsonl.gz", "two-processes.jsonl.gz",
                                  "fields/precision.jsonl.gz"])
def test_real_recordings_replay_whole_without_errors(name):
    snapshots = replay(name)

    assert len(snapshots) > 150  # 0.5 s polls over more than 75 s
    assert all(s.errors == () for s in snapshots)
    assert {d.name for s in snapshots for d in s.devices} == {"NVIDIA H100 80GB HBM3"}


def test_the_input_bound_run_is_named_input_bound_with_its_worker_under_the_trainer():
    snapshots = settled(replay("input-bound.jsonl.gz"))

    assert snapshots and all(input_advice(s) for s in snapshots)
    last = snapshots[-1]
    trainer = trainer_of(last, RECORDED_TRAINER)
    [advice] = [a for a in last.advice if a.id.startswith(INPUT_RULES)]
    assert str(trainer) in advice.scope + advice.title
    assert "waits" in advice.evidence and "for data" in advice.evidence  # the measured input wait
    assert "num_workers" in advice.action
    [worker] = [p for p in last.processes if p.role == ProcessRole.DATALOADER_WORKER]
    assert worker.trainer_pid == trainer and worker.name == "pt_data_worker"
    assert statistics.fmean(s.devices[0].utilization_gpu_percent or 0.0 for s in snapshots) < 50


def test_the_fed_bf16_run_has_no_input_advice_and_all_its_workers_under_the_trainer():
    snapshots = replay("fed-bf16.jsonl.gz")
    steady = settled(snapshots)

    assert not any(input_advice(s) for s in snapshots)
    last = steady[-1]
    trainer = trainer_of(last, RECORDED_TRAINER)
    workers = [p for p in last.processes if p.role == ProcessRole.DATALOADER_WORKER]
    assert len(workers) == 14 and {w.trainer_pid for w in workers} == {trainer}
    [row] = [p for p in last.processes if p.pid == trainer]
    assert row.autocast is True and row.input_wait_percent is not None and row.input_wait_percent < 30
    assert statistics.fmean(s.devices[0].utilization_gpu_percent or 0.0 for s in steady) > 90


def test_two_processes_share_the_gpu_and_only_the_trainer_has_workers():
    snapshots = settled(replay("two-processes.jsonl.gz"))

    for snapshot in snapshots:
        trainer = trainer_of(snapshot, RECORDED_TRAINER)
        server = trainer_of(snapshot, RECORDED_SERVER)
        assert trainer is not None and server is not None
        assert {p.trainer_pid for p in snapshot.processes if p.role == ProcessRole.DATALOADER_WORKER} == {trainer}
    assert not any(input_advice(s) for s in snapshots)


def test_sm_and_tensor_activity_move_when_bf16_is_switched_on():
    snapshots = replay("fields/precision.jsonl.gz")
    autocast = [(s, next((p.autocast for p in s.processes if p.role == ProcessRole.GPU), None)) for s in snapshots]
    fp32 = [s.devices[0] for s, on in autocast if on is False and s.devices[0].sm_active_percent]
    bf16 = [s.devices[0] for s, on in autocast if on is True and s.devices[0].sm_active_percent]

    assert len(fp32) > 40 and len(bf16) > 40
    fp32_tensor = statistics.median(d.tensor_active_percent or 0.0 for d in fp32)
    bf16_tensor = statistics.median(d.tensor_active_percent or 0.0 for d in bf16)
    assert fp32_tensor < 2 < 20 < bf16_tensor  # TF32 off: no tensor cores; bf16 autocast: tensor cores busy
    assert statistics.median(d.sm_active_percent or 0.0 for d in fp32) > statistics.median(
        d.sm_active_percent or 0.0 for d in bf16)  # the same model keeps the SMs busy for less of the time
    advice_in_fp32 = {a.id for s, on in autocast if on is False for a in s.advice}
    advice_at_end = {a.id for a in snapshots[-1].advice}
    assert "mixed_precision:gpu0" in advice_in_fp32 and "mixed_precision:gpu0" not in advice_at_end
