"""Containers on screen and in outputs: the CONTAINER column (its forms, its place at 80 columns, sort and filter),
``--once``, the Markdown report and the Enter popup, with hostile host names escaped."""

from __future__ import annotations

import dataclasses

import pytest
from test_process_table import TableApp, gpu, job, lines, pids, rows, synchronously, worker

from gpusight.job_text import container_facts, container_labels
from gpusight.oneshot import render_once
from gpusight.sampling.history import History
from gpusight.snapshot.model import ContainerRuntime, ContainerSample, Snapshot, SourceKind, WorkloadKind
from gpusight.snapshot_export.markdown import render_markdown
from gpusight.ui.detail.process_detail import process_summary
from gpusight.ui.main.process_table import ProcessTable

GIB = 2**30
DOCKER_ID = "3f2a9c1b4d5e" + "a" * 52
CTRD_ID = "9c1b2a3d4e5f" + "b" * 52
POD_UID = "1b2c3d4e-5f6a-4b8c-9d0e-1f2a3b4c5d6e"

DOCKER = ContainerSample(ContainerRuntime.DOCKER, DOCKER_ID, name="3f2a9c1b4d5e", pid_in_container=1)
POD = ContainerSample(ContainerRuntime.CONTAINERD, CTRD_ID, name="trainer-worker-0", pod_uid=POD_UID,
                      pod_namespace="ml-team", pid_in_container=7)
SLURM = ContainerSample(ContainerRuntime.SLURM, slurm_job_id="4242")
PIDNS = ContainerSample(ContainerRuntime.NAMESPACE, pid_in_container=1)
PODMAN = ContainerSample(ContainerRuntime.PODMAN, "c" * 64)
CTRD = ContainerSample(ContainerRuntime.CONTAINERD, "d" * 64)

CONTAINERS = Snapshot(
    timestamp=1_700_000_000.0,
    source=SourceKind.DEMO,
    processes=(
        gpu(100, 0, user="root", cmdline="python train.py", container=POD, job=1, rank=0, num_workers=1,
            gpu_memory_bytes=20 * GIB),
        worker(101, 100, 0, name="pt_data_worker"),
        gpu(200, 1, user="root", cmdline="python serve.py", container=DOCKER, job=2, gpu_memory_bytes=10 * GIB),
        gpu(300, 2, user="alice", cmdline="python sweep.py", container=SLURM, job=3, gpu_memory_bytes=5 * GIB),
        gpu(400, 3, user="bob", cmdline="python sandbox.py", container=PIDNS, job=4, gpu_memory_bytes=4 * GIB),
        gpu(500, 4, user="carol", cmdline="python host.py", job=5, gpu_memory_bytes=3 * GIB),
        gpu(600, 5, user="root", cmdline="python pm.py", container=PODMAN, job=6, gpu_memory_bytes=2 * GIB),
        gpu(700, 6, user="root", cmdline="python ctr.py", container=CTRD, job=7, gpu_memory_bytes=1 * GIB),
    ),
    jobs=(
        job(1, WorkloadKind.TRAINING, (100,), (0,), world_size=16, cluster_key="pod:ml-team/trainer-worker-0"),
        job(2, WorkloadKind.INFERENCE, (200,), (1,)),
        job(3, WorkloadKind.TRAINING, (300,), (2,), cluster_key="slurm:4242"),
        job(4, WorkloadKind.UNKNOWN, (400,), (3,)),
        job(5, WorkloadKind.UNKNOWN, (500,), (4,)),
        job(6, WorkloadKind.UNKNOWN, (600,), (5,)),
        job(7, WorkloadKind.UNKNOWN, (700,), (6,)),
    ),
)


@pytest.mark.parametrize(("container", "labels"), [
    (DOCKER, ("docker 3f2a9c1b4d5e", "docker 3f2a9c1b", "3f2a9c1b4d5e", "3f2a9c1b")),
    (CTRD, ("containerd dddddddddddd", "containerd dddddddd", "dddddddddddd", "dddddddd")),
    (POD, ("trainer-worker-0",)),
    (dataclasses.replace(POD, name=None), ("pod 1b2c3d4e", "1b2c3d4e")),
    (SLURM, ("slurm 4242", "4242")),
    (PIDNS, ("pidns",)),
])
def test_container_labels_longest_first(container: ContainerSample, labels: tuple[str, ...]) -> None:
    assert container_labels(container) == labels


def test_container_facts_tell_everything_known() -> None:
    assert container_facts(POD) == (f"containerd container {CTRD_ID}, pod ml-team/trainer-worker-0 (UID {POD_UID}), "
                                    "PID 7 inside")
    assert container_facts(DOCKER) == f"docker container {DOCKER_ID}, host name 3f2a9c1b4d5e, PID 1 inside"
    assert container_facts(SLURM) == "Slurm job 4242"
    assert container_facts(PIDNS) == "own PID namespace, PID 1 inside"
    in_job = dataclasses.replace(DOCKER, slurm_job_id="77", pid_in_container=None)
    assert container_facts(in_job) == f"docker container {DOCKER_ID}, host name 3f2a9c1b4d5e, Slurm job 77"


def container_cells(table: ProcessTable) -> dict[int, str]:
    """The CONTAINER column's text of each displayed process, by pid, read from the screen lines."""
    header = lines(table)[0]
    start = header.index("CONTAINER")
    end = min(header.index(label, start) for label in ("JOB", "GPU MEM") if label in header[start:])
    return {pid: line[start:end].strip() for pid, line in zip(pids(table), rows(table), strict=True)}


@synchronously
async def test_the_container_column_at_160_columns():
    app = TableApp()
    async with app.run_test(size=(160, 20)) as pilot:
        table = app.query_one(ProcessTable)
        table.update_snapshot(CONTAINERS)
        await pilot.pause()
        header = lines(table)[0]
        assert header.index("USER") < header.index("CONTAINER") < header.index("JOB") < header.index("GPU MEM")
        assert container_cells(table) == {
            100: "trainer-worker-0", 101: "", 200: "docker 3f2a9c1b4d5e", 300: "slurm 4242", 400: "pidns", 500: "",
            600: "podman cccccccccccc", 700: "containerd dddddddd",
        }


@synchronously
async def test_at_80_columns_the_container_stays_compact_and_user_and_job_give_way():
    app = TableApp()
    async with app.run_test(size=(80, 20)) as pilot:
        table = app.query_one(ProcessTable)
        table.update_snapshot(CONTAINERS)
        await pilot.pause()
        header = lines(table)[0]
        assert "CONTAINER" in header and "USER" not in header and "JOB" not in header, header
        assert "GPU MEM" in header and "CPU %" in header and "COMMAND" in header
        cells = container_cells(table)
        assert (cells[100], cells[200], cells[300], cells[600]) == ("trainer-wor…", "3f2a9c1b4d5e", "slurm 4242",
                                                                     "cccccccccccc")
        assert "python train.py" in rows(table)[0]
        assert all(len(line) <= 80 for line in lines(table))
        without = dataclasses.replace(CONTAINERS, processes=tuple(dataclasses.replace(p, container=None)
                                                                  for p in CONTAINERS.processes))
        table.update_snapshot(without, at_once=True)
        await pilot.pause()
        assert "CONTAINER" not in lines(table)[0] and "JOB" in lines(table)[0]  # as before containers: ranks first


@synchronously
async def test_sorting_by_container_groups_them_and_hosts_go_last():
    app = TableApp()
    async with app.run_test(size=(160, 20)) as pilot:
        table = app.query_one(ProcessTable)
        table.update_snapshot(CONTAINERS)
        await pilot.pause()
        table.sort_by("container")
        await pilot.pause()
        assert pids(table) == [700, 100, 101, 200, 400, 600, 300, 500]  # containerd (by id), docker, ns, podman, slurm
        table.sort_by("container")
        assert pids(table) == [300, 600, 400, 200, 100, 101, 700, 500]


@synchronously
async def test_filtering_by_container_label_id_pod_namespace_or_slurm_job():
    app = TableApp()
    async with app.run_test(size=(160, 20)) as pilot:
        table = app.query_one(ProcessTable)
        table.update_snapshot(CONTAINERS)
        await pilot.pause()
        for text, expected in (("docker", [200]), ("ML-TEAM", [100, 101]), ("4242", [300]), ("pidns", [400]),
                               ("3f2a9c1b4d5e", [200]), ("trainer-worker", [100, 101])):
            table.set_filter(text)
            assert pids(table) == expected, text


@synchronously
async def test_a_hostile_host_name_is_shown_escaped():
    hostile = dataclasses.replace(POD, name="\x1b[31m[red]x[/red]\x07")
    snap = dataclasses.replace(CONTAINERS, processes=(gpu(100, 0, cmdline="python t.py", container=hostile),))
    app = TableApp()
    async with app.run_test(size=(160, 20)) as pilot:
        table = app.query_one(ProcessTable)
        table.update_snapshot(snap)
        await pilot.pause()
        assert container_cells(table)[100] == "[red]x[/red]?"  # the escape sequence removed, BEL shown as ?
    assert "\x1b" not in render_once(snap) and "\x07" not in render_once(snap)
    assert "\x1b" not in process_summary(snap.processes[0], {}, ascii_mode=False)


def test_once_has_a_container_column_and_the_jobs_cluster_keys() -> None:
    text = render_once(CONTAINERS, width=160)
    header = next(line for line in text.splitlines() if "COMMAND" in line)
    assert header.index("USER") < header.index("CONTAINER") < header.index("JOB")
    row = next(line for line in text.splitlines() if " 200 " in line)
    assert "docker 3f2a9c1b4d5e" in row and "python serve.py" in row
    assert "across nodes: pod:ml-team/trainer-worker-0" in text and "across nodes: slurm:4242" in text
    plain = dataclasses.replace(CONTAINERS, processes=(gpu(1, 0, cmdline="python x.py"),), jobs=())
    assert "CONTAINER" not in render_once(plain)


def test_report_lists_containers_and_cluster_keys() -> None:
    history = History(capacity=10)
    history.append(CONTAINERS)
    text = render_markdown(CONTAINERS, history)
    assert "| Container |" in text and "| trainer-worker-0 |" in text and "| docker 3f2a9c1b4d5e |" in text
    assert "| Across nodes |" in text and "slurm:4242" in text


def test_the_enter_popup_tells_the_container_and_the_pid_inside() -> None:
    jobs = {j.id: j for j in CONTAINERS.jobs}
    summary = process_summary(CONTAINERS.processes[0], jobs, ascii_mode=False)
    assert f"in containerd container {CTRD_ID}, pod ml-team/trainer-worker-0 (UID {POD_UID}), PID 7 inside" in summary
    assert "across nodes: pod:ml-team/trainer-worker-0" in summary


@synchronously
async def test_without_containers_a_narrow_table_keeps_the_compact_job():
    """At 70 columns a job with ranks keeps its compact JOB column, as before containers existed."""
    ranked = dataclasses.replace(
        CONTAINERS, processes=tuple(dataclasses.replace(p, container=None) for p in CONTAINERS.processes))
    app = TableApp()
    async with app.run_test(size=(70, 20)) as pilot:
        table = app.query_one(ProcessTable)
        table.update_snapshot(ranked)
        await pilot.pause()
        assert "JOB" in lines(table)[0] and "CONTAINER" not in lines(table)[0]
