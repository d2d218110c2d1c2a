"""Advice by workload kind and the fixed trainer rules, on moving data (table-driven).

Inference servers get serving advice only, notebooks get trainer advice only when they train, and
the healthy cases of a real cluster (bf16 LLM training, balanced DDP, a loaded inference server, a
notebook beside another user's trainer) raise no warning. Also: one verdict per GPU, the low-SM
gate on healthy, autocast and loader settings from ``gpusight.torch``, and host memory before
"more workers".
"""

from __future__ import annotations

import pytest

from gpusight.snapshot.model import Severity, WorkloadKind
from support.advice_frames import Case, burst, check, gpu, host, job, noise, run, snapshot, trainer, wave, workers

VLLM = "python -m vllm.entrypoints.openai.api_server --model meta-llama/Meta-Llama-3-8B-Instruct --port 8000"
TGI = "text-generation-launcher --model-id mistralai/Mistral-7B-v0.1 --port 8080"
KERNEL = "python -m ipykernel_launcher -f /home/carol/.local/share/jupyter/runtime/kernel-1.json"
TRAINER_ADVICE = ("input_bound:", "few_workers:", "gpu_underused:", "batch_headroom:", "oom_risk:", "idle_holding:", "launch_bound:")


def server(util, used=72.0, sm=None, cmdline=VLLM, cpu=35.0):
    """One inference server on GPU 0 (job 7), utilization and SM activity functions of time."""

    def frame(t):
        fields = {} if sm is None else {"sm_active_percent": sm(t), "compute_capability": (9, 0), "tensor_active_percent": 20.0}
        device = gpu(util=util(t), used=used + 0.5, **fields)
        process = trainer(pid=7000, cpu=noise(t, cpu - 5, cpu + 5), workers=None, mem=used, cmdline=cmdline, user="svc")
        return snapshot(t, [device], [process], jobs=[job(7, (7000,), (0,), kind=WorkloadKind.INFERENCE, evidence="vllm command line")])

    return frame


def load(t):
    """Request load: utilization swinging 40-90 % with noise."""
    return max(0.0, min(100.0, wave(t, 40.0, 90.0, 23.0) + noise(t, -5.0, 5.0)))


def notebook_beside_trainer(t):
    """Carol's notebook holds 12 GiB on GPU 0, which Bob's trainer keeps busy."""
    processes = [
        trainer(pid=100, cpu=noise(t, 60, 90), mem=50.0, user="bob"),
        *workers(cpus=tuple(noise(t, 30, 55, k) for k in range(4))),
        trainer(pid=5000, cpu=noise(t, 0, 2), workers=0, mem=12.0, user="carol", cmdline=KERNEL),
    ]
    jobs = [job(1, (100,), (0,), evidence="DataLoader workers"), job(2, (5000,), (0,), kind=WorkloadKind.NOTEBOOK, evidence="ipykernel")]
    return snapshot(t, [gpu(util=noise(t, 90, 99), used=62.5)], processes, jobs=jobs)


def notebook(util, cpu, workers_cpu=(), **fields):
    """A notebook kernel (job 2) on GPU 0, alone."""

    def frame(t):
        process = trainer(pid=5000, cpu=cpu, workers=len(workers_cpu), mem=12.0, user="carol", cmdline=KERNEL, **fields)
        feed = workers(5000, 0, workers_cpu) if workers_cpu else ()
        return snapshot(t, [gpu(util=util + noise(t, -3, 3), used=12.5)], [process, *feed], jobs=[job(2, (5000,), (0,), kind=WorkloadKind.NOTEBOOK, evidence="ipykernel")])

    return frame


def bf16_llm(t):
    """bf16 LLM training on an H100: util 95, SM about 80, tensor about 50, autocast on."""
    device = gpu(
        util=noise(t, 92, 98), used=70.0, compute_capability=(9, 0),
        sm_active_percent=noise(t, 76, 84, "sm"), tensor_active_percent=noise(t, 45, 55, "tc"),
    )
    process = trainer(cpu=noise(t, 100, 130), workers=6, mem=70.0, autocast=True, loader_pin_memory=True)
    return snapshot(t, [device], [process, *workers(cpus=tuple(noise(t, 30, 50, k) for k in range(6)))], jobs=[job(1, (100,), (0,))])


def balanced_ddp(t):
    """8 ranks at 93-98 %, each with 6 workers at moderate CPU, on a 96-core host."""
    pids = tuple(4100 + r for r in range(8))
    devices = [gpu(r, util=noise(t, 93, 98, r), used=66.0) for r in range(8)]
    processes = []
    for r, pid in enumerate(pids):
        processes.append(trainer(pid=pid, device=r, ppid=4000, rank=r, cpu=noise(t, 100, 140, pid), mem=66.0))
        processes.extend(workers(pid, r, tuple(noise(t, 30, 55, (pid, k)) for k in range(6))))
    return snapshot(t, devices, processes, host(cores=96, busy=40), [job(3, pids, tuple(range(8)), world_size=8, launcher_pid=4000)])


QUIET = [
    ("bf16 LLM training at 95 %", bf16_llm, {"healthy:gpu0"}),
    ("balanced 8-rank DDP", balanced_ddp, {f"healthy:gpu{i}" for i in range(8)}),
    ("inference server under load, memory about 90 %", server(load), set()),
    ("inference server with bursts of requests, SMs busy in them", server(lambda t: burst(t, 3.0, 88.0, 12.0, 5.0), sm=lambda t: noise(t, 55, 70)), set()),
    ("notebook on a GPU another user's trainer keeps busy", notebook_beside_trainer, {"healthy:gpu0"}),
]


@pytest.mark.parametrize(("name", "frame", "expected"), QUIET, ids=[q[0] for q in QUIET])
def test_healthy_cases_stay_quiet(name, frame, expected) -> None:
    advice = run(frame, 90.0)
    assert not [a.id for a in advice if a.severity != Severity.INFO], advice
    assert {a.id for a in advice} == expected, [a.id for a in advice]


def input_bound_trainer(**fields):
    """A trainer starved by 4 saturated workers on a 16-core host; host memory and loader settings as given."""
    sample = fields.pop("host_sample", host())
    rss = fields.pop("worker_rss", None)

    def frame(t):
        feed = workers(cpus=tuple(noise(t, 96, 100, k) for k in range(4)), rss=rss)
        return snapshot(t, [gpu(util=wave(t, 15.0, 31.0, 5.0))], [trainer(cpu=35.0, **fields), *feed], sample)

    return frame


CASES = [
    # serving
    Case(
        "vLLM under load with few SMs active: batching knobs",
        server(lambda t: noise(t, 80, 92), sm=lambda t: noise(t, 18, 26)),
        "serving_batching:gpu0",
        True,
        "info",
        ("serving requests (PID 7000)", "SMs active only"),
        absent=TRAINER_ADVICE,
        action=("--max-num-seqs", "--max-num-batched-tokens"),
    ),
    Case(
        "TGI under load with few SMs active",
        server(lambda t: noise(t, 80, 92), sm=lambda t: noise(t, 18, 26), cmdline=TGI),
        "serving_batching:gpu0",
        True,
        "info",
        action=("--max-batch-total-tokens",),
    ),
    Case("server under load, SMs busy", server(load, sm=lambda t: noise(t, 55, 75)), "serving_batching:gpu0", False),
    Case("server with few requests", server(lambda t: noise(t, 5, 25), sm=lambda t: noise(t, 3, 10)), "serving_batching:gpu0", False),
    Case(
        "idle vLLM holding its KV cache for minutes",
        server(lambda t: 0.0, cpu=5.0),
        "serving_idle:pid7000",
        True,
        "info",
        ("PID 7000", "72.0 GiB", "90 % of GPU 0", "KV cache"),
        seconds=330.0,
        absent=("idle_holding:", "oom_risk:"),
        action=("--gpu-memory-utilization", "scale the server down"),
        not_in_action=("kill",),
    ),
    Case("idle server, not for long yet", server(lambda t: 0.0, cpu=5.0), "serving_idle:pid7000", False, seconds=200.0),
    Case("idle server holding little memory", server(lambda t: 0.0, used=10.0, cpu=5.0), "serving_idle:pid7000", False, seconds=330.0),
    Case(
        "inference server with memory near full: by design, no OOM warning",
        server(load, used=77.0),
        "oom_risk:gpu0",
        False,
        absent=TRAINER_ADVICE,
    ),
    # notebooks
    Case(
        "notebook training with saturated DataLoader workers gets trainer advice",
        notebook(util=22.0, cpu=40.0, workers_cpu=(99.0, 98.0, 97.0, 99.0)),
        "input_bound:gpu0",
        True,
        "warn",
        ("4 DataLoader workers",),
    ),
    Case("notebook without training behaviour at 100 % CPU gets none", notebook(util=22.0, cpu=100.0), "few_workers:pid5000", False, absent=TRAINER_ADVICE),
    Case(
        "notebook with a gpusight.torch record that waits for data",
        notebook(util=22.0, cpu=100.0, input_wait_percent=55.0, loader_num_workers=0),
        "few_workers:pid5000",
        True,
        "warn",
        ("waits 55 % of each step",),
    ),
    Case(
        "a forgotten notebook is still named",
        notebook(util=0.0, cpu=0.0),
        "idle_holding:pid5000",
        True,
        "warn",
        ("PID 5000", "carol", "ipykernel_launcher"),
        seconds=150.0,
    ),
    # low-SM gate on healthy, launch_bound's wording
    Case(
        "util 100 % with SMs 30 % active is not healthy",
        lambda t: snapshot(t, [gpu(util=noise(t, 97, 100), sm_active_percent=noise(t, 26, 34), compute_capability=(9, 0), tensor_active_percent=8.0)], [trainer()]),
        "launch_bound:gpu0",
        True,
        "warn",
        ("SMs active only 30 %", "launch-bound or few SMs busy"),
        absent=("healthy:",),
    ),
    Case("SMs 60 % active: no launch-bound", lambda t: snapshot(t, [gpu(util=97.0, sm_active_percent=noise(t, 56, 64))], [trainer()]), "launch_bound:gpu0", False),
    # autocast from gpusight.torch
    Case(
        "autocast off on an A100 without GPM",
        lambda t: snapshot(t, [gpu(util=noise(t, 85, 95), compute_capability=(8, 0))], [trainer(autocast=False)]),
        "mixed_precision:gpu0",
        True,
        "info",
        ("autocast off (gpusight.torch)", "PID 100", "8.0"),
        action=("torch.bfloat16",),
    ),
    Case(
        "autocast on: never told to turn it on, whatever GPM says",
        lambda t: snapshot(t, [gpu(util=95.0, compute_capability=(9, 0), sm_active_percent=80.0, tensor_active_percent=noise(t, 0, 1))], [trainer(autocast=True)]),
        "mixed_precision:gpu0",
        False,
    ),
    Case(
        "autocast off on a GPU without tensor cores",
        lambda t: snapshot(t, [gpu(util=90.0, compute_capability=(6, 1))], [trainer(autocast=False)]),
        "mixed_precision:gpu0",
        False,
    ),
    # loader settings and host memory
    Case(
        "loader settings already set are not recommended again; prefetch_factor quoted",
        input_bound_trainer(loader_pin_memory=True, loader_persistent_workers=True, loader_prefetch_factor=2),
        "input_bound:gpu0",
        True,
        "warn",
        ("CPU-bound data loading",),
        action=("prefetch_factor=4 (now 2)",),
        not_in_action=("pin_memory=True", "persistent_workers=True"),
    ),
    Case(
        "more workers sized by host memory",
        input_bound_trainer(host_sample=host(memory=512, used=100), worker_rss=6.0),
        "input_bound:gpu0",
        True,
        "warn",
        ("each worker holds about 6.0 GiB (RSS of its workers)", "412.0 GiB of host memory free"),
        action=("num_workers from 4 toward 15",),
    ),
    Case(
        "host memory caps the worker count below the idle cores",
        input_bound_trainer(host_sample=host(memory=128, used=100), worker_rss=6.0),
        "input_bound:gpu0",
        True,
        "warn",
        ("room for 2 more",),
        action=("num_workers from 4 toward 6", "capped by host memory"),
    ),
    Case(
        "host memory, not cores, is the limit: share the dataset",
        input_bound_trainer(host_sample=host(memory=64, used=54), worker_rss=6.0),
        "input_bound:gpu0",
        True,
        "warn",
        ("room for 0 more",),
        action=("numpy.memmap", "Arrow"),
        not_in_action=("num_workers from",),
    ),
    Case(
        "no workers yet: the trainer's RSS bounds a worker's memory",
        lambda t: snapshot(t, [gpu(util=20.0)], [trainer(cpu=100.0, workers=0, rss_bytes=20 * 2**30)], host(memory=64, used=30)),
        "few_workers:pid100",
        True,
        "warn",
        ("the trainer's RSS, an upper bound", "room for 1 more"),
        action=("num_workers=1",),
    ),
    # one verdict per GPU
    Case(
        "storage-bound GPU gets no batch-size advice",
        lambda t: snapshot(t, [gpu(util=wave(t, 12, 28, 6.0), used=8.0)], [trainer(cpu=20.0, mem=8.0), *workers(cpus=(10, 12, 8, 9))], host(iowait=noise(t, 20, 30))),
        "storage_bound:host",
        True,
        "warn",
        ("iowait",),
        absent=("batch_headroom:", "gpu_underused:"),
    ),
    Case(
        "heavy H2D copies: the PCIe verdict alone, not also a code gap",
        lambda t: snapshot(t, [gpu(util=wave(t, 25, 45, 7.0), pcie_rx_bytes_per_s=noise(t, 5e9, 7e9))], [trainer(cpu=40.0), *workers(cpus=(20, 22, 18, 25))]),
        "pcie_h2d:gpu0",
        True,
        "warn",
        ("GB/s",),
        absent=("gpu_underused:",),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c.advice_id}-{c.name}" for c in CASES])
def test_workload_rule(case: Case) -> None:
    check(case)
