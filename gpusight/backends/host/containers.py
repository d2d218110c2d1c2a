"""Telling which container, Kubernetes pod or Slurm job a process runs in, from ``/proc`` alone.

``/proc/PID/cgroup`` lists the process's cgroup in each hierarchy: ``N:controllers:/path`` lines for cgroup v1,
one ``0::/path`` line for v2, both on hybrid systems. Container runtimes and Slurm name their cgroups in
fixed ways, and those names carry the ids:

- Docker: ``/docker/ID`` (cgroupfs driver) or ``/system.slice/docker-ID.scope`` (systemd driver);
- containerd: ``cri-containerd-ID.scope``, ``nerdctl-ID.scope``, ``SLICE:cri-containerd:ID``, or a bare
  ``ID`` under its namespace's cgroup (``/default/ID``) or a pod's;
- CRI-O: ``crio-ID`` or ``crio-ID.scope``;
- Podman: ``libpod-ID.scope`` (also under ``user.slice`` when rootless) or ``/libpod_parent/libpod-ID``;
- Kubernetes pods: ``/kubepods/[burstable|besteffort/]podUID/...`` (cgroupfs) or
  ``kubepods-[burstable-|besteffort-]podUID_WITH_UNDERSCORES.slice`` (systemd), around a container's cgroup;
- Slurm: ``/slurm[_NODE]/uid_U/job_J/step_S/...`` (v1) or ``/system.slice/slurmstepd.scope/job_J/...`` (v2).

Only whole path components of the exact forms above count, with ids of exactly 64 lower-case hex digits
(pod UIDs: a UUID, or 32 hex digits for static pods), so ``/home/docker-notes`` is no container. Where no
cgroup tells, a process whose ``NSpid`` (``/proc/PID/status``) lists more than one pid lives in a PID
namespace of its own (``unshare --pid``, a sandbox): runtime ``namespace``. A process in a Slurm job without
Slurm's cgroups is known by ``SLURM_JOB_ID`` in its environment.

The container's own files are read through ``/proc/PID/root``: its ``/etc/hostname`` (Docker writes the
short id there, Kubernetes the pod's name) and a pod's service-account ``namespace``. Those files belong to
whoever runs the container, so they are opened one path component at a time with symbolic links resolved
inside the container's root (never the host's), only regular files are read, a few hundred bytes at most,
and what is kept is checked against the form a host name or a namespace has. Every read that fails leaves
its field None; nothing here raises. The module is pure (no UI); callers cache the result per process
(:class:`gpusight.backends.host.procenv.HintReader`).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass

from gpusight.backends.host.proctree import read_proc_file
from gpusight.facts.jobs import slurm_job_of
from gpusight.snapshot.model import ContainerRuntime, ContainerSample

_ID = r"([0-9a-f]{64})"
_HEX32 = "[0-9a-f]{32}"
"""A static pod's UID: the hash of its manifest."""
_UID_DASHES = rf"([0-9a-f]{{8}}-[0-9a-f]{{4}}-[0-9a-f]{{4}}-[0-9a-f]{{4}}-[0-9a-f]{{12}}|{_HEX32})"
_UID_UNDERSCORES = rf"([0-9a-f]{{8}}_[0-9a-f]{{4}}_[0-9a-f]{{4}}_[0-9a-f]{{4}}_[0-9a-f]{{12}}|{_HEX32})"

_CONTAINER_FORMS: tuple[tuple[re.Pattern[str], ContainerRuntime], ...] = (
    (re.compile(rf"docker-{_ID}\.scope"), ContainerRuntime.DOCKER),
    (re.compile(rf"(?:cri-containerd|nerdctl)-{_ID}\.scope"), ContainerRuntime.CONTAINERD),
    (re.compile(rf"cri-containerd:{_ID}"), ContainerRuntime.CONTAINERD),
    (re.compile(rf"crio-{_ID}(?:\.scope)?"), ContainerRuntime.CRIO),
    (re.compile(rf"libpod-{_ID}(?:\.scope)?"), ContainerRuntime.PODMAN),
)
"""A path component naming a container, with the runtime that names its cgroups so."""
_SLICE_AND_CONTAINER = re.compile(rf"([^:]+\.slice):(cri-containerd:{_ID})")
"""``SLICE:cri-containerd:ID``: the cgroups path containerd gets from a systemd-driver kubelet when it is not set
to manage systemd cgroups itself; the slice and the container are one path component."""
_BARE_ID = re.compile(_ID)
"""A container id alone as a path component: ``/docker/ID``, ``/default/ID`` or under a pod."""
_POD_CGROUPFS = re.compile(rf"pod{_UID_DASHES}")
"""A pod's cgroup with the cgroupfs driver (below a ``kubepods`` component)."""
_POD_SYSTEMD = re.compile(rf"kubepods(?:-burstable|-besteffort)?-pod{_UID_UNDERSCORES}\.slice")
"""A pod's slice with the systemd driver, its UID's dashes written as underscores."""
_SLURM_ROOT = re.compile(r"slurm(?:_[^/]+)?")
"""Slurm's cgroup v1 root, ``slurm`` or ``slurm_NODENAME`` (several slurmd on one machine)."""
_SLURM_UID = re.compile(r"uid_[0-9]+")
_SLURM_JOB = re.compile(r"job_([0-9]{1,20})")
_HOSTNAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,251}[A-Za-z0-9])?")
"""What a container's host name may look like (letters, digits, dots, dashes; at most 253 characters)."""
_K8S_NAMESPACE = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?")
"""A Kubernetes namespace: a DNS label."""

HOSTNAME_FILE = "etc/hostname"
"""The container's host name, relative to its root."""
K8S_NAMESPACE_FILE = "var/run/secrets/kubernetes.io/serviceaccount/namespace"
"""A pod's namespace, mounted in each of its containers with the service-account token (relative to the root)."""
_MOST_LINKS = 16
"""Symbolic links followed at most while opening one file inside a container's root."""
_MOST_BYTES = 256
"""Bytes read at most from a file inside a container."""


@dataclass(frozen=True, slots=True)
class CgroupPlace:
    """What a process's cgroup paths tell: its container (with its pod) and its Slurm job, each None where unknown."""

    runtime: ContainerRuntime | None = None
    """The runtime of the innermost container found; None when no path names a container."""
    id: str | None = None
    """That container's full id."""
    pod_uid: str | None = None
    """The Kubernetes pod around it, with dashes."""
    slurm_job_id: str | None = None
    """The Slurm job whose cgroup holds the process."""


def parse_cgroup(text: str) -> CgroupPlace:
    """What the lines of a ``/proc/PID/cgroup`` file tell (see the module docstring); malformed lines are skipped.

    The v2 line is looked at first, then the v1 lines in order; the first container found wins, and so does the
    first Slurm job, so a Slurm job's container keeps both.
    """
    paths: list[str] = []
    for line in text.splitlines():
        hierarchy, colon, rest = line.partition(":")
        controllers, colon2, path = rest.partition(":")
        if not (colon and colon2 and hierarchy.isascii() and hierarchy.isdigit() and path.startswith("/")):
            continue
        if hierarchy == "0" and not controllers:
            paths.insert(0, path)
        else:
            paths.append(path)
    container: tuple[ContainerRuntime, str, str | None] | None = None
    job = None
    for path in paths:
        parts = path.split("/")
        if container is None:
            container = _container_in(parts)
        if job is None:
            job = _slurm_job_in(parts)
    if container is None:
        return CgroupPlace(slurm_job_id=job)
    return CgroupPlace(container[0], container[1], container[2], job)


def _container_in(parts: list[str]) -> tuple[ContainerRuntime, str, str | None] | None:
    """(runtime, id, pod UID) of the innermost container named by the path ``parts``; None when none is."""
    found: tuple[ContainerRuntime, str, str | None] | None = None
    pod: str | None = None
    kubepods = False
    parts = [piece for part in parts for piece in _split_slice(part)]
    for index, part in enumerate(parts):
        if part == "kubepods" or part == "kubepods.slice":
            kubepods = True
            continue
        uid = _POD_SYSTEMD.fullmatch(part) or (_POD_CGROUPFS.fullmatch(part) if kubepods else None)
        if uid is not None:
            pod = uid.group(1).replace("_", "-")
            continue
        for form, runtime in _CONTAINER_FORMS:
            match = form.fullmatch(part)
            if match is not None:
                found = (runtime, match.group(1), pod)
                break
        else:
            bare = _BARE_ID.fullmatch(part)
            if bare is not None:
                runtime = ContainerRuntime.DOCKER if parts[index - 1] == "docker" else ContainerRuntime.CONTAINERD
                found = (runtime, bare.group(1), pod)
    return found


def _split_slice(part: str) -> tuple[str, ...]:
    """``SLICE:cri-containerd:ID`` as its slice and its container; any other path component alone."""
    match = _SLICE_AND_CONTAINER.fullmatch(part)
    return (part,) if match is None else (match.group(1), match.group(2))


def _slurm_job_in(parts: list[str]) -> str | None:
    """The Slurm job id of the path ``parts`` (``slurm/uid_U/job_J`` or ``slurmstepd.scope/job_J``); None if none."""
    for index, part in enumerate(parts):
        job = _SLURM_JOB.fullmatch(part)
        if job is None or index < 1:
            continue
        before = parts[index - 1]
        if before == "slurmstepd.scope":
            return job.group(1)
        if _SLURM_UID.fullmatch(before) and index >= 2 and _SLURM_ROOT.fullmatch(parts[index - 2]):
            return job.group(1)
    return None


def parse_nspid(status: str) -> tuple[int, ...]:
    """The pids of the ``NSpid:`` line of a ``/proc/PID/status`` file, outermost namespace first; () without one."""
    for line in status.splitlines():
        if line.startswith("NSpid:"):
            try:
                return tuple(int(field) for field in line[6:].split())
            except ValueError:
                return ()
    return ()


def read_in_root(root: str, path: str) -> bytes | None:
    """The first bytes (a few hundred) of the regular file ``path`` inside the directory ``root``, or None.

    ``root`` is a container's root (``/proc/PID/root``). Each component is opened relative to the one before
    without following links; a link is read and followed inside ``root`` (an absolute target starts again at
    ``root``, ``..`` never climbs above it), so no link in the container can reach a host file. Anything but
    a directory on the way or a regular file at the end (a FIFO, a device) gives None, as does any error.
    """
    try:
        opened = [os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)]
    except OSError:
        return None
    try:
        parts = _components(path)
        links = 0
        while parts:
            part = parts.pop(0)
            if part == "..":
                if len(opened) > 1:
                    os.close(opened.pop())
                continue
            mode = os.stat(part, dir_fd=opened[-1], follow_symlinks=False).st_mode
            if stat.S_ISLNK(mode):
                links += 1
                if links > _MOST_LINKS:
                    return None
                target = os.readlink(part, dir_fd=opened[-1])
                if target.startswith("/"):
                    while len(opened) > 1:
                        os.close(opened.pop())
                parts = _components(target) + parts
            elif parts and stat.S_ISDIR(mode):
                opened.append(os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                                      dir_fd=opened[-1]))
            elif not parts and stat.S_ISREG(mode):
                descriptor = os.open(part, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                                     dir_fd=opened[-1])
                opened.append(descriptor)
                return os.read(descriptor, _MOST_BYTES) if stat.S_ISREG(os.fstat(descriptor).st_mode) else None
            else:
                return None
        return None
    except OSError:
        return None
    finally:
        for descriptor in opened:
            os.close(descriptor)


def _components(path: str) -> list[str]:
    """The components of ``path`` that name something (no empty ones, no ``.``)."""
    return [part for part in path.split("/") if part not in ("", ".")]


def _first_line(data: bytes | None, form: re.Pattern[str]) -> str | None:
    """The first line of ``data``, stripped, when it has the form ``form``; else None."""
    if data is None:
        return None
    line = data.split(b"\n", 1)[0].strip().decode("ascii", "replace")
    return line if form.fullmatch(line) else None


def read_container(pid: int, env: Mapping[str, str] | None = None, proc: str = "/proc") -> ContainerSample | None:
    """Where process ``pid`` runs: its container, pod or Slurm job; None when it runs directly on the host.

    A container whose host name is this machine's (on the host's network: ``--network=host``, a pod with
    ``hostNetwork: true``) gets no name: the name would not be its own.

    ``env`` is its whitelisted environment where readable (its ``SLURM_JOB_ID`` is used when no Slurm cgroup
    tells the job). ``proc`` is where procfs is mounted. Unreadable files leave fields None; never raises.
    """
    cgroup = read_proc_file(f"{proc}/{pid}/cgroup")
    status = read_proc_file(f"{proc}/{pid}/status")
    place = parse_cgroup(cgroup.decode("utf-8", "replace")) if cgroup is not None else CgroupPlace()
    nspids = parse_nspid(status.decode("utf-8", "replace")) if status is not None else ()
    inner = nspids[-1] if len(nspids) > 1 and nspids[-1] != nspids[0] else None
    job = place.slurm_job_id or slurm_job_of(env)
    if place.runtime is None:
        if job is not None:
            return ContainerSample(ContainerRuntime.SLURM, slurm_job_id=job, pid_in_container=inner)
        return ContainerSample(ContainerRuntime.NAMESPACE, pid_in_container=inner) if inner is not None else None
    root = f"{proc}/{pid}/root"
    name = _first_line(read_in_root(root, HOSTNAME_FILE), _HOSTNAME)
    if name is not None and name == os.uname().nodename:
        name = None  # the host's own name: a container on the host's network (hostNetwork: true) names nothing
    namespace = None
    if place.pod_uid is not None:
        namespace = _first_line(read_in_root(root, K8S_NAMESPACE_FILE), _K8S_NAMESPACE)
    return ContainerSample(
        place.runtime, id=place.id, name=name, pod_uid=place.pod_uid, pod_namespace=namespace, slurm_job_id=job,
        pid_in_container=inner,
    )
