"""Jobs and workload kinds end to end: real processes laid out like real workloads, the fake NVML, `gpusight --json`."""

import json
import os
import subprocess
import sys

import pytest

from gpusight.backends.host.source import HostSource
from gpusight.snapshot.model import ProcessSample
from support.fake_nvml import FakeGpu, FakeScenario, fake_nvml_env
from support.procs import fake_trainer, run_python_as, sleeper, wait_until
from support.workloads import SECRET_ENV, notebook_kernel, server, spawn_job, sweep, torchrun_job

GIB = 1 << 30

WHITELIST = {"MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
             "TORCHELASTIC_RUN_ID", "GROUP_RANK", "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_PROCID", "JPY_PARENT_PID"}
"""The environment variables gpusight may keep (written out here so the test does not trust the code under test)."""


def gpusight_json(tmp_path, fake_nvml_lib, gpus: list[list[int]]) -> tuple[dict, str]:
    """`gpusight --json` on fake GPUs, GPU i running the pids ``gpus[i]``; (the snapshot, the raw output)."""
    scenario = FakeScenario(gpus=[FakeGpu(compute_processes=[(pid, 4 * GIB) for pid in pids]) for pids in gpus])
    path = scenario.write(tmp_path / "scenario.txt")
    out = subprocess.run([sys.executable, "-m", "gpusight", "--json"], capture_output=True, text=True,
                         env=fake_nvml_env(fake_nvml_lib, path), timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout), out.stdout


def job_of(data: dict, pid: int) -> dict:
    [row] = {p["pid"]: p for p in data["processes"] if p["role"] == "gpu" and p["pid"] == pid}.values()
    [job] = [j for j in data["jobs"] if j["id"] == row["job"]]
    return job


def test_torchrun_launcher_with_8_ranks_is_one_training_job_in_rank_order(tmp_path, fake_nvml_lib):
    with torchrun_job(tmp_path, nproc=8) as launched:
        shuffled = launched.ranks[::-1]  # GPU i runs rank 7-i: rank order is not GPU order
        data, raw = gpusight_json(tmp_path, fake_nvml_lib, [[pid] for pid in shuffled])
    [job] = data["jobs"]
    assert job["kind"] == "training"
    assert job["pids"] == launched.ranks
    assert job["devices"] == list(range(8))
    assert job["world_size"] == 8 and job["launcher_pid"] == launched.launcher
    assert job["evidence"] == f"torchrun (PID {launched.launcher}) started 8 ranks; WORLD_SIZE=8"
    ranks = {p["pid"]: (p["job"], p["rank"]) for p in data["processes"] if p["role"] == "gpu"}
    assert ranks == {pid: (job["id"], rank) for rank, pid in enumerate(launched.ranks)}
    for secret in SECRET_ENV.values():
        assert secret not in raw
    assert not [e for e in data["errors"] if e["scope"] == "host"]


def test_a_sweep_of_one_user_is_separate_jobs(tmp_path, fake_nvml_lib):
    with sweep(tmp_path) as runs:
        pids = runs.terminals + runs.loop
        data, _ = gpusight_json(tmp_path, fake_nvml_lib, [[pid] for pid in pids])
    assert len(data["jobs"]) == 4
    assert sorted(tuple(j["pids"]) for j in data["jobs"]) == sorted((pid,) for pid in pids)
    assert len({job_of(data, pid)["id"] for pid in pids}) == 4


def test_spawn_children_of_one_script_are_one_job(tmp_path, fake_nvml_lib):
    with spawn_job(tmp_path, children=2) as (parent, children), sleeper() as other:
        data, _ = gpusight_json(tmp_path, fake_nvml_lib, [[children[0]], [children[1]], [other.pid]])
    job = job_of(data, children[0])
    assert job["pids"] == sorted(children) and job["devices"] == [0, 1]
    assert f"share parent train.py (PID {parent})" in job["evidence"]
    assert job_of(data, other.pid)["pids"] == [other.pid]


def test_one_process_on_two_gpus_is_one_data_parallel_job(tmp_path, fake_nvml_lib):
    with sleeper() as proc:
        data, _ = gpusight_json(tmp_path, fake_nvml_lib, [[proc.pid], [proc.pid]])
    [job] = data["jobs"]
    assert job["pids"] == [proc.pid] and job["devices"] == [0, 1]
    assert job["evidence"].startswith(f"DataParallel: PID {proc.pid} uses GPUs 0,1")
    assert [p["job"] for p in data["processes"]] == [job["id"], job["id"]]


def test_inference_servers_by_name_and_by_behaviour(tmp_path, fake_nvml_lib):
    with server(tmp_path, ["serve", "some/model"]) as (vllm, _), \
            server(tmp_path, ["--port", "0"], script="app.py") as (unnamed, port), \
            server(tmp_path, ["--note", "vllm"], script="train.py") as (trainer, _), \
            fake_trainer(tmp_path) as fed:
        data, _ = gpusight_json(tmp_path, fake_nvml_lib, [[vllm], [unnamed], [trainer, fed.pid]])
    named = job_of(data, vllm)
    assert (named["kind"], named["evidence"]) == ("inference", "vllm serve (command line)")
    by_port = job_of(data, unnamed)
    assert (by_port["kind"], by_port["evidence"]) == ("inference", f"listens on TCP port {port}, no DataLoader workers")
    # "vllm" as an argument of train.py is not vLLM; it listens, so it is inference by behaviour only
    assert "command line" not in job_of(data, trainer)["evidence"]
    # a trainer with DataLoader workers is training
    assert job_of(data, fed.pid)["kind"] == "training"


def test_servers_that_rename_their_processes_are_inference(tmp_path, fake_nvml_lib):
    """vLLM and SGLang retitle their GPU processes (setproctitle): the command line then reads only the title."""
    code = "import os, time\nparent = os.getppid()\nwhile os.getppid() == parent: time.sleep(0.1)"
    shells = [subprocess.Popen(["bash", "-c", f'exec -a "$0" {sys.executable} -c "$1" & echo $!; read', title, code],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
              for title in ("VLLM::Worker_TP0", "sglang::scheduler", "vllm::not_the_title")]
    try:  # each from its own shell, as separate servers are; the pid is printed once the child runs
        pids = [int(shell.stdout.readline()) for shell in shells]
        for pid, shell in zip(pids, shells, strict=True):
            title = shell.args[3]
            wait_until(lambda pid=pid, title=title: open(f"/proc/{pid}/cmdline", "rb").read().startswith(title.encode()),
                       f"{title} running")
        data, _ = gpusight_json(tmp_path, fake_nvml_lib, [[pid] for pid in pids])
    finally:
        for shell in shells:
            shell.stdin.close()
            shell.wait(timeout=10)
    vllm, sglang, lookalike = (job_of(data, pid) for pid in pids)
    assert (vllm["kind"], vllm["evidence"]) == ("inference", "vLLM server (command line)")
    assert (sglang["kind"], sglang["evidence"]) == ("inference", "SGLang server (command line)")
    assert lookalike["kind"] == "unknown"  # titles are matched as the programs write them


def test_a_kernel_started_by_a_jupyter_server_is_a_notebook(tmp_path, fake_nvml_lib):
    with notebook_kernel(tmp_path) as (_, kernel):
        data, _ = gpusight_json(tmp_path, fake_nvml_lib, [[kernel]])
    [job] = data["jobs"]
    assert job["kind"] == "notebook" and job["pids"] == [kernel]
    assert job["evidence"] == "Jupyter kernel (command line)"


@pytest.mark.parametrize("layout", ["direct", "forkserver"])
def test_dataloader_workers_attach_to_their_trainer_and_make_it_training(tmp_path, fake_nvml_lib, layout):
    with fake_trainer(tmp_path, workers=("sleep", "sleep"), layout=layout) as trainer:
        data, _ = gpusight_json(tmp_path, fake_nvml_lib, [[trainer.pid]])
    [job] = data["jobs"]
    assert (job["kind"], job["evidence"]) == ("training", "has DataLoader workers")
    workers = [p for p in data["processes"] if p["role"] == "dataloader_worker"]
    assert sorted(w["pid"] for w in workers) == trainer.workers
    assert all(w["trainer_pid"] == trainer.pid and w["job"] is None for w in workers)


_POLL_AS_OTHER_USER = """
import json, sys
from gpusight.backends.host.source import HostSource
from gpusight.snapshot.model import ProcessSample
drop()
rows = [ProcessSample(pid=int(pid), device_index=index) for index, pid in enumerate(sys.argv[1:])]
reading = HostSource().poll(rows)
print(json.dumps({"jobs": [[j.id, j.kind.value, j.evidence, list(j.pids), j.world_size, j.launcher_pid]
                           for j in reading.jobs],
                  "ranks": [[p.pid, p.job, p.rank] for p in reading.processes],
                  "errors": [e.message for e in reading.errors]}))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the monitor as another user")
def test_unreadable_environment_falls_back_to_the_launcher_without_ranks_or_errors(tmp_path):
    with torchrun_job(tmp_path, nproc=2) as launched:
        out = run_python_as(65534, 65534, _POLL_AS_OTHER_USER, [str(pid) for pid in launched.ranks])
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    [[_, kind, evidence, pids, world_size, launcher]] = data["jobs"]
    assert (kind, pids, world_size, launcher) == ("training", sorted(launched.ranks), None, launched.launcher)
    assert evidence == f"torchrun (PID {launched.launcher}) started 2 ranks"
    assert [rank for _, _, rank in data["ranks"]] == [None, None]
    assert data["errors"] == []


def test_host_source_keeps_job_ids_while_jobs_run_and_never_reuses_them(tmp_path):
    source = HostSource(process_refresh_seconds=0)
    with server(tmp_path, [], script="a.py") as (first, _), server(tmp_path, [], script="b.py") as (second, _):
        one = source.poll([ProcessSample(pid=first, device_index=0)])
        both = source.poll([ProcessSample(pid=first, device_index=0), ProcessSample(pid=second, device_index=1)])
    with server(tmp_path, [], script="c.py") as (third, _):
        later = source.poll([ProcessSample(pid=third, device_index=0)])
    assert [j.id for j in one.jobs] == [1]
    assert [(j.id, j.pids) for j in both.jobs] == [(1, (first,)), (2, (second,))]
    assert [(j.id, j.pids) for j in later.jobs] == [(3, (third,))]


def test_only_whitelisted_variables_are_read_from_an_environment(tmp_path):
    from gpusight.backends.host.procenv import read_env

    env = dict(os.environ, RANK="3", MASTER_PORT="29500", **SECRET_ENV)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    try:
        kept = wait_until(lambda: (found := read_env(proc.pid)) is not None and "RANK" in found and found, "the exec")
        assert {"RANK": "3", "MASTER_PORT": "29500"}.items() <= kept.items()
        assert set(kept) <= WHITELIST
        assert not set(SECRET_ENV.values()) & set(kept.values())
    finally:
        proc.kill()
        proc.wait()


def test_the_listening_probe_finds_the_servers_port_and_nothing_for_a_sleeper(tmp_path):
    from gpusight.backends.host.procenv import listening_port

    with server(tmp_path, [], script="app.py") as (pid, port), sleeper() as quiet:
        assert listening_port(pid) == port
        assert listening_port(quiet.pid) is None


def has_socket(pid: int) -> bool:
    """True once ``pid`` has a socket open."""
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                return True
        except OSError:  # closed meanwhile
            continue
    return False


def test_the_probe_answers_from_its_cache_until_its_period_ends():
    from gpusight.backends.host.procenv import HintReader

    code = ("import socket\nserver = socket.socket()\ninput()\nserver.bind(('127.0.0.1', 0))\nserver.listen()\n"
            "print(server.getsockname()[1], flush=True)\ninput()\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    now = [0.0]
    reader = HintReader(probe_seconds=30.0, clock=lambda: now[0])
    try:
        wait_until(lambda: has_socket(proc.pid), "the socket")
        assert reader.probe(proc.pid, None) is None  # a socket, not listening yet
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("\n")
        proc.stdin.flush()
        port = int(proc.stdout.readline())
        now[0] = 29.0
        assert reader.probe(proc.pid, None) is None  # the answer of the last probe
        now[0] = 30.0
        assert reader.probe(proc.pid, None) == port
    finally:
        proc.kill()
        proc.wait()


_DRIVER = """
import subprocess, sys, time
runs = [subprocess.Popen([sys.executable, sys.argv[1], "--lr", lr]) for lr in ("1e-3", "3e-4")]
print(" ".join(str(run.pid) for run in runs), flush=True)
sys.stdin.read()
for run in runs:
    run.kill()
"""


def test_runs_a_python_sweep_driver_starts_with_different_arguments_are_separate_jobs(tmp_path, fake_nvml_lib):
    from support.workloads import FOLLOW_PARENT

    run = tmp_path / "run.py"
    run.write_text(FOLLOW_PARENT)
    driver = subprocess.Popen([sys.executable, "-c", _DRIVER, str(run)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert driver.stdout is not None
        pids = [int(pid) for pid in driver.stdout.readline().split()]
        data, _ = gpusight_json(tmp_path, fake_nvml_lib, [[pid] for pid in pids])
    finally:
        driver.kill()
        driver.wait()
    assert sorted(tuple(j["pids"]) for j in data["jobs"]) == sorted((pid,) for pid in pids)
