"""Advice judged by speed (table-driven): the bounded gain of input, communication and stall verdicts, the measured
communication share over the link-traffic guess, low MFU/HFU with its compute actions, the MFU floor of "healthy",
and the stuck job.

Trainers publish what ``gpusight.torch`` measures (throughput, FLOPs, MFU/HFU, the profiled step-time breakdown)
as ProcessSample fields; every scenario moves and runs through a real History and AdviceEngine.
"""

from __future__ import annotations

import re

import pytest

from gpusight.advice.speed import speedup_bound
from gpusight.snapshot.model import BreakdownSource, FlopsSource, MathMode
from support.advice_frames import Case, check, gpu, job, noise, run, snapshot, square, steady, trainer, wave, workers

GIB = 2**30
H100 = "NVIDIA H100 80GB HBM3"
RANKS = 4
PIDS = tuple(4100 + rank for rank in range(RANKS))
DDP_JOB = job(1, PIDS, tuple(range(RANKS)), world_size=RANKS, launcher_pid=4000)


def breakdown(data=2.0, compute=80.0, comm=3.0, copy=1.0, source=BreakdownSource.DEVICE) -> dict:
    """Step-time breakdown fields of a profiled trainer; idle makes up the rest to 100 %."""
    idle = 100.0 - data - compute - comm - copy
    assert idle >= 0.0, "the parts of a step sum to 100 %"
    return dict(step_data_percent=data, step_compute_percent=compute, step_comm_percent=comm,
                step_copy_percent=copy, step_idle_percent=idle, breakdown_source=source)


def speed(achieved=30.0, peak=989.5, source=FlopsSource.ESTIMATE_6N, mode=MathMode.BF16, tokens=24_000.0,
          steps=3.0, **fields) -> dict:
    """Speed fields of a trainer that reports its FLOP/s against ``peak``."""
    return dict(steps_per_second=steps, samples_per_second=steps * 8, tokens_per_second=tokens, flops_source=source,
                achieved_tflops=achieved, peak_tflops=peak, math_mode=mode,
                flops_utilization_percent=100.0 * achieved / peak, **fields)


def one_rank(util=lambda t: noise(t, 96.0, 99.0), device_fields=None, **trainer_fields):
    """One trainer on an H100 (job 1 of one rank), its 4 workers comfortably below a core."""

    def frame(t):
        device = gpu(util=util(t), used=60.0, name=H100, compute_capability=(9, 0), **(device_fields or {}))
        processes = [trainer(cpu=noise(t, 60.0, 80.0), mem=60.0, **trainer_fields), *workers(cpus=(30, 35, 28, 31))]
        return snapshot(t, [device], processes, jobs=[job(1, (100,), (0,), evidence="lone process")])

    return frame


def ddp(util=lambda t, rank: noise(t, 95.0, 99.0, rank), device_fields=lambda t, rank: {},
        trainer_fields=lambda rank: {}):
    """A 4-rank torchrun job, one rank per GPU; every reading a function of time."""

    def frame(t):
        devices = [gpu(rank, util=util(t, rank), used=70.0, name=H100, compute_capability=(9, 0),
                       **device_fields(t, rank)) for rank in range(RANKS)]
        processes = [trainer(pid=pid, device=rank, ppid=4000, rank=rank, cpu=noise(t, 60, 80, pid), mem=70.0,
                             workers=0, **trainer_fields(rank)) for rank, pid in enumerate(PIDS)]
        return snapshot(t, devices, processes, jobs=[DDP_JOB])

    return frame


def link_guess(t, rank):
    """What the guess from link traffic calls communication-bound: few SMs busy and heavy NVLink both ways."""
    return dict(sm_active_percent=wave(t, 20.0, 30.0, 5.0, rank / 4), tensor_active_percent=5.0,
                nvlink_tx_bytes_per_s=noise(t, 5.5e10, 6.5e10, ("tx", rank)),
                nvlink_rx_bytes_per_s=noise(t, 5.5e10, 6.5e10, ("rx", rank)))


def hung(t, rank, power=lambda t: noise(t, 70.0, 80.0), **overrides):
    """A GPU spinning in a collective that waits for a dead rank: busy by NVML, idle power, ~1 % SMs, no traffic."""
    fields = dict(power_watts=power(t), power_limit_watts=700.0, sm_active_percent=noise(t, 0.5, 1.5, rank),
                  tensor_active_percent=0.0, pcie_rx_bytes_per_s=noise(t, 1e5, 1e6, rank),
                  pcie_tx_bytes_per_s=noise(t, 1e5, 1e6, ("tx", rank)), nvlink_rx_bytes_per_s=0.0,
                  nvlink_tx_bytes_per_s=0.0)
    fields.update(overrides)
    return fields


STALLED = dict(steps_per_second=0.0, input_wait_percent=0.0)
"""What the hook reports from a rank that makes no steps."""

CASES = [
    # bounded gains
    Case("measured input wait states its bound",
         steady([gpu(util=23.0)], [trainer(cpu=35.0, input_wait_percent=38.0), *workers(cpus=(40, 45, 42, 38))]),
         "input_bound:gpu0", True, "warn",
         ("waits 38 % of each step for data (measured by gpusight.torch): up to 1.6x steps/s without it",)),
    Case("few workers with a measured wait states its bound",
         steady([gpu(util=30.0)], [trainer(cpu=100.0, workers=0, input_wait_percent=63.0)]),
         "few_workers:pid100", True, "warn", ("waits 63 % of each step", "up to 2.7x steps/s without it")),
    Case("periodic stalls state their bound",
         lambda t: snapshot(t, [gpu(util=noise(t, 95, 99) if square(t, 4.0, 0.6) else noise(t, 0, 3))],
                            [trainer(cpu=40.0), *workers(cpus=(5, 4, 6, 5))]),
         "periodic_stall:gpu0", True, "warn", ("stalls every 4.0 s", "steps/s without the stalls"), seconds=75.0),
    Case("heavy H2D copies state their profiled share",
         steady([gpu(util=35.0, pcie_rx_bytes_per_s=6e9)],
                [trainer(cpu=40.0, **breakdown(data=5.0, compute=50.0, comm=0.0, copy=25.0)),
                 *workers(cpus=(20, 22, 18, 25))]),
         "pcie_h2d:gpu0", True, "warn",
         ("copies not overlapped take 25 % of each step (torch.profiler): up to 1.3x steps/s without them",)),
    Case("the training code's gaps state their profiled share",
         steady([gpu(util=31.0)], [trainer(cpu=40.0, input_wait_percent=4.0, **breakdown(data=4.0, compute=40.0,
                                                                                         comm=0.0, copy=1.0)),
                                   *workers(cpus=(20, 22, 18, 25))]),
         "gpu_underused:gpu0", True, "warn",
         ("the step is idle 55 % of its time (torch.profiler: no kernel, copy or collective): "
          "up to 2.2x steps/s without the gaps",)),
    # communication measured by the profiler replaces the guess from NVLink traffic
    Case("measured communication share of 40 %",
         ddp(trainer_fields=lambda rank: breakdown(data=2.0, compute=50.0, comm=40.0 + rank % 2, copy=1.0)),
         "comm_bound:job1", True, "warn",
         ("exposed communication takes 40 % of each step (measured on 4 of 4 ranks): up to 1.7x steps/s without it",
          "communication 40 %", "torch.profiler, GPU activities", "job 1: 4 processes on 4 GPUs"),
         absent=("healthy:",), action=("no_sync",)),
    Case("measured communication share, no CUDA: what the host sees",
         ddp(trainer_fields=lambda rank: breakdown(compute=60.0, comm=30.0, source=BreakdownSource.HOST)),
         "comm_bound:job1", True, "warn", ("takes 30 % of each step", "as the host sees it, no CUDA")),
    Case("a small measured share overrules what the link traffic suggests",
         ddp(device_fields=link_guess, trainer_fields=lambda rank: breakdown(comm=6.0)),
         "comm_bound:job1", False),
    Case("the link-traffic guess without a measurement still fires",
         ddp(device_fields=link_guess), "comm_bound:job1", True, "warn", ("SMs active", "NVLink")),
    Case("measured communication below the data wait is not communication-bound",
         ddp(util=lambda t, rank: noise(t, 30.0, 40.0, rank),
             trainer_fields=lambda rank: breakdown(data=45.0, compute=20.0, comm=30.0, copy=1.0)),
         "comm_bound:job1", False),
    # low MFU / HFU with compute actions
    Case("100 % utilization and 3 % MFU: compute actions ranked by the evidence",
         one_rank(**speed(achieved=30.0), **breakdown(data=2.0, compute=60.0, comm=0.0, copy=1.0),
                  cuda_peak_bytes=12 * GIB),
         "low_mfu:job1", True, "warn",
         ("reaches 3 % MFU", "30.0 of 989.5 TFLOP/s peak", "below the 30 % expected of a token model",
          "24000 tokens/s", "data wait 2 % and exposed communication 0 % of each step", "job 1: 1 process on 1 GPU;"),
         absent=("healthy:",),
         action=("torch.compile", "the step is idle 37 % of its time", "peak CUDA memory 12.0 GiB of 80.0 GiB (15 %)",
                 "scaled_dot_product_attention", "fused=True"),
         not_in_action=("train in bf16",)),
    Case("counted FLOPs name it HFU",
         one_rank(**speed(achieved=40.0, source=FlopsSource.COUNTED)), "low_mfu:job1", True, "warn",
         ("reaches 4 % HFU", "HFU 4 %")),
    Case("FP32 math gets bf16 first, with the peaks",
         one_rank(**speed(achieved=6.0, peak=67.0, mode=MathMode.FP32, tokens=None)), "low_mfu:job1", True, "warn",
         ("MFU 9 %", "below the 10 % expected of a model without tokens", "24 samples/s"),
         action=("train in bf16: torch.autocast('cuda', dtype=torch.bfloat16); the matmuls run in fp32, whose peak on "
                 "NVIDIA H100 80GB HBM3 is 67 TFLOP/s against 990 in bf16",),
         not_in_action=("scaled_dot_product_attention",)),
    Case("a thermally throttled GPU: the clocks come first, and 29.7 % does not read as the 30 % floor",
         one_rank(device_fields=dict(throttle_reasons=("hw_thermal",)), **speed(achieved=293.9)),
         "low_mfu:job1", True, "warn", ("reaches 29.7 % MFU", "MFU 29.7 % (293.9 of 989.5"),
         action=("fix the clocks first: GPU 0 (hw_thermal) throttled",)),
    Case("MFU at the token models' floor is healthy", one_rank(**speed(achieved=450.0)), "low_mfu:job1", False,
         absent=("low_mfu:",)),
    Case("low MFU while the loop waits for data is the input's problem, not the compute's",
         one_rank(**speed(achieved=30.0), input_wait_percent=38.0), "low_mfu:job1", False),
    Case("low MFU with a large exposed communication share is the communication's problem",
         ddp(trainer_fields=lambda rank: {**speed(achieved=30.0), **breakdown(compute=55.0, comm=35.0)}), "low_mfu:job1", False,
         absent=("healthy:",)),
    Case("a convnet at 15 % MFU is above its floor",
         one_rank(**speed(achieved=150.0, tokens=None)), "low_mfu:job1", False),
    # healthy needs the MFU
    Case("busy with MFU above the floor is healthy and says so", one_rank(**speed(achieved=450.0)),
         "healthy:gpu0", True, "info", ("MFU 45 % (at least 30 % for a token model)",)),
    Case("busy with low MFU is not healthy", one_rank(**speed(achieved=100.0)), "healthy:gpu0", False),
    # the stuck job
    Case("every rank busy at idle power, 1 % SMs, no traffic, no steps",
         ddp(device_fields=hung, trainer_fields=lambda rank: STALLED),
         "stuck:job1", True, "critical",
         ("4 ranks at 9", "power 7", "of the limit, near idle", "SMs active 1 % (GPM)", "0 steps/s (gpusight.torch)",
          "job 1: 4 processes on 4 GPUs"),
         absent=("healthy:", "launch_bound:", "comm_bound:", "straggler:"),
         action=("py-spy dump --pid", "4100 4101 4102 4103", "TORCH_NCCL_ASYNC_ERROR_HANDLING=1", "NCCL_DEBUG=INFO",
                 "timeout")),
    Case("stuck without GPM or a hook: utilization, power and traffic tell",
         ddp(device_fields=lambda t, rank: hung(t, rank, sm_active_percent=None, tensor_active_percent=None)),
         "stuck:job1", True, "critical", ("near idle", "PCIe/NVLink traffic at most"), absent=("healthy:",)),
    Case("busy at full power is working, not stuck",
         ddp(device_fields=lambda t, rank: hung(t, rank, power=lambda t: noise(t, 450.0, 650.0)),
             trainer_fields=lambda rank: STALLED),
         "stuck:job1", False),
    Case("a rank that makes steps is not stuck", ddp(device_fields=hung, trainer_fields=lambda rank: {"steps_per_second": 2.0}),
         "stuck:job1", False),
    Case("NVLink traffic means the collectives move data", ddp(
        device_fields=lambda t, rank: hung(t, rank, nvlink_rx_bytes_per_s=3e10, nvlink_tx_bytes_per_s=3e10)),
         "stuck:job1", False),
    Case("one process at idle power without a hook: tiny kernels look the same, so not stuck",
         one_rank(device_fields=dict(power_watts=75.0, power_limit_watts=700.0, pcie_rx_bytes_per_s=1e5)),
         "stuck:job1", False),
    Case("one process whose hook counts no steps is stuck",
         one_rank(device_fields=dict(power_watts=75.0, power_limit_watts=700.0, pcie_rx_bytes_per_s=1e5), **STALLED),
         "stuck:job1", True, "critical", ("1 rank at 9", "0 steps/s (gpusight.torch)", "job 1: 1 process on 1 GPU")),
    Case("power unknown: silent", ddp(device_fields=lambda t, rank: hung(t, rank, power_watts=None)), "stuck:job1", False),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c.advice_id}-{c.name}" for c in CASES])
def test_rule(case: Case) -> None:
    check(case)


@pytest.mark.parametrize(("share", "factor"), [(0.0, 1.0), (38.0, 1 / 0.62), (50.0, 2.0), (99.0, 100.0), (100.0, 100.0)])
def test_the_bound_is_one_over_one_minus_the_share_capped_at_100x(share, factor):
    assert speedup_bound(share) == pytest.approx(factor)


def test_without_a_measured_share_no_gain_is_claimed():
    """Input-bound by the workers' CPU alone, stalls aside: no wait was measured, so no bound is stated."""
    guessed = {a.id: a for a in run(steady([gpu(util=23.0)], [trainer(cpu=35.0, workers=4), *workers()]), 60)}
    advice = guessed["input_bound:gpu0"]
    assert "steps/s without" not in advice.evidence + advice.title + advice.action
    link = {a.id: a for a in run(ddp(device_fields=link_guess), 60)}["comm_bound:job1"]
    assert "steps/s without" not in link.evidence + link.title + link.action


def test_low_mfu_actions_come_in_the_order_of_their_evidence():
    """FP32 math first (its peak is 15x lower), then torch.compile where the step idles, then the larger batch,
    then SDPA for a token model; the fused optimizer, with no reading behind it, last."""
    frame = one_rank(**speed(achieved=6.0, peak=67.0, mode=MathMode.FP32),
                     **breakdown(data=2.0, compute=60.0, comm=0.0, copy=1.0), cuda_peak_bytes=12 * GIB)
    action = {a.id: a for a in run(frame, 60)}["low_mfu:job1"].action
    order = ["train in bf16", "torch.compile", "a larger batch", "scaled_dot_product_attention", "fused=True"]
    positions = [action.index(text) for text in order]
    assert positions == sorted(positions), action


def test_without_evidence_compile_follows_the_evidenced_actions():
    """No idle share and no GPM: torch.compile has no reading behind it and goes after SDPA."""
    action = {a.id: a for a in run(one_rank(**speed(achieved=30.0)), 60)}["low_mfu:job1"].action
    assert action.index("scaled_dot_product_attention") < action.index("torch.compile") < action.index("fused=True")
    assert "a larger batch" not in action  # no CUDA memory reported: memory may not allow it


def test_a_stuck_job_clears_once_steps_resume():
    """Hysteresis like every rule: it shows after its hold and clears once the ranks make steps again."""

    def frame(t):
        resumed = t >= 60.0
        return ddp(device_fields=lambda t, rank: hung(t, rank) if not resumed else dict(
                       power_watts=noise(t, 500.0, 650.0, rank), power_limit_watts=700.0,
                       sm_active_percent=noise(t, 70.0, 80.0, rank)),
                   trainer_fields=lambda rank: {"steps_per_second": 2.0} if resumed else STALLED)(t)

    assert "stuck:job1" in {a.id for a in run(frame, 55)}
    assert "stuck:job1" not in {a.id for a in run(frame, 110)}


def test_evidence_quotes_hostile_device_names_escaped():
    hostile = "NVIDIA H100 \x1b[31mPWNED"
    frame = lambda t: snapshot(  # noqa: E731
        t, [gpu(util=97.0, name=hostile, compute_capability=(9, 0))],
        [trainer(**speed(achieved=6.0, peak=67.0, mode=MathMode.FP32))], jobs=[job(1, (100,), (0,))])
    advice = {a.id: a for a in run(frame, 60)}["low_mfu:job1"]
    assert "\x1b" not in advice.action and re.search(r"on NVIDIA H100 .*PWNED is 67 TFLOP/s", advice.action)
