"""The realistic advice suite: `gpusight --check --json` run as a user scripts it, on real processes and the fake NVML.

Each case lays real processes out as a real workload does (a torchrun launcher with 8 ranks, a
vLLM-like server, a Jupyter kernel, one user's sweep, trainers with DataLoader workers, a real
torch loop instrumented with ``gpusight.torch``), puts their pids on fake GPUs whose readings move
(sine and square waves of the wall clock with per-GPU phases, never constants), runs the real CLI
and reads its final snapshot and exit status. It asserts the exact advice id, its scope resolved
from the snapshot's own jobs and pids, the severity, key evidence, the exit status, and the advice
that must not appear. Healthy cases must stay quiet (exit 0).

``--check`` cuts the rules' windows to fit the duration and judges the window as a whole (docs/check.md); the cases
pick durations just long enough for that.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.fake_nvml import FakeGpu, FakeScenario, Sine, Square, fake_nvml_env
from support.procs import cpu_hog, fake_trainer, kill_tree, shared_cpu, wait_until
from support.speed_records import published, speed_record
from support.workloads import notebook_kernel, server, sweep, torchrun_job

GIB = 1 << 30
SM_ACTIVE = 2
"""GPM metric id of SM activity (NVML_GPM_METRIC_SM_UTIL), written out so the test does not trust the code."""
ANY_TENSOR = 5
"""GPM metric id of tensor-core activity (NVML_GPM_METRIC_ANY_TENSOR_UTIL)."""
TRAINER_RULES = ("input_bound", "few_workers", "gpu_underused", "batch_headroom", "oom_risk", "idle_holding",
                 "launch_bound")
"""Advice meant for training code, never for an inference server."""


@dataclass
class Checked:
    """What one `gpusight --check --json` run gave."""

    status: int
    """Exit status."""
    data: dict
    """The final snapshot."""
    headline: str
    """First line of stderr (what was checked, how the windows were scaled)."""

    @property
    def advice(self) -> dict[str, dict]:
        """Standing advice by id."""
        return {a["id"]: a for a in self.data["advice"]}

    def standing(self, advice_id: str) -> dict:
        """The advice ``advice_id``, which must stand (the failure lists what stood instead)."""
        assert advice_id in self.advice, f"{advice_id} does not stand:\n{self.dump()}"
        return self.advice[advice_id]

    def rules(self) -> set[str]:
        """Rule names of the standing advice."""
        return {advice_id.partition(":")[0] for advice_id in self.advice}

    def job_of(self, pid: int) -> dict:
        """The job holding GPU process ``pid``, found through the process row's ``job`` field."""
        row = next(p for p in self.data["processes"] if p["role"] == "gpu" and p["pid"] == pid)
        [job] = [j for j in self.data["jobs"] if j["id"] == row["job"]]
        return job

    def dump(self) -> str:
        """The advice, for assertion messages."""
        return self.headline + "\n" + "\n".join(f"{a['id']} {a['severity']}: {a['title']} | {a['evidence']}"
                                                for a in self.data["advice"])


def check(tmp_path: Path, lib: Path, gpus: list[FakeGpu], duration: float, interval: float = 0.5,
          env: dict[str, str] | None = None) -> Checked:
    """`gpusight --check --duration D --interval I --json` on the fake GPUs ``gpus``, with the default thresholds."""
    scenario = FakeScenario(gpus=gpus).write(tmp_path / "scenario.txt")
    args = [sys.executable, "-m", "gpusight", "--check", "--duration", f"{duration:g}", "--interval", f"{interval:g}",
            "--json"]
    out = subprocess.run(args, capture_output=True, text=True, env=fake_nvml_env(lib, scenario, base=env),
                         timeout=duration + 60, check=False)
    assert out.returncode in (0, 1, 2), out.stderr
    headline = out.stderr.splitlines()[0]
    assert headline.startswith(f"gpusight check: {duration:g} s of live data, {len(gpus)} GPU"), out.stderr
    return Checked(out.returncode, json.loads(out.stdout), headline)


def busy_gpu(pid: int, index: int, util: float = 95.0, used: float = 60.0, **fields: object) -> FakeGpu:
    """GPU ``index`` running ``pid`` at about ``util`` % (a sine of its own period and phase)."""
    return FakeGpu(util_gpu=Sine(util, 2.0, 2100 + 130 * index, 170 * index), mem_used=int(used * GIB),
                   power_mw=Sine(600_000, 30_000, 3700, 90 * index), compute_processes=[(pid, int(used * GIB) - GIB)],
                   **fields)


def assert_absent(checked: Checked, *rules: str) -> None:
    """None of ``rules`` stands anywhere."""
    assert not checked.rules() & set(rules), checked.dump()


BUSY_TRAINER = """
import os
parent = os.getppid()
count = 0
while True:
    count += 1
    if count % 200000 == 0 and os.getppid() != parent:
        break
"""
"""A main process that burns a core (it loads data itself) until its parent is gone."""


@contextmanager
def busy_trainer(tmp_path: Path) -> Iterator[subprocess.Popen]:
    """``python train.py`` burning one core, with no DataLoader workers."""
    script = tmp_path / "cpu" / "train.py"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(BUSY_TRAINER)
    proc = subprocess.Popen([sys.executable, str(script), "--num-workers", "0"])
    try:
        yield proc
    finally:
        kill_tree(proc.pid)
        proc.wait()


# ---- multi-GPU jobs ----

def test_a_straggling_rank_of_a_torchrun_job_is_named_with_its_pid_and_gpu(tmp_path, fake_nvml_lib):
    with torchrun_job(tmp_path, nproc=8) as launched:
        gpus = [busy_gpu(pid, rank, util=57.0 if rank == 5 else 96.0) for rank, pid in enumerate(launched.ranks)]
        checked = check(tmp_path, fake_nvml_lib, gpus, duration=8)
    job = checked.job_of(launched.ranks[5])
    assert job["pids"] == launched.ranks and job["kind"] == "training"
    slow = launched.ranks[5]
    advice = checked.standing(f"straggler:job{job['id']}")
    assert advice["severity"] == "warn"
    assert advice["title"].startswith(f"Rank 5 (PID {slow}) on GPU 5 holds back job {job['id']}")
    assert f"rank 5 (PID {slow}) on GPU 5 util 5" in advice["evidence"]
    assert "on its 7 peers (9" in advice["evidence"]
    assert_absent(checked, "imbalance", "healthy", "comm_bound", "launch_bound")
    assert [a["id"] for a in checked.data["advice"]] == [advice["id"]], checked.dump()
    assert checked.status == 1


def bf16_gpu(pid: int, index: int) -> FakeGpu:
    """An H100 training a bf16 LLM: util about 95 %, SMs active about 80 %, tensor cores about 50 % (GPM)."""
    return busy_gpu(pid, index, util=95.0, used=70.0, gpm_supported=1,
                    gpm={SM_ACTIVE: Sine(80.0, 3.0, 1900 + 70 * index, 50 * index),
                         ANY_TENSOR: Sine(50.0, 4.0, 2700, 110 * index)})


def test_balanced_bf16_ddp_on_8_gpus_is_healthy_and_quiet(tmp_path, fake_nvml_lib):
    with torchrun_job(tmp_path, nproc=8) as launched:
        checked = check(tmp_path, fake_nvml_lib, [bf16_gpu(pid, rank) for rank, pid in enumerate(launched.ranks)],
                        duration=8)
    assert checked.status == 0, checked.dump()
    assert checked.job_of(launched.ranks[0])["pids"] == launched.ranks
    assert set(checked.advice) == {f"healthy:gpu{index}" for index in range(8)}, checked.dump()
    for advice in checked.data["advice"]:
        found = re.search(r"util (\d+) % over the last \d+ s, SMs active (\d+) % \(GPM\)", advice["evidence"])
        assert advice["severity"] == "info" and found, advice
        assert int(found.group(1)) >= 90 and 74 <= int(found.group(2)) <= 86, advice
    assert_absent(checked, "straggler", "imbalance", "comm_bound", "launch_bound", "mixed_precision")


def test_a_communication_bound_ddp_job_is_named_as_a_job(tmp_path, fake_nvml_lib):
    with torchrun_job(tmp_path, nproc=4) as launched:
        gpus = [busy_gpu(pid, rank, util=97.0, gpm_supported=1,
                         gpm={SM_ACTIVE: Sine(25.0, 3.0, 1700, 60 * rank), ANY_TENSOR: Sine(8.0, 2.0, 2300)},
                         nvlink_tx_rate=Sine(6.0e10, 5.0e9, 2900, 100 * rank),
                         nvlink_rx_rate=Sine(6.0e10, 5.0e9, 3100, 80 * rank))
                for rank, pid in enumerate(launched.ranks)]
        checked = check(tmp_path, fake_nvml_lib, gpus, duration=8)
    job, advice = job_advice(checked, "comm_bound", launched.ranks[0])
    assert job["pids"] == launched.ranks
    assert advice["evidence"].startswith("4 ranks at 9")
    assert "SMs active 2" in advice["evidence"] and "(GPM)" in advice["evidence"]
    assert re.search(r"NVLink \S+GB/s(-\S+GB/s)? sent and \S+GB/s(-\S+GB/s)? received", advice["evidence"])
    assert "no_sync" in advice["action"]
    assert_absent(checked, "launch_bound", "straggler", "imbalance", "healthy", "mixed_precision")
    assert checked.status == 1


def test_a_sweep_of_one_user_is_separate_jobs_without_imbalance_or_straggler(tmp_path, fake_nvml_lib):
    utils = (95.0, 55.0, 90.0, 60.0)  # as one job these would be a 35-point straggler and a 27-point imbalance
    with sweep(tmp_path) as runs:
        pids = runs.terminals + runs.loop
        gpus = [busy_gpu(pid, index, util=util, used=62.0)
                for index, (pid, util) in enumerate(zip(pids, utils, strict=True))]
        checked = check(tmp_path, fake_nvml_lib, gpus, duration=8)
    assert sorted(tuple(j["pids"]) for j in checked.data["jobs"]) == sorted((pid,) for pid in pids)
    assert_absent(checked, "straggler", "imbalance", "comm_bound")
    assert not [a for a in checked.data["advice"] if a["scope"].startswith("job")], checked.dump()
    assert {f"healthy:gpu{index}" for index in (0, 2)} <= set(checked.advice), checked.dump()
    assert checked.status == 0, checked.dump()


# ---- not every GPU process is a trainer ----

def test_a_loaded_vllm_server_gets_no_trainer_advice_and_no_warning(tmp_path, fake_nvml_lib):
    with server(tmp_path, ["serve", "meta-llama/Meta-Llama-3-8B-Instruct"]) as (pid, _):
        gpu = FakeGpu(util_gpu=Sine(65.0, 25.0, 2600), util_mem=Sine(40.0, 15.0, 2600), mem_used=72 * GIB,
                      power_mw=Sine(450_000, 150_000, 2600), compute_processes=[(pid, 71 * GIB)])
        checked = check(tmp_path, fake_nvml_lib, [gpu], duration=8)
    job = checked.job_of(pid)
    assert (job["kind"], job["evidence"]) == ("inference", "vllm serve (command line)")
    assert_absent(checked, *TRAINER_RULES)
    assert not [a for a in checked.data["advice"] if a["severity"] != "info"], checked.dump()
    assert checked.status == 0, checked.dump()


def test_a_notebook_beside_a_busy_trainer_gets_nothing(tmp_path, fake_nvml_lib):
    with notebook_kernel(tmp_path) as (_, kernel), fake_trainer(tmp_path, workers=("sleep", "sleep")) as trainer:
        gpu = FakeGpu(util_gpu=Sine(94.0, 3.0, 1900), mem_used=62 * GIB,
                      compute_processes=[(trainer.pid, 48 * GIB), (kernel, 12 * GIB)])
        checked = check(tmp_path, fake_nvml_lib, [gpu], duration=8)
    assert checked.job_of(kernel)["kind"] == "notebook"
    assert checked.job_of(trainer.pid)["kind"] == "training"
    assert not [a for a in checked.data["advice"] if str(kernel) in a["scope"] + a["title"]], checked.dump()
    assert set(checked.advice) == {"healthy:gpu0"}, checked.dump()
    assert checked.status == 0


# ---- trainers and their input ----

def test_periodic_stalls_of_a_forkserver_trainer_are_named_with_their_period(tmp_path, fake_nvml_lib):
    with fake_trainer(tmp_path, workers=("sleep", "sleep"), layout="forkserver") as trainer:
        gpu = FakeGpu(util_gpu=Square(100, 0, 1500, 1500), mem_used=60 * GIB,
                      compute_processes=[(trainer.pid, 59 * GIB)])
        checked = check(tmp_path, fake_nvml_lib, [gpu], duration=20, interval=0.25)
    # the windows longer than the check (30 s averaging, 60 s stall window) are cut to it; no live hold is waited out
    assert "rules shortened to fit the 20 s checked: averages over 19.8 s, not window_s 30 s, " in checked.headline
    assert "advice judged on the window as a whole at its end, without the live screen's holds" in checked.headline
    assert checked.headline.endswith("; regular stalls seen up to a 6.3 s period")
    assert checked.job_of(trainer.pid)["kind"] == "training"
    advice = checked.standing("periodic_stall:gpu0")
    assert advice["severity"] == "warn"
    found = re.search(r"GPU 0 stalls every (\d+\.\d) s for (\d+\.\d) s \(\d+ stalls, (\d+) % of the last 20 s stalled",
                      advice["evidence"])
    assert found, advice["evidence"]
    period, stall, share = (float(value) for value in found.groups())
    assert 2.5 <= period <= 3.5 and 1.0 <= stall <= 2.0 and 35 <= share <= 65, advice["evidence"]
    assert "DataLoader workers" in advice["evidence"] and "(2 workers)" in advice["evidence"]
    assert "the workers sleep during the stalls" in advice["action"]
    assert_absent(checked, "gpu_underused", "input_bound", "few_workers", "batch_headroom", "healthy")
    assert checked.status == 1


def test_a_trainer_without_workers_is_told_to_set_num_workers(tmp_path, fake_nvml_lib):
    with busy_trainer(tmp_path) as proc:
        gpu = FakeGpu(util_gpu=Sine(30.0, 4.0, 1800), mem_used=60 * GIB, compute_processes=[(proc.pid, 59 * GIB)])
        checked = check(tmp_path, fake_nvml_lib, [gpu], duration=8)
    advice = checked.standing(f"few_workers:pid{proc.pid}")
    assert advice["severity"] == "warn"
    assert advice["title"] == f"PID {proc.pid} loads its data in the training process (num_workers=0) for GPU 0"
    assert f"trainer PID {proc.pid} loads data in its main process (num_workers=0) at" in advice["evidence"]
    found = re.search(r"DataLoader\(num_workers=(\d+)", advice["action"])
    assert found and int(found.group(1)) >= 1, advice["action"]
    assert not [a for a in checked.data["advice"] if "make each sample cheaper" in a["action"]], checked.dump()
    assert_absent(checked, "input_bound", "gpu_underused", "batch_headroom")
    assert checked.status == 1


def test_a_trainer_without_workers_sharing_its_cpu_with_a_hog_is_still_told_to_set_num_workers(tmp_path, fake_nvml_lib):
    """The trainer gets about half its core and waits the other half on the run queue: still saturated, and the
    action asks for free cores before anything else rather than blaming the training code."""
    cpu = shared_cpu()
    with busy_trainer(tmp_path) as proc, cpu_hog(cpu):
        os.sched_setaffinity(proc.pid, {cpu})
        gpu = FakeGpu(util_gpu=Sine(30.0, 4.0, 1800), mem_used=60 * GIB, compute_processes=[(proc.pid, 59 * GIB)])
        checked = check(tmp_path, fake_nvml_lib, [gpu], duration=8)
    row = next(p for p in checked.data["processes"] if p["pid"] == proc.pid)
    assert row["cpu_percent"] < 85.0 and row["cpu_wait_percent"] >= 25.0, row
    advice = checked.standing(f"few_workers:pid{proc.pid}")
    assert advice["title"] == f"PID {proc.pid} loads its data in the training process (num_workers=0) for GPU 0"
    assert re.search(r"at \d+ % CPU and waits \d+ % for a CPU \(cores oversubscribed\)", advice["evidence"]), advice
    assert "CPU affinity" in advice["action"] and "free cores first" in advice["action"], advice["action"]
    assert_absent(checked, "input_bound", "gpu_underused", "batch_headroom")
    assert checked.status == 1


SPAWN_TRAINER = """
import os, time
import torch
from torch.utils.data import DataLoader, Dataset


class Cheap(Dataset):
    def __len__(self):
        return 1 << 30

    def __getitem__(self, index):
        return torch.full((4,), float(index))


if __name__ == "__main__":
    loader = DataLoader(Cheap(), batch_size=4, num_workers=2, multiprocessing_context="spawn")
    parent = os.getppid()
    for step, batch in enumerate(loader):
        if step == 0:
            print("training", flush=True)
        time.sleep(0.05)  # the loop's own gap between steps (host syncs, logging), not waiting for data
        if os.getppid() != parent:
            break
"""
"""A trainer whose two spawn DataLoader workers keep up (they block on a full prefetch queue) while its own loop
leaves the GPU waiting."""


def test_spawn_workers_that_keep_up_leave_the_blame_on_the_training_code(tmp_path, fake_nvml_lib):
    pytest.importorskip("torch")
    script = tmp_path / "spawn" / "train.py"
    script.parent.mkdir()
    script.write_text(SPAWN_TRAINER)
    trainer = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert trainer.stdout is not None and trainer.stdout.readline() == "training\n"
        gpu = FakeGpu(util_gpu=Sine(25.0, 4.0, 1600), mem_used=60 * GIB, compute_processes=[(trainer.pid, 59 * GIB)])
        checked = check(tmp_path, fake_nvml_lib, [gpu], duration=8)
    finally:
        kill_tree(trainer.pid)
        trainer.wait()
    workers = [p for p in checked.data["processes"] if p["role"] == "dataloader_worker"]
    assert len(workers) == 2 and all(w["trainer_pid"] == trainer.pid for w in workers), workers  # not the tracker
    assert checked.job_of(trainer.pid)["kind"] == "training"
    advice = checked.standing("gpu_underused:gpu0")
    assert advice["severity"] == "warn"
    assert re.search(rf"GPU 0 util 2\d % over the last \d+ s; trainer PID {trainer.pid} at \d+ % CPU; "
                     r"its 2 DataLoader workers at \d+(-\d+)? %", advice["evidence"]), advice["evidence"]
    assert_absent(checked, "input_bound", "few_workers", "healthy", "batch_headroom")
    assert checked.status == 1


# ---- a real torch loop with gpusight.torch ----

def torch_job(runtime: Path, *args: str, nice: int = 0) -> subprocess.Popen:
    """``python -m gpusight.examples.train ARGS`` on one torch thread, with its status record under ``runtime``."""
    env = dict(os.environ, XDG_RUNTIME_DIR=str(runtime), OMP_NUM_THREADS="1")
    return subprocess.Popen(["nice", "-n", str(nice), sys.executable, "-m", "gpusight.examples.train", "--width", "32",
                             "--depth", "1", "--duration", "300", "--report-every", "60", *args],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_a_real_torch_loop_gets_its_measured_wait_and_autocast_cited(tmp_path, fake_nvml_lib):
    pytest.importorskip("torch")
    from gpusight.backends.host.trainer_status import StatusFormatError, parse_status

    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    jobs = [torch_job(runtime, "--io-ms", "100", "--num-workers", "3", "--batch-size", "8"),  # workers sleep on "reads"
            torch_job(runtime, "--num-workers", "0", "--batch-size", "64", nice=19)]  # fast data, fp32 (autocast off)

    def active(job: subprocess.Popen) -> bool:
        try:
            record = parse_status((runtime / "gpusight" / f"{job.pid}.json").read_bytes())
        except (OSError, StatusFormatError):
            return False
        return record.active and (record.window_seconds or 0.0) >= 1.0

    try:
        for job in jobs:
            wait_until(lambda job=job: active(job), "the job's gpusight.torch record", timeout=90)
        starved, fast = jobs
        gpus = [FakeGpu(util_gpu=Sine(20.0, 4.0, 1700), mem_used=30 * GIB, compute_processes=[(starved.pid, 29 * GIB)]),
                FakeGpu(name="NVIDIA A100-SXM4-80GB", compute_capability=(8, 0), util_gpu=Sine(90.0, 3.0, 2300),
                        mem_used=60 * GIB, compute_processes=[(fast.pid, 59 * GIB)])]
        checked = check(tmp_path, fake_nvml_lib, gpus, duration=10, env=dict(os.environ, XDG_RUNTIME_DIR=str(runtime)))
    finally:
        for job in jobs:
            kill_tree(job.pid)
            job.wait()
    [row] = [p for p in checked.data["processes"] if p["pid"] == starved.pid]
    wait = row["input_wait_percent"]
    assert wait >= 30 and row["loader_num_workers"] == 3  # starved by the rules' input_wait_percent
    bound = checked.standing("input_bound:gpu0")
    assert bound["severity"] == "warn"
    found = re.search(rf"GPU 0's trainer \(PID {starved.pid}\) waits (\d+) % of each step for data "
                      r"\(measured by gpusight.torch\)", bound["evidence"])
    assert found and abs(int(found.group(1)) - wait) <= 1, bound["evidence"]
    assert "workers not CPU-bound" in bound["title"] and "CPU-bound data loading" not in bound["title"]
    precision = checked.standing("mixed_precision:gpu1")
    assert precision["severity"] == "info"
    found = re.match(rf"autocast off \(gpusight.torch\) in PID {fast.pid} at (\d+) % util", precision["evidence"])
    assert found and 85 <= int(found.group(1)) <= 95, precision["evidence"]
    assert checked.data["devices"][1]["sm_active_percent"] is None  # no GPM on this A100: autocast alone tells
    assert "(compute capability 8.0)" in precision["evidence"] and "torch.bfloat16" in precision["action"]
    assert checked.job_of(starved.pid)["id"] != checked.job_of(fast.pid)["id"]  # two runs, not one job
    assert_absent(checked, "few_workers", "gpu_underused", "batch_headroom", "launch_bound", "straggler")
    assert "mixed_precision:gpu0" not in checked.advice  # an input-bound GPU gets no tuning advice
    assert checked.status == 1


# ---- jobs that publish their speed (gpusight.torch records) ----

H100_BF16 = {"peak_tflops": 989.5, "peak_source": "NVIDIA H100 datasheet (SXM), BF16 dense", "math_mode": "bf16",
             "flops_source": "6N", "batch_size_source": "batch"}
"""The speed section's fixed part for a bf16 trainer on an H100 SXM that estimates its FLOPs as 6·N·tokens."""


def bf16_speed(achieved: float, tokens: float = 24_000.0, samples: float = 24.0) -> dict:
    """A record's speed section reaching ``achieved`` TFLOP/s of the H100's bf16 peak."""
    return {**H100_BF16, "samples_per_second": samples, "tokens_per_second": tokens,
            "flops_per_step": achieved * 1e12 / 3.0, "achieved_tflops": achieved,
            "flops_utilization_fraction": achieved / H100_BF16["peak_tflops"]}


def job_advice(checked: Checked, rule: str, pid: int, severity: str = "warn") -> tuple[dict, dict]:
    """The job of GPU process ``pid`` and the advice of ``rule`` standing for it, whose severity must be ``severity``."""
    job = checked.job_of(pid)
    advice = checked.standing(f"{rule}:job{job['id']}")
    assert advice["severity"] == severity, advice
    return job, advice


def test_an_input_bound_job_that_publishes_its_speed_is_told_what_the_fix_gains(tmp_path, fake_nvml_lib):
    with fake_trainer(tmp_path, workers=("sleep", "sleep", "sleep")) as trainer:
        record = speed_record(trainer.pid, wait=0.38, steps=2.0, speed=bf16_speed(60.0),
                              loader={"num_workers": 3, "pin_memory": True})
        with published(tmp_path / "run", {trainer.pid: record}) as env:
            gpu = FakeGpu(util_gpu=Sine(23.0, 4.0, 1700), mem_used=30 * GIB, compute_processes=[(trainer.pid, 29 * GIB)])
            checked = check(tmp_path, fake_nvml_lib, [gpu], duration=8, env=env)
    [row] = [p for p in checked.data["processes"] if p["pid"] == trainer.pid]
    assert (row["input_wait_percent"], row["flops_utilization_percent"]) == (38.0, pytest.approx(6.06, abs=0.01))
    advice = checked.standing("input_bound:gpu0")
    assert advice["severity"] == "warn"
    assert (f"GPU 0's trainer (PID {trainer.pid}) waits 38 % of each step for data (measured by gpusight.torch): "
            "up to 1.6x steps/s without it") in advice["evidence"]
    assert "pin_memory" not in advice["action"]  # already set, as the record says
    assert_absent(checked, "low_mfu", "few_workers", "gpu_underused", "healthy")  # the wait explains the low MFU
    assert checked.status == 1


def test_a_job_at_full_utilization_and_low_mfu_gets_compute_actions(tmp_path, fake_nvml_lib):
    with fake_trainer(tmp_path, workers=("sleep", "sleep", "sleep")) as trainer:
        breakdown = {"data": 0.02, "compute": 0.6, "communication": 0.0, "copy": 0.01, "idle": 0.37, "source": "device"}
        record = speed_record(trainer.pid, wait=0.02, steps=3.0, speed=bf16_speed(40.0), breakdown=breakdown,
                              cuda={"device": 0, "peak_bytes": 12 * GIB, "reserved_bytes": 14 * GIB}, autocast=True)
        with published(tmp_path / "run", {trainer.pid: record}) as env:
            gpu = busy_gpu(trainer.pid, 0, util=99.0, used=16.0)
            checked = check(tmp_path, fake_nvml_lib, [gpu], duration=8, env=env)
    job, advice = job_advice(checked, "low_mfu", trainer.pid)
    assert advice["title"] == f"Job {job['id']} reaches 4 % MFU: its compute is slow, not its input"
    assert advice["evidence"].startswith("MFU 4 % (40.0 of 989.5 TFLOP/s peak, gpusight.torch), below the 30 % "
                                         "expected of a token model; 24000 tokens/s, 3 steps/s; data wait 2 % and "
                                         "exposed communication 0 % of each step"), advice["evidence"]
    action = advice["action"]
    order = ["torch.compile", "a larger batch: peak CUDA memory 12.0 GiB of 80.0 GiB (15 %)",
             "scaled_dot_product_attention", "fused=True"]
    assert [action.index(text) for text in order] == sorted(action.index(text) for text in order), action
    assert "the step is idle 37 % of its time" in action and "train in bf16" not in action
    assert_absent(checked, "healthy", "input_bound", "mixed_precision")  # 99 % busy, but not fine
    assert checked.status == 1


def test_a_ddp_job_whose_measured_communication_is_40_percent_gets_the_measurement_and_its_gain(tmp_path, fake_nvml_lib):
    with torchrun_job(tmp_path, nproc=4) as launched:
        records = {}
        for rank, pid in enumerate(launched.ranks):
            comm = 0.39 if rank % 2 else 0.41
            breakdown = {"data": 0.02, "compute": 0.5, "communication": comm, "copy": 0.01, "idle": 0.48 - comm,
                         "source": "device"}
            records[pid] = speed_record(pid, steps=1.5, speed=bf16_speed(300.0), breakdown=breakdown)
        with published(tmp_path / "run", records) as env:
            gpus = [busy_gpu(pid, rank, util=97.0) for rank, pid in enumerate(launched.ranks)]  # no GPM, no NVLink
            checked = check(tmp_path, fake_nvml_lib, gpus, duration=8, env=env)
    job, advice = job_advice(checked, "comm_bound", launched.ranks[0])
    assert job["pids"] == launched.ranks
    assert advice["title"] == f"Job {job['id']} spends 40 % of each step communicating (measured)"
    assert advice["evidence"].startswith("exposed communication takes 40 % of each step (measured on 4 of 4 ranks): "
                                         "up to 1.7x steps/s without it; step time: data wait 2 %, compute 50 %, "
                                         "communication 40 %"), advice["evidence"]
    assert "no_sync" in advice["action"]
    assert_absent(checked, "healthy", "low_mfu", "launch_bound", "straggler")
    assert checked.status == 1


def test_a_stuck_ddp_job_is_named_stuck_not_busy(tmp_path, fake_nvml_lib):
    """A collective waits for a rank that died: every GPU reads 100 % at idle power, ~1 % SMs, no traffic, and the
    ranks' records count no steps."""
    with torchrun_job(tmp_path, nproc=4) as launched:
        records = {pid: speed_record(pid, wait=0.0, steps=0.0) for pid in launched.ranks}
        with published(tmp_path / "run", records) as env:
            gpus = [FakeGpu(util_gpu=Sine(99.5, 0.5, 1900 + 70 * rank, 40 * rank), mem_used=60 * GIB,
                            power_mw=Sine(76_000, 3_000, 3100, 90 * rank), gpm_supported=1,
                            gpm={SM_ACTIVE: Sine(1.0, 0.4, 2300, 60 * rank), ANY_TENSOR: 0.0},
                            pcie_tx_rate=Sine(2.0e5, 1.0e5, 2700), pcie_rx_rate=Sine(3.0e5, 1.0e5, 2900),
                            compute_processes=[(pid, 59 * GIB)])
                    for rank, pid in enumerate(launched.ranks)]
            checked = check(tmp_path, fake_nvml_lib, gpus, duration=8, env=env)
    job, advice = job_advice(checked, "stuck", launched.ranks[0], "critical")
    assert advice["title"].startswith(f"Job {job['id']} looks stuck")
    found = re.match(r"4 ranks at (\d+)(-\d+)? % util, power (\d+)(-\d+)? W \((\d+)(-\d+)? % of the limit, near idle\), "
                     r"SMs active \d+(-\d+)? % \(GPM\), PCIe/NVLink traffic at most \S+ each way and 0 steps/s "
                     r"\(gpusight.torch\)", advice["evidence"])
    assert found and int(found.group(1)) >= 98 and 70 <= int(found.group(3)) <= 80, advice["evidence"]
    assert "py-spy dump --pid" in advice["action"] and " ".join(map(str, sorted(launched.ranks))) in advice["action"]
    assert "TORCH_NCCL_ASYNC_ERROR_HANDLING=1" in advice["action"] and "NCCL_DEBUG=INFO" in advice["action"]
    assert_absent(checked, "healthy", "launch_bound", "comm_bound", "straggler", "low_mfu")
    assert checked.status == 2
