"""Job grouping and workload kinds from evidence: command lines matched by program, hints, ids, filters, the demo."""

import hashlib

import pytest

from gpusight.demo.source import DemoSource
from gpusight.facts.gpu_selection import GpuSelection, SelectedGpu, select_gpus
from gpusight.facts.jobs import JobTracker, ProcessHints, cluster_key, group_jobs, trim_jobs
from gpusight.facts.workload import classify, parse_command, split_cmdline
from gpusight.sampling.filters import UserFilter
from gpusight.snapshot.model import (
    Advice,
    ContainerRuntime,
    ContainerSample,
    DeviceSample,
    ProcessSample,
    Severity,
    Snapshot,
    SourceKind,
    WorkloadKind,
)

TRAINING, INFERENCE, NOTEBOOK, UNKNOWN = (WorkloadKind.TRAINING, WorkloadKind.INFERENCE, WorkloadKind.NOTEBOOK,
                                          WorkloadKind.UNKNOWN)


def kind_of(cmdline: str, parent: str | None = None, **kwargs) -> WorkloadKind:
    command = parse_command(split_cmdline(cmdline))
    return classify(command, parse_command(parent.split()) if parent else None, **kwargs).kind


@pytest.mark.parametrize(("cmdline", "kind"), [
    ("/usr/bin/vllm serve meta-llama/Llama-3-8B --port 8000", INFERENCE),
    ("python /home/u/.local/bin/vllm serve some/model", INFERENCE),
    ("python -m vllm.entrypoints.openai.api_server --model m", INFERENCE),
    ("text-generation-launcher --model-id m", INFERENCE),
    ("python3 -m sglang.launch_server --model m", INFERENCE),
    ("/opt/tritonserver/bin/tritonserver --model-repository /models", INFERENCE),
    ("lmdeploy serve api_server m", INFERENCE),
    ("llama-server -m model.gguf", INFERENCE),
    ("/opt/conda/bin/python -m ipykernel_launcher -f /run/kernel-1.json", NOTEBOOK),
    ("python train.py --note vllm", UNKNOWN),
    ("python train.py serve", UNKNOWN),
    ("python -c 'import vllm; serve()'", UNKNOWN),
    ("vllm bench --model m", UNKNOWN),
    ("python -m vllmx.server", UNKNOWN),
    ("/tmp/vllm-serve/train.py", UNKNOWN),
])
def test_command_lines_tell_a_kind_by_their_program_never_by_a_word_anywhere(cmdline, kind):
    assert kind_of(cmdline) == kind


@pytest.mark.parametrize(("parent", "kind"), [
    ("/usr/bin/python3 /usr/local/bin/torchrun --nproc_per_node=8 train.py", TRAINING),
    ("python -m torch.distributed.run --nproc-per-node 2 train.py", TRAINING),
    ("accelerate launch train.py", TRAINING),
    ("accelerate config", UNKNOWN),
    ("mpirun -np 8 python train.py", TRAINING),
    ("/opt/conda/bin/python /opt/conda/bin/jupyter-lab --no-browser", NOTEBOOK),
    ("-bash", UNKNOWN),
])
def test_a_parent_tells_the_kind_when_the_process_itself_does_not(parent, kind):
    assert kind_of("python train.py", parent) == kind


def test_environment_and_behaviour_tell_a_kind_in_evidence_order():
    assert kind_of("python train.py", env={"RANK": "0", "WORLD_SIZE": "2"}) == TRAINING
    assert kind_of("python x.py", env={"JPY_PARENT_PID": "10"}) == NOTEBOOK
    assert kind_of("python x.py", has_workers=True, listen_port=8000) == TRAINING
    assert kind_of("python x.py", has_status=True) == TRAINING
    assert kind_of("python x.py", listen_port=8000) == INFERENCE
    assert kind_of("python -m ipykernel_launcher -f k.json", has_workers=True) == NOTEBOOK
    assert kind_of("vllm serve m", env={"RANK": "0"}) == INFERENCE


def gpu(pid, device, ppid=None, cmdline="python train.py", workers=None):
    return ProcessSample(pid=pid, device_index=device, ppid=ppid, cmdline=cmdline, create_time=100.0 + pid,
                         num_workers=workers)


def rank_env(rank, size=2, port="29500", run="r1"):
    return {"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": port, "RANK": str(rank), "WORLD_SIZE": str(size),
            "TORCHELASTIC_RUN_ID": run}


SHELL = ProcessHints(env={}, parent_name="bash", parent_argv=("-bash",))


def test_same_rendezvous_is_one_job_in_rank_order_whatever_the_parents():
    rows = [gpu(11, 0, ppid=5), gpu(12, 1, ppid=6), gpu(13, 2, ppid=7)]
    hints = {11: ProcessHints(env=rank_env(1)), 12: ProcessHints(env=rank_env(0)),
             13: ProcessHints(env=rank_env(0, port="29501"))}
    grouping = group_jobs(rows, hints, JobTracker())
    first, second = grouping.jobs
    assert (first.pids, first.devices, first.world_size, first.kind) == ((12, 11), (0, 1), 2, TRAINING)
    assert first.evidence.startswith("2 ranks share MASTER_ADDR:MASTER_PORT=10.0.0.1:29500; WORLD_SIZE=2")
    assert second.pids == (13,)
    assert grouping.places == {11: (1, 1), 12: (1, 0), 13: (2, 0)}


def test_shells_and_session_managers_do_not_make_a_job_but_other_parents_do():
    rows = [gpu(11, 0, ppid=5), gpu(12, 1, ppid=5), gpu(21, 2, ppid=8), gpu(22, 3, ppid=8), gpu(31, 4, ppid=9),
            gpu(32, 5, ppid=9, cmdline="python -m ipykernel_launcher -f k.json")]
    jupyter = ProcessHints(parent_name="python3", parent_argv=("python3", "/usr/bin/jupyter-lab"))
    spawner = ProcessHints(parent_name="python", parent_argv=("python", "train.py"))
    hints = {11: SHELL, 12: SHELL, 21: spawner, 22: spawner, 31: jupyter, 32: jupyter}
    jobs = group_jobs(rows, hints, JobTracker()).jobs
    assert [job.pids for job in jobs] == [(11,), (12,), (21, 22), (31,), (32,)]
    assert jobs[2].evidence == "2 GPU processes share parent train.py (PID 8); nothing tells its kind"
    assert jobs[4].kind == NOTEBOOK


def test_runs_a_python_driver_started_with_different_command_lines_are_separate_jobs():
    driver = ProcessHints(parent_name="python", parent_argv=("python", "sweep.py"))
    spawned = "python -c 'from multiprocessing.spawn import spawn_main; spawn_main(pipe_handle={})' " \
              "--multiprocessing-fork"
    rows = [gpu(11, 0, ppid=8, cmdline="python train.py --lr 1e-3"),
            gpu(12, 1, ppid=8, cmdline="python train.py --lr 3e-4"),
            gpu(21, 2, ppid=9, cmdline="python run.py --seed 1"),
            gpu(22, 3, ppid=9, cmdline="python run.py --seed 1"),
            gpu(31, 4, ppid=7, cmdline=spawned.format(5)), gpu(32, 5, ppid=7, cmdline=spawned.format(7)),
            gpu(41, 6, ppid=6, cmdline="VLLM::Worker_TP0"), gpu(42, 7, ppid=6, cmdline="VLLM::Worker_TP1")]
    spawner = ProcessHints(parent_name="python", parent_argv=("python", "train.py"))
    engine = ProcessHints(parent_name="VLLM::EngineCor", parent_argv=("VLLM::EngineCore",))
    hints = {11: driver, 12: driver, 21: driver, 22: driver, 31: spawner, 32: spawner, 41: engine, 42: engine}
    jobs = group_jobs(rows, hints, JobTracker()).jobs
    assert [job.pids for job in jobs] == [(11,), (12,), (21, 22), (31, 32), (41, 42)]


def test_a_parent_on_a_gpu_joins_its_gpu_children():
    rows = [gpu(10, 0, ppid=5, cmdline="vllm serve m"), gpu(11, 1, ppid=10, cmdline="python -c x")]
    hints = {10: SHELL, 11: ProcessHints(parent_name="vllm", parent_argv=("vllm", "serve", "m"))}
    [job] = group_jobs(rows, hints, JobTracker()).jobs
    assert (job.pids, job.devices, job.kind) == ((10, 11), (0, 1), INFERENCE)


def test_behaviour_on_the_network_counts_only_for_a_lone_process():
    rows = [gpu(11, 0, ppid=8), gpu(12, 1, ppid=8)]
    spawner = ProcessHints(parent_name="python", parent_argv=("python", "train.py"))
    hints = {11: ProcessHints(parent_name="python", parent_argv=("python", "train.py"), listen_port=29500), 12: spawner}
    [job] = group_jobs(rows, hints, JobTracker()).jobs
    assert job.kind == UNKNOWN


def test_tracker_ids_are_stable_numbered_by_first_sight_and_never_reused_after_the_grace():
    tracker = JobTracker(grace=2)
    assert tracker.ids(["a", "b"]) == [1, 2]
    assert tracker.ids(["b", "c"]) == [2, 3]
    assert tracker.ids(["c"]) == [3]
    assert tracker.ids(["a", "b"]) == [4, 2]  # "a" was gone for 2 polls: a new job; "b" for 1: the same


def two_jobs_snapshot():
    rows = (gpu(11, 0, ppid=5), gpu(12, 1, ppid=5), gpu(13, 1, ppid=6), gpu(13, 2, ppid=6))
    hints = {11: ProcessHints(env=rank_env(0)), 12: ProcessHints(env=rank_env(1)), 13: SHELL}
    grouping = group_jobs(rows, hints, JobTracker())
    rows = tuple(r if r.pid != 11 else ProcessSample(**{**{f: getattr(r, f) for f in r.__slots__}, "user": "ann"})
                 for r in grouping.apply(rows))
    advice = tuple(Advice(f"r:{scope}", Severity.WARN, scope, "t", "e", "a") for scope in ("job1", "job2", "gpu0"))
    return Snapshot(timestamp=1.0, source=SourceKind.DEMO, devices=tuple(DeviceSample(index=i) for i in range(3)),
                    processes=rows, jobs=grouping.jobs, advice=advice)


def test_gpu_selection_trims_jobs_and_keeps_advice_of_jobs_with_a_gpu_shown():
    snapshot = two_jobs_snapshot()
    shown = select_gpus(snapshot, GpuSelection((SelectedGpu(1),)))
    assert [(j.id, j.pids, j.devices) for j in shown.jobs] == [(1, (12,), (1,)), (2, (13,), (1,))]
    only_two = select_gpus(snapshot, GpuSelection((SelectedGpu(2),)))
    assert [(j.id, j.pids, j.devices) for j in only_two.jobs] == [(2, (13,), (2,))]
    assert [a.scope for a in only_two.advice] == ["job2"]


def test_the_user_view_keeps_only_the_users_part_of_jobs_and_their_advice():
    view = UserFilter("ann").apply(two_jobs_snapshot())
    assert [(j.id, j.pids, j.devices) for j in view.jobs] == [(1, (11,), (0,))]
    assert [a.scope for a in view.advice] == ["job1", "gpu0"]
    assert trim_jobs(view.jobs, ()) == ()


def test_demo_jobs_come_from_the_same_grouping_with_hints_from_the_scenario():
    snapshot = DemoSource("mixed").poll()
    kinds = [(job.id, job.kind, job.devices) for job in snapshot.jobs]
    assert kinds == [(1, TRAINING, (0, 1, 2, 3)), (2, TRAINING, (4,)), (3, NOTEBOOK, (5,)), (4, TRAINING, (6,)),
                     (5, TRAINING, (7,))]
    alice = snapshot.jobs[0]
    assert alice.world_size == 4 and alice.launcher_pid is not None
    assert alice.evidence == f"torchrun (PID {alice.launcher_pid}) started 4 ranks; WORLD_SIZE=4"
    ranks = [(p.job, p.rank) for p in snapshot.processes if p.role == "gpu" and p.device_index in range(4)]
    assert ranks == [(1, 0), (1, 1), (1, 2), (1, 3)]
    assert snapshot.jobs[2].evidence == "Jupyter kernel (command line)"
    assert all(p.job is None for p in snapshot.processes if p.role == "dataloader_worker")


def test_recordings_made_before_jobs_replay_without_jobs():
    import gzip
    import json
    from pathlib import Path

    from gpusight.recordings.replay import ReplaySource

    path = Path(__file__).parent / "data" / "real-h100" / "two-processes.jsonl.gz"
    with gzip.open(path, "rt") as handle:
        first = json.loads(handle.readline())
    assert first["schema"] == 1 and "jobs" not in first
    source = ReplaySource(path)
    snapshots = []
    while not source.finished:
        snapshots.append(source.poll())
    assert any(s.processes for s in snapshots)
    assert all(s.jobs == () for s in snapshots)
    assert all(p.job is None and p.rank is None for s in snapshots for p in s.processes)


def test_json_and_recordings_carry_the_jobs_and_replay_keeps_them(tmp_path):
    import json
    import subprocess
    import sys

    recording = tmp_path / "rec.jsonl"
    run = [sys.executable, "-m", "gpusight", "--demo", "idle-holding"]
    live = subprocess.run([*run, "--record", str(recording), "--duration", "0.4", "--interval", "0.2", "--json"],
                          capture_output=True, text=True, timeout=60, check=True)
    replayed = subprocess.run([sys.executable, "-m", "gpusight", "--replay", str(recording), "--json"],
                              capture_output=True, text=True, timeout=60, check=True)
    jobs = json.loads(live.stdout)["jobs"]
    assert [(j["id"], j["kind"], j["devices"]) for j in jobs] == [(1, "notebook", [0]), (2, "training", [1, 2])]
    assert json.loads(replayed.stdout)["jobs"] == jobs
    processes = json.loads(replayed.stdout)["processes"]
    rows = [(p["device_index"], p["job"], p["rank"]) for p in processes if p["role"] == "gpu"]
    assert rows == [(0, 1, None), (1, 2, 0), (2, 2, 1)]


POD_CONTAINER = ContainerSample(ContainerRuntime.CONTAINERD, "a" * 64, name="train-0",
                                pod_uid="1b2c3d4e-5f6a-4b8c-9d0e-1f2a3b4c5d6e",
                                pod_namespace="ml")


def test_cluster_key_prefers_slurm_then_the_rendezvous_hash_then_the_pod():
    rendezvous = ProcessHints(env=rank_env(0))
    expected_hash = "rdzv:" + hashlib.sha256(b"10.0.0.1:29500:r1").hexdigest()[:12]
    assert cluster_key([rendezvous]) == expected_hash
    assert cluster_key([ProcessHints(env={"MASTER_ADDR": "h", "MASTER_PORT": "1"})]) == \
        "rdzv:" + hashlib.sha256(b"h:1").hexdigest()[:12]
    in_pod = ProcessHints(env=rank_env(0), container=POD_CONTAINER)
    assert cluster_key([in_pod]) == expected_hash  # the pods of one job on several nodes share its rendezvous
    assert cluster_key([ProcessHints(container=POD_CONTAINER)]) == "pod:ml/train-0"
    for loopback in ("127.0.0.1", "localhost", "::1", "127.0.1.1"):  # every node has its own 127.0.0.1:29500
        local = ProcessHints(env={"MASTER_ADDR": loopback, "MASTER_PORT": "29500"}, container=POD_CONTAINER)
        assert cluster_key([local]) == "pod:ml/train-0"
        assert cluster_key([ProcessHints(env={"MASTER_ADDR": loopback, "MASTER_PORT": "29500"})]) is None
    slurm_env = ProcessHints(env={**rank_env(1), "SLURM_JOB_ID": "812"})
    assert cluster_key([in_pod, slurm_env]) == "slurm:812"
    slurm_cgroup = ProcessHints(container=ContainerSample(ContainerRuntime.SLURM, slurm_job_id="813"))
    assert cluster_key([slurm_cgroup]) == "slurm:813"
    unnamed_pod = ProcessHints(container=ContainerSample(ContainerRuntime.CRIO, "b" * 64, pod_uid="u"))
    assert cluster_key([unnamed_pod, SHELL]) is None
    assert cluster_key([ProcessHints(env={"SLURM_JOB_ID": "x; reboot"})]) is None


def test_jobs_carry_their_cluster_key():
    rows = [gpu(11, 0, ppid=5), gpu(12, 1, ppid=5)]
    hints = {11: ProcessHints(env=rank_env(0)), 12: ProcessHints(env=rank_env(1))}
    [job] = group_jobs(rows, hints, JobTracker()).jobs
    assert job.cluster_key == "rdzv:" + hashlib.sha256(b"10.0.0.1:29500:r1").hexdigest()[:12]


def test_children_of_one_parent_in_different_containers_or_slurm_jobs_are_different_jobs():
    spawner = ProcessHints(parent_name="python", parent_argv=("python", "train.py"))
    rows = [gpu(11, 0, ppid=8), gpu(12, 1, ppid=8), gpu(13, 2, ppid=8), gpu(14, 3, ppid=8)]
    job_a = ContainerSample(ContainerRuntime.SLURM, slurm_job_id="1")
    job_b = ContainerSample(ContainerRuntime.SLURM, slurm_job_id="2")
    hints = {11: ProcessHints(parent_name="python", parent_argv=("python", "train.py"), container=job_a),
             12: ProcessHints(parent_name="python", parent_argv=("python", "train.py"), container=job_a),
             13: ProcessHints(parent_name="python", parent_argv=("python", "train.py"), container=job_b),
             14: spawner}
    jobs = group_jobs(rows, hints, JobTracker()).jobs
    assert [(job.pids, job.cluster_key) for job in jobs] == [((11, 12), "slurm:1"), ((13,), "slurm:2"), ((14,), None)]
