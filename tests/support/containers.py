"""Real processes laid out like containers: their own root (chroot), their own PID namespace (``unshare``), and
real cgroups named as container runtimes, Kubernetes and Slurm name theirs.

Everything made here is undone on exit: cgroups are removed once their processes are gone. Where the machine
refuses (no root, no writable cgroup hierarchy, no ``unshare``), the helpers skip the test with the reason.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

HOLD = "import os, sys, time\nif len(sys.argv) > 1:\n    os.chroot(sys.argv[1])\n    os.chdir('/')\nprint('in', flush=True)\ntime.sleep(600)\n"
"""A child that enters the root given as its argument (if any), says ``in`` and sleeps until killed."""


def make_root(root: Path, hostname: str = "3f2a9c1b4d5e\n", namespace: str | None = "ml-team\n") -> Path:
    """A container's root as Docker and kubelet lay it out: ``/etc/hostname``, ``/var/run -> ../run``, and the
    service-account volume's ``namespace -> ..data/namespace``, ``..data -> ..TIMESTAMP`` links (when
    ``namespace`` is given)."""
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "hostname").write_text(hostname)
    if namespace is not None:
        account = root / "run" / "secrets" / "kubernetes.io" / "serviceaccount"
        (account / "..2026_11_23_17_00_00.123456789").mkdir(parents=True)
        (account / "..2026_11_23_17_00_00.123456789" / "namespace").write_text(namespace)
        (account / "..data").symlink_to("..2026_11_23_17_00_00.123456789")
        (account / "namespace").symlink_to("..data/namespace")
        (root / "var").mkdir()
        (root / "var" / "run").symlink_to("../run")
    return root


def need_root(what: str) -> None:
    """Skip the test unless it runs as root (``what`` says what needs it)."""
    if os.geteuid() != 0:
        pytest.skip(f"{what} needs root; the tests run as uid {os.geteuid()}")


@contextlib.contextmanager
def held(root: Path | None = None, pid_namespace: bool = False) -> Iterator[int]:
    """A sleeping Python process, chrooted into ``root`` when given, in a PID namespace of its own when
    ``pid_namespace`` (``unshare --pid --fork --mount-proc``); yields its pid as this machine sees it."""
    argv = [sys.executable, "-c", HOLD, *([str(root)] if root is not None else [])]
    if pid_namespace:
        unshare = shutil.which("unshare")
        if unshare is None:
            pytest.skip("unshare (util-linux) is not installed")
        argv = [unshare, "--pid", "--fork", "--mount-proc", *argv]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        if proc.stdout.readline() != b"in\n":
            proc.wait(timeout=10)
            assert proc.stderr is not None
            pytest.skip(f"could not start the child ({' '.join(argv[:4])}...): {proc.stderr.read().decode().strip()}")
        yield _only_child(proc.pid) if pid_namespace else proc.pid
    finally:
        proc.kill()  # unshare --fork: its child, pid 1 of the namespace, takes the namespace down with it
        proc.wait()


def _only_child(pid: int) -> int:
    """The one child of ``pid`` (what ``unshare --fork`` started)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])


def cgroup_mounts() -> dict[str, Path]:
    """Where the cgroup hierarchies are mounted: ``"v2"`` for the unified one, and each v1 controller's name."""
    found: dict[str, Path] = {}
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        if fields[2] == "cgroup2":
            found.setdefault("v2", Path(fields[1]))
        elif fields[2] == "cgroup":
            for option in fields[3].split(","):
                found.setdefault(option, Path(fields[1]))
    return found


@contextlib.contextmanager
def in_cgroup(pid: int, hierarchy: str, path: str) -> Iterator[Path]:
    """Move ``pid`` into the cgroup ``path`` (made as needed) of ``hierarchy`` (``"v2"`` or a v1 controller such
    as ``"pids"``), as a runtime would; afterwards move it back and remove the directories made here."""
    mount = cgroup_mounts().get(hierarchy)
    if mount is None:
        pytest.skip(f"no {hierarchy} cgroup hierarchy is mounted here")
    made: list[Path] = []
    target = mount
    before = _cgroup_of(pid, hierarchy)
    try:
        for part in path.strip("/").split("/"):
            target = target / part
            if not target.exists():
                try:
                    target.mkdir()
                except OSError as exc:
                    pytest.skip(f"cannot make a cgroup under {mount}: {exc}")
                made.append(target)
        try:
            (target / "cgroup.procs").write_text(f"{pid}\n")
        except OSError as exc:
            pytest.skip(f"cannot move a process into {target}: {exc}")
        yield target
    finally:
        with contextlib.suppress(OSError):  # it may have exited already
            (mount / before.lstrip("/") / "cgroup.procs").write_text(f"{pid}\n")
        for directory in reversed(made):
            _remove(directory)


def _cgroup_of(pid: int, hierarchy: str) -> str:
    """The cgroup path of ``pid`` in ``hierarchy`` from its ``/proc/PID/cgroup``."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        number, controllers, path = line.split(":", 2)
        if (hierarchy == "v2" and number == "0" and not controllers) or hierarchy in controllers.split(","):
            return path
    return "/"


def _remove(directory: Path) -> None:
    """Remove an emptied cgroup directory, waiting a moment while the kernel still counts a leaving process."""
    deadline = time.monotonic() + 5
    while True:
        try:
            directory.rmdir()
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.05)
