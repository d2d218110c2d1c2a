"""Each advice rule fires on its scenario and stays silent on a near miss (table-driven).

Every scenario is a sequence of snapshots at 4 Hz fed through a real History and AdviceEngine,
exactly as the sampler does; the advice after the last snapshot is checked.
"""

from __future__ import annotations

import dataclasses

import pytest

from gpusight.snapshot.model import DeviceSample, Snapshot
from support.advice_frames import HZ, Case, check, gpu, host, job, run, snapshot, steady, trainer, workers

INPUT_BOUND = [trainer(cpu=35.0, workers=4), *workers()]

CASES = [
    # 1. input-pipeline bound
    Case("input bound", steady([gpu(util=23.0)], INPUT_BOUND), "input_bound:gpu0", True, "warn", ("23 %", "4 DataLoader workers", "97-100 %")),
    Case("input bound, workers not saturated", steady([gpu(util=23.0)], [trainer(cpu=35.0), *workers(cpus=(60, 55, 62, 58))]), "input_bound:gpu0", False),
    Case("input bound, GPU busy enough", steady([gpu(util=55.0)], INPUT_BOUND), "input_bound:gpu0", False),
    Case("input bound, measured wait decides, workers not CPU-bound", steady([gpu(util=23.0)], [trainer(cpu=35.0, input_wait_percent=63.0), *workers(cpus=(40, 45, 42, 38))]),
         "input_bound:gpu0", True, "warn", ("waits 63 % of each step", "PID 100", "4 DataLoader workers", "workers not CPU-bound"),
         not_in_action=("num_workers from",)),
    Case("input bound, measured wait with saturated workers is CPU-bound", steady([gpu(util=23.0)], [trainer(cpu=35.0, input_wait_percent=63.0), *workers()]),
         "input_bound:gpu0", True, "warn", ("waits 63 % of each step", "CPU-bound data loading")),
    Case("input bound, measured wait low overrides busy workers", steady([gpu(util=23.0)], [trainer(input_wait_percent=4.0), *workers()]),
         "input_bound:gpu0", False),
    Case("input bound, trainer loads data itself: num_workers=0 is few_workers' case", steady([gpu(util=20.0)], [trainer(cpu=100.0, workers=0)], host(cores=8, busy=8)),
         "input_bound:gpu0", False),
    # 2. too few workers
    Case(
        "no workers, idle cores",
        steady([gpu(util=30.0)], [trainer(cpu=100.0, workers=0)], host(busy=1)),
        "few_workers:pid100",
        True,
        "warn",
        ("main process", "100 %", "30 %", "of 16 cores idle"),
    ),
    Case(
        "num_workers=0 on a full small host still gets num_workers >= 1, never 'cheaper samples'",
        steady([gpu(util=20.0)], [trainer(cpu=100.0, workers=0)], host(cores=8, busy=8)),
        "few_workers:pid100",
        True,
        "warn",
        ("num_workers=0", "100 %", "20 %"),
        absent=("input_bound:",),
        action=("num_workers=1",),
        not_in_action=("cheaper",),
    ),
    Case(
        "two workers on a small host with one idle core (relative cut-off)",
        steady([gpu(util=25.0)], [trainer(cpu=40.0, workers=2), *workers(cpus=(99.0, 98.0))], host(cores=8, busy=6)),
        "few_workers:pid100",
        True,
        "warn",
        ("2 DataLoader workers", "of 8 cores idle"),
    ),
    Case("two workers, host already full", steady([gpu(util=25.0)], [trainer(cpu=40.0, workers=2), *workers(cpus=(99.0, 98.0))], host(cores=8, busy=8)),
         "few_workers:pid100", False),
    Case("no workers but trainer not saturated", steady([gpu(util=30.0)], [trainer(cpu=40.0, workers=0)], host(busy=1)), "few_workers:pid100", False),
    Case("worker count unknown", steady([gpu(util=30.0)], [trainer(cpu=100.0, workers=None)], host(busy=1)), "few_workers:pid100", False),
    Case(
        "no workers, 55 % CPU + 40 % run-queue wait on oversubscribed cores: saturated, so num_workers=0 is the cause",
        steady([gpu(util=30.0)], [trainer(cpu=55.0, workers=0, cpu_wait_percent=40.0)], host(cores=2, busy=2)),
        "few_workers:pid100",
        True,
        "warn",
        ("num_workers=0", "55 % CPU and waits 40 % for a CPU (cores oversubscribed)"),
        absent=("gpu_underused:",),
        action=("oversubscribed", "CPU affinity", "num_workers=1"),
    ),
    Case("no workers, 55 % CPU and little run-queue wait is not saturated",
         steady([gpu(util=30.0)], [trainer(cpu=55.0, workers=0, cpu_wait_percent=5.0)], host(cores=2, busy=2)),
         "few_workers:pid100", False),
    # 3. storage bound
    Case(
        "storage bound",
        steady([gpu(util=20.0)], [trainer(cpu=20.0), *workers(cpus=(15, 12, 18, 10))], host(iowait=25.0)),
        "storage_bound:host",
        True,
        "warn",
        ("iowait 25 %", "GPU 0 20 %"),
    ),
    Case("iowait below threshold", steady([gpu(util=20.0)], [trainer(cpu=20.0), *workers(cpus=(15, 12, 18, 10))], host(iowait=6.0)), "storage_bound:host", False),
    Case("iowait unknown", steady([gpu(util=20.0)], [trainer(cpu=20.0), *workers(cpus=(15, 12, 18, 10))], host(iowait=None)), "storage_bound:host", False),
    # 4. training code leaves the GPU waiting
    Case(
        "GPU and CPU both low",
        steady([gpu(util=31.0)], [trainer(cpu=40.0), *workers(cpus=(20, 22, 18, 25))]),
        "gpu_underused:gpu0",
        True,
        "warn",
        ("31 %", "trainer PID 100 at 40 %", "18-25 %", "iowait 1 %"),
    ),
    Case("GPU low but pipeline saturated", steady([gpu(util=31.0)], INPUT_BOUND), "gpu_underused:gpu0", False),
    Case("GPU low, storage-bound", steady([gpu(util=31.0)], [trainer(cpu=40.0), *workers(cpus=(20, 22, 18, 25))], host(iowait=30.0)), "gpu_underused:gpu0", False),
    Case(
        "waiting rank of an imbalanced torchrun job",
        steady(
            [gpu(i, util=u) for i, u in enumerate((95.0, 35.0, 36.0, 34.0))],
            [*(trainer(pid=101 + i, device=i, ppid=50, cpu=40.0) for i in range(4)), *(w for i in range(4) for w in workers(101 + i, i, (20, 20)))],
            jobs=[job(1, (101, 102, 103, 104), (0, 1, 2, 3))],
        ),
        "gpu_underused:gpu1",
        False,
    ),
    Case("GPU at idle is not under-used code", steady([gpu(util=0.0)], [trainer(cpu=1.0), *workers(cpus=(0, 0, 0, 0))]), "gpu_underused:gpu0", False),
    # 5. memory headroom and OOM risk
    Case(
        "small batch",
        steady([gpu(util=40.0, used=8.0)], [trainer(cpu=70.0, mem=8.0), *workers(cpus=(30, 35, 28, 31))]),
        "batch_headroom:gpu0",
        True,
        "info",
        ("8.0 GiB of 80.0 GiB", "10 %", "40 %"),
    ),
    Case("memory already well used", steady([gpu(util=40.0, used=60.0)], [trainer(cpu=70.0, mem=60.0), *workers(cpus=(30, 35, 28, 31))]), "batch_headroom:gpu0", False),
    Case("low memory on a busy GPU", steady([gpu(util=80.0, used=8.0)], [trainer(cpu=70.0, mem=8.0), *workers(cpus=(30, 35, 28, 31))]), "batch_headroom:gpu0", False),
    Case(
        "moderate utilization, little memory",
        steady([gpu(util=60.0, used=9.0)], [trainer(cpu=99.0, mem=9.0), *workers(cpus=(10, 15, 12, 20))]),
        "batch_headroom:gpu0",
        True,
        "info",
        ("9.0 GiB", "60 %"),
    ),
    Case("low memory but input-bound", steady([gpu(util=23.0, used=8.0)], INPUT_BOUND), "batch_headroom:gpu0", False),
    Case("near-full memory", steady([gpu(util=95.0, used=78.0)], [trainer(mem=78.0)]), "oom_risk:gpu0", True, "warn", ("78.0 GiB of 80.0 GiB", "97.5 %")),
    Case("memory below the OOM line", steady([gpu(util=95.0, used=74.0)], [trainer(mem=74.0)]), "oom_risk:gpu0", False),
    # 6. mixed precision (GPM)
    Case(
        "no tensor cores in use",
        steady([gpu(util=95.0, compute_capability=(9, 0), sm_active_percent=80.0, tensor_active_percent=0.4)], [trainer()]),
        "mixed_precision:gpu0",
        True,
        "info",
        ("80 %", "0.4 %", "9.0"),
    ),
    Case("tensor cores busy", steady([gpu(util=95.0, compute_capability=(9, 0), sm_active_percent=80.0, tensor_active_percent=40.0)], [trainer()]), "mixed_precision:gpu0", False),
    Case("no GPM: silent", steady([gpu(util=95.0, compute_capability=(9, 0))], [trainer()]), "mixed_precision:gpu0", False),
    Case("pre-Volta GPU", steady([gpu(util=95.0, compute_capability=(6, 1), sm_active_percent=80.0, tensor_active_percent=0.0)], [trainer()]), "mixed_precision:gpu0", False),
    # 7. launch bound (GPM)
    Case(
        "busy by NVML, idle SMs",
        steady([gpu(util=97.0, sm_active_percent=15.0, tensor_active_percent=10.0)], [trainer()]),
        "launch_bound:gpu0",
        True,
        "warn",
        ("97 %", "15 %"),
    ),
    Case("SMs well used", steady([gpu(util=97.0, sm_active_percent=60.0, tensor_active_percent=10.0)], [trainer()]), "launch_bound:gpu0", False),
    Case("no GPM: silent", steady([gpu(util=97.0)], [trainer()]), "launch_bound:gpu0", False),
    # 8. PCIe host-to-device
    Case("heavy H2D copies", steady([gpu(util=35.0, pcie_rx_bytes_per_s=6e9)], [trainer(cpu=40.0), *workers(cpus=(20, 22, 18, 25))]), "pcie_h2d:gpu0", True, "warn", ("6GB/s", "35 %")),
    Case("light H2D traffic", steady([gpu(util=35.0, pcie_rx_bytes_per_s=5e8)], [trainer(cpu=40.0), *workers(cpus=(20, 22, 18, 25))]), "pcie_h2d:gpu0", False),
    Case("heavy H2D but the input pipeline is the bottleneck", steady([gpu(util=23.0, pcie_rx_bytes_per_s=6e9)], INPUT_BOUND), "pcie_h2d:gpu0", False),
    Case("heavy H2D on a busy GPU", steady([gpu(util=90.0, pcie_rx_bytes_per_s=6e9)], [trainer()]), "pcie_h2d:gpu0", False),
    # 9. throttling
    Case(
        "thermal throttling",
        lambda t: snapshot(
            t,
            [gpu(util=97.0, throttle_reasons=("hw_thermal",) if t >= 38 else (), temperature_celsius=91.0, clock_sm_mhz=1410 if t >= 38 else 1980)],
            [trainer()],
        ),
        "throttling:gpu0",
        True,
        "warn",
        ("hw_thermal", "91 C", "1410 MHz", "29 % below its 1980 MHz"),
    ),
    Case("power cap only", steady([gpu(util=99.0, throttle_reasons=("sw_power_cap",), power_watts=699.0, power_limit_watts=700.0)], [trainer()]), "throttling:gpu0", True, "info", ("sw_power_cap", "699 W of 700 W")),
    Case("throttled too briefly", lambda t: snapshot(t, [gpu(util=97.0, throttle_reasons=("hw_thermal",) if 30 <= t < 45 else ())], [trainer()]), "throttling:gpu0", False),
    Case("benign clock reasons", steady([gpu(util=0.0, throttle_reasons=("gpu_idle", "applications_clocks_setting"))], [trainer()]), "throttling:gpu0", False),
    # 10. idle GPU holding memory
    Case(
        "forgotten notebook",
        steady([gpu(util=0.0, used=12.5)], [trainer(pid=4242, cpu=0.0, workers=0, mem=12.0, user="bob", cmdline="\x1b[31mjupyter-lab --port 8888")]),
        "idle_holding:pid4242",
        True,
        "warn",
        ("PID 4242", "bob", "jupyter-lab --port 8888", "12.0 GiB", "GPU 0", "2 min"),
        seconds=150.0,
    ),
    Case("idle, but not for minutes yet", steady([gpu(util=0.0, used=12.5)], [trainer(pid=4242, cpu=0.0, workers=0, mem=12.0)]), "idle_holding:pid4242", False, seconds=100.0),
    Case("holding memory while working", steady([gpu(util=30.0, used=12.5)], [trainer(pid=4242, cpu=50.0, workers=0, mem=12.0)]), "idle_holding:pid4242", False, seconds=150.0),
    Case("idle with a bare context", steady([gpu(util=0.0, used=0.4)], [trainer(pid=4242, cpu=0.0, workers=0, mem=0.2)]), "idle_holding:pid4242", False, seconds=150.0),
    # 11. multi-GPU imbalance, within jobs the collector found
    Case(
        "torchrun job with a hot rank",
        steady(
            [gpu(i, util=u) for i, u in enumerate((95.0, 40.0, 42.0, 41.0))],
            [trainer(pid=101 + i, device=i, ppid=50) for i in range(4)],
            jobs=[job(1, (101, 102, 103, 104), (0, 1, 2, 3))],
        ),
        "imbalance:job1",
        True,
        "warn",
        ("GPU 0 util 95 %", "GPU 1 40 %", "GPU 3 41 %", "job 1: 4 processes on 4 GPUs"),
        absent=("gpu_underused:", "straggler:"),
    ),
    Case(
        "torchrun job in balance",
        steady(
            [gpu(i, util=u) for i, u in enumerate((90.0, 85.0, 88.0, 86.0))],
            [trainer(pid=101 + i, device=i, ppid=50) for i in range(4)],
            jobs=[job(1, (101, 102, 103, 104), (0, 1, 2, 3))],
        ),
        "imbalance:job1",
        False,
    ),
    Case(
        "DataParallel: one process on two GPUs",
        steady(
            [gpu(0, util=88.0), gpu(1, util=35.0)],
            [trainer(pid=300, device=0, ppid=1), trainer(pid=300, device=1, ppid=1)],
            jobs=[job(4, (300,), (0, 1), evidence="one process on 2 GPUs")],
        ),
        "imbalance:job4",
        True,
        "warn",
        ("88 %", "35 %", "job 4: 1 process on 2 GPUs"),
        action=("DistributedDataParallel",),
    ),
    Case(
        "one user's sweep: two jobs, never an imbalance",
        steady(
            [gpu(0, util=10.0), gpu(1, util=90.0)],
            [trainer(pid=401, device=0, ppid=1, user="carol"), trainer(pid=402, device=1, ppid=1, user="carol")],
            jobs=[job(1, (401,), (0,), evidence="lone process"), job(2, (402,), (1,), evidence="lone process")],
        ),
        "imbalance:job1",
        False,
        absent=("imbalance:", "straggler:"),
    ),
    Case(
        "a recording without jobs: no job advice at all",
        steady([gpu(i, util=u) for i, u in enumerate((95.0, 40.0, 42.0, 41.0))], [trainer(pid=101 + i, device=i, ppid=50) for i in range(4)]),
        "imbalance:job1",
        False,
        absent=("imbalance:", "straggler:", "comm_bound:"),
    ),
    # 12. free capacity
    Case("a free GPU", steady([gpu(0, util=95.0), gpu(3, util=0.0, used=0.5)], [trainer()]), "free_capacity:gpu3", True, "info", ("no processes", "0.5 GiB of 80.0 GiB")),
    Case("memory used without visible processes", steady([gpu(0, util=95.0), gpu(3, util=0.0, used=20.0)], [trainer()]), "free_capacity:gpu3", False),
    # 13. healthy
    Case("healthy", steady([gpu(util=92.0)], [trainer()]), "healthy:gpu0", True, "info", ("92 %",)),
    Case("busy but throttled is not healthy", steady([gpu(util=92.0, throttle_reasons=("hw_thermal",))], [trainer()]), "healthy:gpu0", False),
    Case("not busy enough to call healthy", steady([gpu(util=60.0)], [trainer()]), "healthy:gpu0", False),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c.advice_id}-{c.name}" for c in CASES])
def test_rule(case: Case) -> None:
    check(case)


def test_every_rule_has_a_firing_case_and_a_near_miss() -> None:
    from test_advice_decoder import CASES as DECODER_CASES
    from test_advice_health import CASES as HEALTH_CASES
    from test_advice_jobs import CASES as JOB_CASES
    from test_advice_mig import CASES as MIG_CASES
    from test_advice_speed import CASES as SPEED_CASES
    from test_advice_workloads import CASES as WORKLOAD_CASES

    from gpusight.advice.rules import RULES

    every = CASES + JOB_CASES + WORKLOAD_CASES + SPEED_CASES + HEALTH_CASES + MIG_CASES + DECODER_CASES
    for rule in RULES:
        outcomes = {c.fires for c in every if c.advice_id.startswith(rule.name + ":")}
        assert outcomes == {True, False}, rule.name


def test_input_bound_suggests_more_workers_from_the_idle_cores() -> None:
    advice = {a.id: a for a in run(steady([gpu(util=23.0)], INPUT_BOUND), 60)}
    assert "num_workers from 4 toward 15 (16 cores, 4 busy)" in advice["input_bound:gpu0"].action


def test_few_workers_action_names_a_worker_count() -> None:
    advice = {a.id: a for a in run(steady([gpu(util=30.0)], [trainer(cpu=100.0, workers=0)], host(busy=1)), 60)}
    assert "num_workers=14" in advice["few_workers:pid100"].action


def test_oom_risk_names_the_out_of_memory_error_it_warns_of() -> None:
    advice = {a.id: a for a in run(steady([gpu(util=95.0, used=78.0)], [trainer(mem=78.0)]), 60)}["oom_risk:gpu0"]
    assert advice.title == "GPU 0 memory is nearly full (out-of-memory risk)"
    assert "can raise CUDA out-of-memory errors" in advice.action


def test_window_mean_not_single_samples_decides() -> None:
    """A GPU at 10 % on one sample in four but 95 % otherwise is healthy, not under-used."""

    def frame(t: float) -> Snapshot:
        util = 10.0 if int(t * HZ) % 4 == 0 else 95.0
        return snapshot(t, [gpu(util=util)], [trainer(cpu=40.0), *workers(cpus=(20, 20, 20, 20))])

    ids = {a.id for a in run(frame, 60)}
    assert "healthy:gpu0" in ids
    assert "gpu_underused:gpu0" not in ids


def test_a_lost_gpu_gets_no_advice() -> None:
    lost = DeviceSample(index=1, lost=True, error="GPU is lost")
    advice = run(steady([gpu(0, util=92.0), lost], [trainer(), trainer(pid=200, device=1, mem=30.0)]), 60)
    assert {a.id for a in advice} == {"healthy:gpu0"}


def test_gpm_rules_stay_silent_when_gpm_fields_are_none() -> None:
    device = gpu(util=97.0, compute_capability=(9, 0), sm_active_percent=None, tensor_active_percent=None)
    ids = {a.id for a in run(steady([device], [trainer()]), 60)}
    assert not {i for i in ids if i.startswith(("mixed_precision", "launch_bound"))}


def test_unknown_utilization_stays_silent() -> None:
    device = dataclasses.replace(gpu(), utilization_gpu_percent=None)
    assert run(steady([device], INPUT_BOUND), 60) == ()


def test_under_used_gpu_claims_the_input_is_fine_only_when_the_wait_was_measured():
    """Workers blocked on network reads look idle from outside: without gpusight.torch the advice asks to measure."""
    guessed = {a.id: a for a in run(steady([gpu(util=31.0)], [trainer(cpu=40.0), *workers(cpus=(2, 3, 2, 1))]), 60.0)}
    measured = {a.id: a for a in run(
        steady([gpu(util=31.0)], [trainer(cpu=40.0, input_wait_percent=4.0), *workers(cpus=(2, 3, 2, 1))]), 60.0)}

    unsure, sure = guessed["gpu_underused:gpu0"], measured["gpu_underused:gpu0"]
    assert "reads that block" in unsure.title and "not by the input pipeline" not in unsure.title
    assert unsure.action.startswith("first measure the input wait: wrap the loader with gpusight.torch.watch(loader)")
    assert "not by the input pipeline" in sure.title
    assert "waits 4 % of each step for data (measured by gpusight.torch)" in sure.evidence
    assert "gpusight.torch.watch" not in sure.action
