"""Job-level advice on moving data (table-driven): stragglers, communication-bound DDP and periodic stalls.

Jobs are built as the collector reports them (``Snapshot.jobs``, ``ProcessSample.rank``); every
scenario moves (waves, bursts, noise, square waves) and runs through a real History and AdviceEngine.
"""

from __future__ import annotations

import pytest

from gpusight.snapshot.model import WorkloadKind
from support.advice_frames import Case, check, gpu, host, job, noise, snapshot, square, trainer, wave, workers

RANKS = 8
SLOW = 5
LAUNCHER = 4000
PIDS = tuple(4100 + rank for rank in range(RANKS))
DDP_JOB = job(3, PIDS, tuple(range(RANKS)), world_size=RANKS, launcher_pid=LAUNCHER)
WIDE_HOST = host(cores=96, busy=30)


def ddp(
    util=lambda t, rank: noise(t, 94.0, 98.0, rank),
    worker_cpu=lambda t, rank: noise(t, 40.0, 55.0, ("w", rank)),
    jobs=(DDP_JOB,),
    host_sample=WIDE_HOST,
    device_fields=lambda t, rank: {},
    trainer_fields=lambda rank: {},
):
    """An 8-rank torchrun job, one rank per GPU, each with 4 DataLoader workers; every reading a function of time."""

    def frame(t):
        devices = [gpu(rank, util=util(t, rank), used=70.0, **device_fields(t, rank)) for rank in range(RANKS)]
        processes = []
        for rank, pid in enumerate(PIDS):
            processes.append(trainer(pid=pid, device=rank, ppid=LAUNCHER, rank=rank, cpu=noise(t, 60, 80, pid), mem=70.0, **trainer_fields(rank)))
            processes.extend(workers(pid, rank, tuple(worker_cpu(t, rank) + k for k in range(4))))
        return snapshot(t, devices, processes, host_sample, jobs)

    return frame


def straggler_util(t, rank):
    """Rank 5 at about 57 %, swinging with its input; the others at about 96 % (NCCL keeps them busy)."""
    return wave(t, 50.0, 64.0, 7.0) if rank == SLOW else noise(t, 94.0, 98.0, rank)


def slow_workers(t, rank):
    """Rank 5's workers flat out; the others' comfortably below a core."""
    return noise(t, 96.0, 97.0, rank) if rank == SLOW else noise(t, 40.0, 55.0, rank)


NOT_PER_GPU = ("imbalance:", "gpu_underused:", "input_bound:", "batch_headroom:", "healthy:gpu5")

STRAGGLERS = [
    Case(
        "8-rank DDP, rank 5's input is slower: its workers saturated",
        ddp(util=straggler_util, worker_cpu=slow_workers),
        "straggler:job3",
        True,
        "warn",
        ("rank 5 (PID 4105) on GPU 5", "57 %", "7 peers", "DataLoader workers run at", "vs", "job 3: 8 processes on 8 GPUs"),
        absent=NOT_PER_GPU,
        action=("feed rank 5 (PID 4105) faster", "all-reduce"),
    ),
    Case(
        "8-rank DDP, rank 5 measured waiting for data (gpusight.torch)",
        ddp(util=straggler_util, trainer_fields=lambda rank: {"input_wait_percent": 41.0 if rank == SLOW else 2.0}),
        "straggler:job3",
        True,
        "warn",
        ("rank 5 (PID 4105)", "waits 41 % of each step for data vs 2 %"),
        absent=NOT_PER_GPU,
        action=("feed rank 5",),
    ),
    Case(
        "8-rank DDP, GPU 5 thermally throttled",
        ddp(
            util=straggler_util,
            device_fields=lambda t, rank: (
                {"throttle_reasons": ("hw_thermal",), "clock_sm_mhz": 1410} if rank == SLOW else {"clock_sm_mhz": 1980}
            ),
        ),
        "straggler:job3",
        True,
        "warn",
        ("GPU 5 clocks held down by hw_thermal", "SM clock 1410 MHz vs 1980 MHz"),
        action=("cooling",),
    ),
    Case(
        "8-rank DDP, nothing tells why: profile every rank",
        ddp(util=straggler_util),
        "straggler:job3",
        True,
        "warn",
        ("rank 5 (PID 4105)", "look like its peers'"),
        action=("torch.profiler", "DistributedSampler"),
    ),
    Case("balanced 8-rank DDP", ddp(), "straggler:job3", False, absent=("straggler:", "imbalance:", "comm_bound:")),
    Case(
        "every rank low: not a straggler",
        ddp(util=lambda t, rank: wave(t, 20.0, 40.0, 9.0, rank / RANKS) if rank == SLOW else noise(t, 45.0, 55.0, rank)),
        "straggler:job3",
        False,
    ),
    Case(
        "one user's sweep of eight single-GPU runs is eight jobs",
        ddp(util=straggler_util, worker_cpu=slow_workers, jobs=tuple(job(10 + r, (PIDS[r],), (r,), evidence="lone process") for r in range(RANKS))),
        "straggler:job3",
        False,
        absent=("straggler:", "imbalance:"),
    ),
    Case(
        "a multi-process inference server is no straggler",
        ddp(util=straggler_util, jobs=(job(3, PIDS, tuple(range(RANKS)), kind=WorkloadKind.INFERENCE, evidence="vllm"),)),
        "straggler:job3",
        False,
        absent=("straggler:", "imbalance:", "input_bound:"),
    ),
]


def comm_fields(nvlink=60e9, pcie=None, sm=lambda t, rank: noise(t, 22.0, 28.0, ("sm", rank))):
    """Device readings of a job busy communicating: low SM activity and traffic both ways."""

    def fields(t, rank):
        wobble = noise(t, 0.95, 1.05, ("link", rank))
        out = {"sm_active_percent": sm(t, rank), "compute_capability": (9, 0), "tensor_active_percent": 10.0}
        if nvlink is not None:
            out |= {"nvlink_tx_bytes_per_s": nvlink * wobble, "nvlink_rx_bytes_per_s": nvlink * wobble}
        if pcie is not None:
            out |= {"pcie_tx_bytes_per_s": pcie * wobble, "pcie_rx_bytes_per_s": pcie * wobble}
        return out

    return fields


COMM = [
    Case(
        "DDP all equal, few SMs, heavy NVLink both ways",
        ddp(device_fields=comm_fields()),
        "comm_bound:job3",
        True,
        "warn",
        ("8 ranks at", "SMs active", "NVLink", "sent and", "received", "job 3"),
        absent=("launch_bound:", "healthy:", "straggler:"),
        action=("no_sync", "bucket_cap_mb", "bf16_compress_hook", "nvidia-smi topo -m", "TensorBoard"),
    ),
    Case(
        "DDP without NVLink, all-reduce over PCIe",
        ddp(device_fields=comm_fields(nvlink=None, pcie=5e9)),
        "comm_bound:job3",
        True,
        "warn",
        ("PCIe",),
    ),
    Case(
        "measured input wait above the profiler's 5 % on a rank: not purely communication",
        ddp(device_fields=comm_fields(), trainer_fields=lambda rank: {"input_wait_percent": 8.0 if rank == 2 else 1.0}),
        "comm_bound:job3",
        False,
    ),
    Case(
        "measured input wait below 5 % is quoted",
        ddp(device_fields=comm_fields(), trainer_fields=lambda rank: {"input_wait_percent": 2.0}),
        "comm_bound:job3",
        True,
        "warn",
        ("measured input wait at most 2 %",),
    ),
    Case("SMs busy: computing, not communicating", ddp(device_fields=comm_fields(sm=lambda t, rank: noise(t, 75.0, 85.0, rank))), "comm_bound:job3", False),
    Case("no link traffic", ddp(device_fields=comm_fields(nvlink=1e9)), "comm_bound:job3", False),
    Case(
        "ranks unequal",
        ddp(util=lambda t, rank: 80.0 if rank == 0 else noise(t, 94.0, 98.0, rank), device_fields=comm_fields()),
        "comm_bound:job3",
        False,
    ),
]


def stall_frame(
    worker_cpu=(99.0, 40.0),
    iowait=(1.0, 1.0),
    trainer_cpu=(60.0, 60.0),
    count=4,
    period=8.0,
    kind=WorkloadKind.TRAINING,
    used=10.0,
    **trainer_fields,
):
    """A GPU busy (about 97 %) then stalled (0 %) for half of every ``period`` s; CPU and iowait given as
    (during stalls, between) pairs, with noise."""

    def frame(t):
        busy = square(t, period)
        pick = 1 if busy else 0
        util = noise(t, 95.0, 100.0) if busy else 0.0
        proc = trainer(cpu=trainer_cpu[pick] + noise(t, -2, 2, "tc"), workers=count, mem=used, **trainer_fields)
        feed = workers(cpus=tuple(max(0.0, worker_cpu[pick] + noise(t, -2, 1, k)) for k in range(count)))
        sample = host(iowait=iowait[pick] + noise(t, 0, 1, "io"))
        return snapshot(t, [gpu(util=util, used=used)], [proc, *feed], sample, [job(1, (100,), (0,), kind=kind, evidence="lone")])

    return frame


STALLED_OUT = ("input_bound:", "healthy:", "gpu_underused:", "batch_headroom:", "storage_bound:")

STALLS = [
    Case(
        "square wave, workers flat out during the stalls",
        stall_frame(worker_cpu=(99.0, 40.0)),
        "periodic_stall:gpu0",
        True,
        "warn",
        ("stalls every 8.0 s for 4.0 s", "50 %", "DataLoader workers", "CPU in total (4 workers)"),
        seconds=90.0,
        absent=STALLED_OUT,
        action=("more workers", "prefetch_factor"),
    ),
    Case(
        "square wave, workers asleep and iowait up during the stalls",
        stall_frame(worker_cpu=(3.0, 60.0), iowait=(30.0, 2.0)),
        "periodic_stall:gpu0",
        True,
        "warn",
        ("host iowait",),
        seconds=90.0,
        absent=STALLED_OUT,
        action=("local NVMe",),
    ),
    Case(
        "square wave, workers asleep, no iowait: respawned workers or rank-0 work",
        stall_frame(worker_cpu=(3.0, 60.0)),
        "periodic_stall:gpu0",
        True,
        "warn",
        ("trainer",),
        seconds=90.0,
        action=("persistent_workers=True", "evaluation, checkpointing"),
    ),
    Case(
        "workers asleep with persistent_workers already set: only the periodic work is left",
        stall_frame(worker_cpu=(3.0, 60.0), loader_persistent_workers=True),
        "periodic_stall:gpu0",
        True,
        "warn",
        seconds=90.0,
        action=("persistent_workers=True is set", "checkpointing"),
        not_in_action=("DataLoader(persistent_workers=True)",),
    ),
    Case(
        "num_workers=0: the main process loads during the stalls",
        stall_frame(worker_cpu=(0.0, 0.0), count=0, trainer_cpu=(100.0, 30.0)),
        "periodic_stall:gpu0",
        True,
        "warn",
        ("trainer 100 % vs 30 % CPU",),
        seconds=90.0,
        action=("num_workers>=1",),
    ),
    Case("stalls too rare (every 40 s)", stall_frame(period=40.0), "periodic_stall:gpu0", False, seconds=90.0),
    Case("a square-wave inference server is not stalling", stall_frame(kind=WorkloadKind.INFERENCE), "periodic_stall:gpu0", False, seconds=90.0),
]


def irregular(t):
    """Dips of random length at random times: bursts, not a square wave."""
    util = 0.0 if noise(t // 1.0, 0.0, 1.0, "dip") < 0.3 else noise(t, 60.0, 100.0)
    return snapshot(t, [gpu(util=util)], [trainer(), *workers(cpus=(50, 50, 50, 50))])


def step_gaps(t):
    """Half-second gaps at every step boundary of a 2 s step: ordinary, not a stall."""
    util = 0.0 if (t % 2.0) < 0.5 else 97.0
    return snapshot(t, [gpu(util=util)], [trainer(), *workers(cpus=(50, 50, 50, 50))])


STALLS += [
    Case("irregular dips", irregular, "periodic_stall:gpu0", False, seconds=90.0),
    Case("sub-second gaps at step boundaries", step_gaps, "periodic_stall:gpu0", False, seconds=90.0),
]

CASES = STRAGGLERS + COMM + STALLS


@pytest.mark.parametrize("case", CASES, ids=[f"{c.advice_id}-{c.name}" for c in CASES])
def test_job_rule(case: Case) -> None:
    check(case)
