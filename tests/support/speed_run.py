"""A recorded training run whose ranks publish their speed, written through the real recording writer.

Each snapshot holds a data-parallel training job (one rank per GPU) whose ranks carry the training-speed fields of
``ProcessSample`` as gpusight.torch reports them, and an inference job with no speed. The figures are chosen so the
report's numbers can be worked out by hand: the job's steps/s is the slowest rank's, its samples, tokens and FLOP/s
are the ranks' sums, its MFU the summed achieved over the summed peak.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpusight.recordings.opening import open_recorder
from gpusight.snapshot.model import (
    BatchSizeSource,
    BreakdownSource,
    DeviceSample,
    FlopsSource,
    HostSample,
    JobSample,
    MathMode,
    ProcessSample,
    Snapshot,
    SourceKind,
    WorkloadKind,
)

T0 = 1_795_000_000.0
"""When the run starts."""

FIRST_TRAINER_PID = 100
"""Rank i of the training job has pid 100 + i and runs on GPU i."""

SERVER_PID = 1000
"""The inference job's one process (on the last GPU + 1)."""


@dataclass(frozen=True)
class SpeedPlan:
    """What the trainer's ranks report, every second for ``seconds``."""

    seconds: int = 120
    """Length of the run at 1 Hz."""
    ranks: int = 2
    """Ranks (GPUs) of the training job."""
    steps: float = 2.0
    """Steps per second of every rank but the last."""
    slowest: float = 1.9
    """Steps per second of the last rank (the job's pace)."""
    batch: int = 32
    """Samples per step per rank."""
    tokens_per_sample: int | None = 512
    """Tokens per sample, None when the batch holds no token ids."""
    flops_per_step: float = 1.5e14
    """FLOPs per step per rank."""
    flops_source: FlopsSource = FlopsSource.ESTIMATE_6N
    """Where the FLOPs came from."""
    peak_tflops: float | None = 989.5
    """Each rank's peak (None: unknown GPU, utilization N/A)."""
    breakdown: tuple[float, float, float, float, float] | None = (38.0, 50.0, 5.0, 2.0, 5.0)
    """Data, compute, communication, copy and idle percent of each rank's step; None when not measured."""
    gpu_name: str = "NVIDIA H100 80GB HBM3"
    """The GPUs' NVML name."""
    utilization: float = 100.0
    """NVML utilization of the trainer's GPUs."""


def rank_sample(plan: SpeedPlan, rank: int) -> ProcessSample:
    """What rank ``rank`` of the plan reports."""
    steps = plan.slowest if rank == plan.ranks - 1 else plan.steps
    samples = steps * plan.batch
    achieved = plan.flops_per_step * steps / 1e12
    parts = plan.breakdown
    return ProcessSample(
        pid=FIRST_TRAINER_PID + rank, device_index=rank, name="python", cmdline="python train.py --model gpt", user="ann",
        gpu_memory_bytes=40 * 2**30, create_time=T0 - 10, job=1, rank=rank, steps_per_second=steps,
        input_wait_percent=None if parts is None else parts[0],
        samples_per_second=samples,
        tokens_per_second=None if plan.tokens_per_sample is None else samples * plan.tokens_per_sample,
        batch_size_source=BatchSizeSource.BATCH, flops_per_step=plan.flops_per_step, flops_source=plan.flops_source,
        achieved_tflops=achieved, peak_tflops=plan.peak_tflops,
        peak_source=None if plan.peak_tflops is None else "NVIDIA H100 datasheet (SXM)", math_mode=MathMode.BF16,
        flops_utilization_percent=None if plan.peak_tflops is None else achieved / plan.peak_tflops * 100.0,
        flops_utilization_note="no peak known for this GPU" if plan.peak_tflops is None else None,
        step_data_percent=None if parts is None else parts[0],
        step_compute_percent=None if parts is None else parts[1],
        step_comm_percent=None if parts is None else parts[2],
        step_copy_percent=None if parts is None else parts[3],
        step_idle_percent=None if parts is None else parts[4],
        breakdown_source=None if parts is None else BreakdownSource.DEVICE,
    )


def speed_snapshot(plan: SpeedPlan, t: float) -> Snapshot:
    """The snapshot at ``t``: the training job's ranks and an inference server with no speed."""
    ranks = tuple(rank_sample(plan, r) for r in range(plan.ranks))
    server = ProcessSample(pid=SERVER_PID, device_index=plan.ranks, name="python", cmdline="python serve.py",
                           user="bob", gpu_memory_bytes=8 * 2**30, create_time=T0 - 20, job=2)
    devices = tuple(DeviceSample(index=i, name=plan.gpu_name, utilization_gpu_percent=plan.utilization if i < plan.ranks
                                 else 30.0, memory_used_bytes=40 * 2**30, memory_total_bytes=80 * 2**30,
                                 power_watts=500.0) for i in range(plan.ranks + 1))
    jobs = (
        JobSample(id=1, kind=WorkloadKind.TRAINING, evidence="torchrun ranks", pids=tuple(FIRST_TRAINER_PID + r for r in range(plan.ranks)),
                  devices=tuple(range(plan.ranks)), world_size=plan.ranks),
        JobSample(id=2, kind=WorkloadKind.INFERENCE, evidence="serve.py", pids=(SERVER_PID,), devices=(plan.ranks,)),
    )
    host = HostSample(hostname="node1", cpu_percent_per_core=(50.0, 50.0), iowait_percent=1.0,
                      memory_used_bytes=64 * 2**30, memory_total_bytes=256 * 2**30)
    return Snapshot(timestamp=t, source=SourceKind.NVML, host=host, devices=devices, processes=(*ranks, server),
                    jobs=jobs)


def record_speed_run(path: Path, plan: SpeedPlan = SpeedPlan(), start: float = T0) -> Path:
    """Write the plan's run to ``path`` with the real recording writer (its format told by the name)."""
    recorder = open_recorder(path)
    try:
        for i in range(plan.seconds):
            recorder.write(speed_snapshot(plan, start + i))
    finally:
        recorder.close()
    return path
