"""The cgroup and NSpid parsers over ``/proc/PID/cgroup`` files as real systems print them, and reading files
inside a real process's root (a chroot), hostile links and FIFOs included.

Each file under ``tests/data/cgroup`` is named after what wrote it: the runtime or scheduler, its cgroup
driver (systemd or cgroupfs) and the cgroup version (v1, v2, or hybrid: v1 controllers plus the v2 line).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpusight.backends.host.containers import CgroupPlace, parse_cgroup, parse_nspid, read_container, read_in_root
from gpusight.snapshot.model import ContainerRuntime, ContainerSample
from support.containers import held, make_root, need_root
from support.procs import wait_until

DATA = Path(__file__).parent / "data" / "cgroup"

DOCKER = "d548c5b83fa61d8e3bd86ad42a7ffea9b7c86e3f9d8095c1577d3e1270bb9420"
K8S = "17c132990e8e8523ccd403287b6ae761c1cd57f764df278bce7ed310bbddd7f1"
PODMAN = "2f259bab93aaaaa2542ba43ef33eb990d0999ee1b9924b557b7be53c0b7a1bb9"
CRIO = "c64064614423cb790e88b3e5492ff5ccf673b25ae823089f7a60c65cda24d809"
NERDCTL = "5cabaa953bd37c3e357e779bb82aa195eda3b2afa2bdd19594a7162c4f7497be"
POD = "1b2c3d4e-5f6a-4b8c-9d0e-1f2a3b4c5d6e"
STATIC_POD = "2053dbbf6ec7135c4e994d3464c478db"

D, C, R, P, S = (ContainerRuntime.DOCKER, ContainerRuntime.CONTAINERD, ContainerRuntime.CRIO, ContainerRuntime.PODMAN,
                 None)

EXPECTED: dict[str, CgroupPlace] = {
    "docker-systemd-v2": CgroupPlace(D, DOCKER),
    "docker-cgroupfs-v1-hybrid": CgroupPlace(D, DOCKER),
    "docker-systemd-v1-hybrid": CgroupPlace(D, DOCKER),
    "docker-cgroupfs-v2": CgroupPlace(D, DOCKER),
    "docker-rootless-systemd-v2": CgroupPlace(D, DOCKER),
    "docker-in-docker-v2": CgroupPlace(D, DOCKER),  # the inner container, not the outer one
    "k8s-containerd-systemd-burstable-v2": CgroupPlace(C, K8S, POD),
    "k8s-containerd-systemd-guaranteed-v2": CgroupPlace(C, K8S, POD),
    "k8s-containerd-cgroupfs-besteffort-v1": CgroupPlace(C, K8S, POD),
    "k8s-containerd-cgroupfs-v2": CgroupPlace(C, K8S, POD),
    "k8s-containerd-colon-form-v1": CgroupPlace(C, K8S, POD),
    "k8s-crio-systemd-v2": CgroupPlace(R, CRIO, POD),
    "k8s-crio-cgroupfs-v1": CgroupPlace(R, CRIO, POD),
    "k8s-docker-systemd-v1-hybrid": CgroupPlace(D, DOCKER, POD),
    "k8s-static-pod-cgroupfs-v2": CgroupPlace(C, K8S, STATIC_POD),
    "podman-root-systemd-v2": CgroupPlace(P, PODMAN),
    "podman-rootless-v2": CgroupPlace(P, PODMAN),
    "podman-cgroupfs-v1": CgroupPlace(P, PODMAN),
    "containerd-nerdctl-systemd-v2": CgroupPlace(C, NERDCTL),
    "containerd-cgroupfs-default-namespace-v2": CgroupPlace(C, NERDCTL),
    "slurm-task-v1": CgroupPlace(S, slurm_job_id="4242"),
    "slurm-multiple-slurmd-v1": CgroupPlace(S, slurm_job_id="4242"),
    "slurm-task-v2": CgroupPlace(S, slurm_job_id="4242"),
    "slurm-batch-v2": CgroupPlace(S, slurm_job_id="4242"),
}
"""What each real-format file must give; every ``negative-*`` file must give nothing."""


def test_every_file_has_an_expectation() -> None:
    names = {path.stem for path in DATA.glob("*.cgroup")}
    assert {name for name in names if not name.startswith("negative-")} == set(EXPECTED)
    assert len([name for name in names if name.startswith("negative-")]) >= 10


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_cgroup_files(name: str) -> None:
    assert parse_cgroup((DATA / f"{name}.cgroup").read_text()) == EXPECTED[name]


@pytest.mark.parametrize("name", sorted(path.stem for path in DATA.glob("negative-*.cgroup")))
def test_lookalikes_and_garbage_are_no_container(name: str) -> None:
    assert parse_cgroup((DATA / f"{name}.cgroup").read_text()) == CgroupPlace()


def test_a_container_in_a_slurm_job_keeps_both() -> None:
    text = f"0::/system.slice/slurmstepd.scope/job_77/step_0/user/task_0/docker-{DOCKER}.scope\n"
    assert parse_cgroup(text) == CgroupPlace(D, DOCKER, slurm_job_id="77")
    hybrid = f"8:pids:/slurm/uid_0/job_78/step_0\n0::/system.slice/docker-{DOCKER}.scope\n"
    assert parse_cgroup(hybrid) == CgroupPlace(D, DOCKER, slurm_job_id="78")


@pytest.mark.parametrize(
    ("status", "pids"),
    [
        ("Name:\tpython\nTgid:\t18842\nNgid:\t0\nPid:\t18842\nPPid:\t18841\nNSpid:\t18842\t3\nNSpgid:\t18842\t3\n",
         (18842, 3)),
        ("Name:\tsleep\nPid:\t1234\nNSpid:\t1234\n", (1234,)),
        ("Name:\tinit\nNSpid:\t900\t45\t1\n", (900, 45, 1)),
        ("Name:\told-kernel\nPid:\t1234\n", ()),
        ("NSpid:\t12\tx\n", ()),
    ],
)
def test_nspid(status: str, pids: tuple[int, ...]) -> None:
    assert parse_nspid(status) == pids


# -- files inside a process's own root -----------------------------------------------------------------


def test_read_in_root_follows_kubelets_links_inside_the_root(tmp_path: Path) -> None:
    root = make_root(tmp_path / "root")
    assert read_in_root(str(root), "etc/hostname") == b"3f2a9c1b4d5e\n"
    assert read_in_root(str(root), "var/run/secrets/kubernetes.io/serviceaccount/namespace") == b"ml-team\n"


def test_read_in_root_never_leaves_the_root(tmp_path: Path) -> None:
    outside = tmp_path / "host-secret"
    outside.write_text("host secret\n")
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "hostname").symlink_to(outside)  # absolute: must resolve inside the root, where it is absent
    assert read_in_root(str(root), "etc/hostname") is None
    (root / "etc" / "hostname").unlink()
    (root / "etc" / "hostname").symlink_to("../../../../../../host-secret")  # .. never climbs above the root
    assert read_in_root(str(root), "etc/hostname") is None
    (root / "host-secret").write_text("inside\n")
    assert read_in_root(str(root), "etc/hostname") == b"inside\n"
    (root / "etc" / "hostname").unlink()
    (root / "etc" / "hostname").symlink_to("hostname")  # a loop
    assert read_in_root(str(root), "etc/hostname") is None


def test_read_in_root_reads_only_regular_files_and_little_of_them(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    os.mkfifo(root / "etc" / "hostname")  # opening it to read would block without a writer
    assert read_in_root(str(root), "etc/hostname") is None
    (root / "etc" / "hostname").unlink()
    (root / "etc" / "hostname").symlink_to("/dev/zero")
    (root / "dev").mkdir()
    if os.geteuid() == 0:  # a real character device (as root only); without it the link leads nowhere
        os.mknod(root / "dev" / "zero", 0o600 | 0o020000, os.makedev(1, 5))
    assert read_in_root(str(root), "etc/hostname") is None
    (root / "etc" / "hostname").unlink()
    (root / "etc" / "hostname").write_text("x" * 100_000)
    data = read_in_root(str(root), "etc/hostname")
    assert data is not None and 0 < len(data) <= 4096
    assert read_in_root(str(tmp_path / "absent"), "etc/hostname") is None


def test_read_container_names_a_real_process_by_its_roots_hostname(tmp_path: Path) -> None:
    """A real chrooted process's root, with its cgroup and NSpid written into a /proc of the test's own."""
    need_root("chroot")
    hostile = make_root(tmp_path / "hostile", hostname="\x1b[31mevil\n", namespace="Not A Namespace\n")
    for root, name, namespace in ((make_root(tmp_path / "root"), "3f2a9c1b4d5e", "ml-team"), (hostile, None, None)):
        with held(root) as pid:
            proc_dir = tmp_path / f"proc-{root.name}"
            (proc_dir / str(pid)).mkdir(parents=True)
            (proc_dir / str(pid) / "cgroup").write_text(f"0::/kubepods/burstable/pod{POD}/{K8S}\n")
            (proc_dir / str(pid) / "status").write_text(f"Name:\tpython\nNSpid:\t{pid}\t7\n")
            (proc_dir / str(pid) / "root").symlink_to(f"/proc/{pid}/root")
            found = read_container(pid, {"SLURM_JOB_ID": "99"}, proc=str(proc_dir))
        assert found == ContainerSample(C, K8S, name, POD, namespace, "99", 7)


def test_read_container_of_this_process_is_none() -> None:
    status = Path("/proc/self/status").read_text()
    if len(parse_nspid(status)) > 1 or parse_cgroup(Path("/proc/self/cgroup").read_text()) != CgroupPlace():
        pytest.skip("the tests themselves run in a container or a PID namespace of their own")
    assert read_container(os.getpid()) is None
    assert read_container(os.getpid(), {"SLURM_JOB_ID": "123"}) == ContainerSample(ContainerRuntime.SLURM,
                                                                                   slurm_job_id="123")
    assert read_container(os.getpid(), {"SLURM_JOB_ID": "12; rm -rf /"}) is None


def test_read_container_of_a_gone_process_is_none() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    wait_until(lambda: not os.path.exists(f"/proc/{proc.pid}"), "the child to be reaped")
    assert read_container(proc.pid) is None


def test_a_container_named_as_the_host_has_no_name(tmp_path: Path) -> None:
    """A pod on the host's network has the node's name in its /etc/hostname: that names no pod."""
    need_root("chroot")
    root = make_root(tmp_path / "root", hostname=os.uname().nodename + "\n")
    with held(root) as pid:
        proc_dir = tmp_path / "proc"
        (proc_dir / str(pid)).mkdir(parents=True)
        (proc_dir / str(pid) / "cgroup").write_text(f"0::/kubepods/burstable/pod{POD}/{K8S}\n")
        (proc_dir / str(pid) / "root").symlink_to(f"/proc/{pid}/root")
        found = read_container(pid, proc=str(proc_dir))
    assert found == ContainerSample(C, K8S, None, POD, "ml-team")


@pytest.mark.parametrize("path", [
    f"/kubepods/burstable/pod1b2c3d4e_5f6a_4b8c_9d0e_1f2a3b4c5d6e/{K8S}",  # cgroupfs writes dashes
    f"/kubepods/burstable/pod1b2c3d4e-5f6a-4b8c-9d0e-1f2a3b4c5d6/{K8S}",  # one digit short
    f"/kubepods/burstable/podcast/{K8S}",
    f"/kubepods.slice/kubepods-pod1b2c3d4e-5f6a-4b8c-9d0e-1f2a3b4c5d6e.slice/cri-containerd-{K8S}.scope",  # systemd: _
    f"/kubepods.slice/kubepods-pod1b2c3d4e_5f6a-4b8c_9d0e_1f2a3b4c5d6e.slice/cri-containerd-{K8S}.scope",
])
def test_a_malformed_pod_uid_is_no_pod_but_the_container_stays(path: str) -> None:
    assert parse_cgroup(f"0::{path}\n") == CgroupPlace(C, K8S)
