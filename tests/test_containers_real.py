"""Containers end to end: real processes in real cgroups named as Docker, Kubernetes and Slurm name theirs, and in
a PID namespace of their own (``unshare --pid --fork``), listed by the fake NVML; the real ``gpusight --json``
must attribute each to its container, pod or job.

The cgroups are made under a directory of the test's own (``gpusight-test-PID``) in the hierarchies this machine
mounts, and removed afterwards. Each test skips with the reason where the machine refuses (no root, a
read-only or absent hierarchy, no ``unshare``).
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from gpusight.backends.host.containers import read_container
from gpusight.snapshot.schema import json_schema
from gpusight.snapshot.serialize import snapshot_from_dict
from support.containers import held, in_cgroup, make_root, need_root
from support.fake_nvml import FakeGpu, FakeScenario, fake_nvml_env
from support.procs import wait_until
from support.terminal import PtyGpusight

GIB = 1 << 30
DOCKER = "c7f8a5227f0bc09459dafe5e25bc2e30013dde23caf672dcd614e5c5c462fb41"
K8S = "b70246b091399fcff41136a98154cc869df25c1d8fee21604b7fc7aee112a186"
POD = "0f9e8d7c-6b5a-4c3d-8e2f-1a0b9c8d7e6f"
TOP = f"gpusight-test-{os.getpid()}"
"""The tests' own cgroup directory, so that nothing a real runtime made is touched."""


def gpusight_json(tmp_path: Path, fake_nvml_lib: Path, pids: list[int]) -> dict:
    """The snapshot ``gpusight --json`` prints with GPU i running ``pids[i]`` (4 GiB each), checked against the schema."""
    scenario = FakeScenario(gpus=[FakeGpu(compute_processes=[(pid, 4 * GIB)]) for pid in pids])
    path = scenario.write(tmp_path / "scenario.txt")
    out = subprocess.run([sys.executable, "-m", "gpusight", "--json"], capture_output=True, text=True,
                         env=fake_nvml_env(fake_nvml_lib, path), timeout=60)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    jsonschema.validate(data, json_schema())  # the containers and cluster keys fit the published schema
    snapshot_from_dict(data, complete=True)  # and read back
    return data


def row_of(data: dict, pid: int) -> dict:
    """The GPU row of ``pid``."""
    [row] = [p for p in data["processes"] if p["role"] == "gpu" and p["pid"] == pid]
    return row


def job_of(data: dict, pid: int) -> dict:
    """The job of ``pid``'s GPU row."""
    [job] = [j for j in data["jobs"] if j["id"] == row_of(data, pid)["job"]]
    return job


def test_docker_container_with_its_own_pid_namespace_and_root(tmp_path: Path, fake_nvml_lib: Path) -> None:
    need_root("chroot, unshare and cgroups")
    root = make_root(tmp_path / "root", hostname="c7f8a5227f0b\n", namespace=None)
    with held(root, pid_namespace=True) as pid, in_cgroup(pid, "v2", f"{TOP}/system.slice/docker-{DOCKER}.scope"):
        assert f"0::/{TOP}/system.slice/docker-{DOCKER}.scope" in Path(f"/proc/{pid}/cgroup").read_text()
        data = gpusight_json(tmp_path, fake_nvml_lib, [pid])
    row = row_of(data, pid)
    assert row["container"] == {"runtime": "docker", "id": DOCKER, "name": "c7f8a5227f0b", "pod_uid": None,
                                "pod_namespace": None, "slurm_job_id": None, "pid_in_container": 1}
    assert row["note"] is None and row["gpu_memory_bytes"] == 4 * GIB
    assert job_of(data, pid)["cluster_key"] is None


def test_kubernetes_pod_in_a_v1_hierarchy(tmp_path: Path, fake_nvml_lib: Path) -> None:
    need_root("chroot and cgroups")
    root = make_root(tmp_path / "root", hostname="trainer-worker-0\n", namespace="ml-team\n")
    path = f"{TOP}/kubepods/burstable/pod{POD}/{K8S}"
    with held(root) as pid, in_cgroup(pid, "pids", path):
        data = gpusight_json(tmp_path, fake_nvml_lib, [pid])
    assert row_of(data, pid)["container"] == {
        "runtime": "containerd", "id": K8S, "name": "trainer-worker-0", "pod_uid": POD, "pod_namespace": "ml-team",
        "slurm_job_id": None, "pid_in_container": None,
    }
    assert job_of(data, pid)["cluster_key"] == "pod:ml-team/trainer-worker-0"


def test_kubernetes_pod_with_the_systemd_driver_in_v2(tmp_path: Path, fake_nvml_lib: Path) -> None:
    need_root("chroot and cgroups")
    root = make_root(tmp_path / "root", hostname="infer-7d9f8-x2x4q\n", namespace="serving\n")
    slice_uid = POD.replace("-", "_")
    path = (f"{TOP}/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{slice_uid}.slice/"
            f"cri-containerd-{K8S}.scope")
    with held(root) as pid, in_cgroup(pid, "v2", path):
        data = gpusight_json(tmp_path, fake_nvml_lib, [pid])
    container = row_of(data, pid)["container"]
    assert (container["runtime"], container["id"], container["pod_uid"]) == ("containerd", K8S, POD)
    assert job_of(data, pid)["cluster_key"] == "pod:serving/infer-7d9f8-x2x4q"


def test_slurm_job_steps_in_v1_and_v2(tmp_path: Path, fake_nvml_lib: Path) -> None:
    need_root("cgroups")
    with held() as v1, held() as v2, in_cgroup(v1, "pids", f"{TOP}/slurm/uid_0/job_4242/step_0"), \
            in_cgroup(v2, "v2", f"{TOP}/slurmstepd.scope/job_4343/step_batch/user/task_0"):
        data = gpusight_json(tmp_path, fake_nvml_lib, [v1, v2])
    assert row_of(data, v1)["container"] == {"runtime": "slurm", "id": None, "name": None, "pod_uid": None,
                                             "pod_namespace": None, "slurm_job_id": "4242", "pid_in_container": None}
    assert row_of(data, v2)["container"]["slurm_job_id"] == "4343"
    assert job_of(data, v1)["cluster_key"] == "slurm:4242"
    assert job_of(data, v2)["cluster_key"] == "slurm:4343"


def test_a_process_in_its_own_pid_namespace(tmp_path: Path, fake_nvml_lib: Path) -> None:
    need_root("unshare --pid")
    with held(pid_namespace=True) as pid:
        assert Path(f"/proc/{pid}/status").read_text().count("NSpid:") == 1
        data = gpusight_json(tmp_path, fake_nvml_lib, [pid])
    row = row_of(data, pid)
    assert row["container"] == {"runtime": "namespace", "id": None, "name": None, "pod_uid": None,
                                "pod_namespace": None, "slurm_job_id": None, "pid_in_container": 1}
    assert row["cmdline"] is not None and "time.sleep(600)" in row["cmdline"]


def test_host_processes_have_no_container_and_a_rendezvous_key(tmp_path: Path, fake_nvml_lib: Path) -> None:
    env = {**os.environ, "MASTER_ADDR": "10.1.2.3", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "run-7",
           "RANK": "0", "WORLD_SIZE": "2"}
    env.pop("SLURM_JOB_ID", None)
    proc = subprocess.Popen([sys.executable, "-c", "import time; print('in', flush=True); time.sleep(600)"],
                            env=env, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"in\n"
        data = gpusight_json(tmp_path, fake_nvml_lib, [proc.pid])
    finally:
        proc.kill()
        proc.wait()
    if read_container(os.getpid()) is None:  # else the tests run in a container, and so do their children
        assert row_of(data, proc.pid)["container"] is None
    key = job_of(data, proc.pid)["cluster_key"]
    assert key == "rdzv:" + hashlib.sha256(b"10.1.2.3:29500:run-7").hexdigest()[:12]
    assert "10.1.2.3" not in key and "29500" not in key


def test_gpusight_in_a_pid_namespace_explains_host_pids_and_keeps_their_gpu_figures(tmp_path: Path,
                                                                                   fake_nvml_lib: Path) -> None:
    """gpusight in a container: NVML reports host PIDs that its /proc does not hold."""
    need_root("unshare --pid")
    scenario = FakeScenario(gpus=[FakeGpu(compute_processes=[(os.getpid(), 3 * GIB)])])
    path = scenario.write(tmp_path / "scenario.txt")
    unshare = ["unshare", "--pid", "--fork", "--mount-proc"]
    outputs = {}
    for mode in ("--json", "--once"):
        out = subprocess.run([*unshare, sys.executable, "-m", "gpusight", mode], capture_output=True, text=True,
                             env=fake_nvml_env(fake_nvml_lib, path), timeout=60)
        if out.returncode != 0 and "unshare" in out.stderr:
            pytest.skip(f"unshare refused: {out.stderr.strip()}")
        assert out.returncode == 0, out.stderr
        outputs[mode] = out.stdout
    [row] = json.loads(outputs["--json"])["processes"]
    assert row["pid"] == os.getpid() and row["gpu_memory_bytes"] == 3 * GIB
    assert row["note"] == ("in another PID namespace (a host PID): run gpusight on the host, or with --pid=host / "
                           "hostPID: true, to see it")
    assert row["user"] is None and row["cmdline"] is None and row["container"] is None
    [line] = [line for line in outputs["--once"].splitlines() if f" {os.getpid()} " in line]
    assert "3GiB" in line and "run gpusight on the host, or with --pid=host / hostPID: true" in line


def screen_with(app: PtyGpusight, directory: Path, marker: str) -> str:
    """Press ``s`` until the screen it exports (the SVG's text, in screen order) shows ``marker``; that text."""

    def export() -> str | None:
        before = set(directory.glob("gpusight-*.svg"))
        app.send("s")
        [svg] = wait_until(lambda: list(set(directory.glob("gpusight-*.svg")) - before), "the export")
        text = html.unescape(re.sub(r"<[^>]+>", "", svg.read_text(encoding="utf-8"))).replace("\xa0", " ")
        return text if marker in text else None

    return wait_until(export, f"{marker!r} on the screen")


def order(screen: str, pids: list[int]) -> list[int]:
    """``pids`` in the order their rows appear on ``screen``."""
    return sorted(pids, key=lambda pid: screen.index(f" {pid} "))


@pytest.mark.parametrize(("size", "docker_label", "user_shown"), [((160, 45), "docker c7f8a5227f0b", True),
                                                                   ((80, 24), "c7f8a5227f0b", False)])
def test_the_tui_shows_containers_and_groups_by_them(tmp_path: Path, fake_nvml_lib: Path,
                                                    size: tuple[int, int], docker_label: str, user_shown: bool) -> None:
    need_root("cgroups")
    exports = tmp_path / "exports"
    with held() as host, held() as slurm, held() as docker, \
            in_cgroup(slurm, "pids", f"{TOP}/slurm/uid_0/job_4242/step_0"), \
            in_cgroup(docker, "v2", f"{TOP}/system.slice/docker-{DOCKER}.scope"):
        scenario = FakeScenario(gpus=[FakeGpu(compute_processes=[(pid, 2 * GIB)]) for pid in (host, slurm, docker)])
        env = fake_nvml_env(fake_nvml_lib, scenario.write(tmp_path / "scenario.txt"))
        env.update(XDG_CONFIG_HOME=str(tmp_path / "xdg"), TERM="xterm-256color")
        with PtyGpusight(size, controlling=True, env=env, args=("--interval", "0.5", "--export-dir", str(exports))) as app:
            app.wait_up(b"GPU")
            screen = screen_with(app, exports, docker_label)
            assert "CONTAINER" in screen and "slurm 4242" in screen
            assert ("USER" in screen) is user_shown
            assert order(screen, [host, slurm, docker]) == [host, slurm, docker]  # by GPU
            app.send("C")
            grouped = screen_with(app, exports, "CONTAINER▲")
            assert order(grouped, [host, slurm, docker]) == [docker, slurm, host]  # the host's process last
            assert app.quit() == 0


def test_the_exporter_labels_processes_with_their_container_pod_and_slurm_job(tmp_path: Path,
                                                                              fake_nvml_lib: Path) -> None:
    need_root("chroot, unshare and cgroups")
    from support.exporter import serving

    docker_root = make_root(tmp_path / "docker", hostname="c7f8a5227f0b\n", namespace=None)
    pod_root = make_root(tmp_path / "pod", hostname="trainer-worker-0\n", namespace="ml-team\n")
    pod_path = f"{TOP}/kubepods/burstable/pod{POD}/{K8S}"
    with held(docker_root, pid_namespace=True) as docker, held(pod_root) as pod, held() as slurm, \
            held(pid_namespace=True) as bare, \
            in_cgroup(docker, "v2", f"{TOP}/system.slice/docker-{DOCKER}.scope"), \
            in_cgroup(pod, "pids", pod_path), in_cgroup(slurm, "pids", f"{TOP}/slurm/uid_0/job_4242/step_0"):
        pids = [docker, pod, slurm, bare]
        scenario = FakeScenario(gpus=[FakeGpu(compute_processes=[(pid, 4 * GIB)]) for pid in pids])
        env = fake_nvml_env(fake_nvml_lib, scenario.write(tmp_path / "scenario.txt"))
        with serving(["--interval", "0.5"], env=env) as exporter:
            text = exporter.wait_for('slurm_job_id="4242"')
    info = [line for line in text.splitlines() if line.startswith("gpusight_process_info{")]
    by_gpu = {re.search(r'gpu="(\d)"', line).group(1): line for line in info}  # type: ignore[union-attr]
    assert f'container="{DOCKER[:12]}"' in by_gpu["0"]
    assert 'pod="trainer-worker-0"' in by_gpu["1"] and 'namespace="ml-team"' in by_gpu["1"]
    assert f'container="{K8S[:12]}"' in by_gpu["1"]
    assert 'slurm_job_id="4242"' in by_gpu["2"] and 'container=""' in by_gpu["2"]
    assert 'container="pidns"' in by_gpu["3"]
    jobs = [line for line in text.splitlines() if line.startswith("gpusight_job_info{")]
    assert any('cluster_job="slurm:4242"' in line for line in jobs)
    assert any('cluster_job="pod:ml-team/trainer-worker-0"' in line for line in jobs)
