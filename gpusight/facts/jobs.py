"""Grouping GPU processes into jobs from evidence, and telling each job's kind.

Every GPU process belongs to exactly one job. Strongest evidence first:

1. the distributed environment (whitelisted keys of ``/proc/PID/environ``): the same
   ``MASTER_ADDR:MASTER_PORT`` (and ``TORCHELASTIC_RUN_ID``), or the same Slurm job step;
2. a launcher parent (torchrun, deepspeed, accelerate launch, mpirun, srun, ...): its GPU children;
3. a shared parent that is not a shell, terminal or session manager (``torch.multiprocessing.spawn``
   children of ``python train.py``), the parent itself included when it uses a GPU too; but Python runs
   a driver started with different command lines (``train.py --lr 1e-3``, ``--lr 3e-4``) are a sweep,
   and children in different containers or Slurm jobs are different jobs;
4. anything else is a job of one; one process on several GPUs is DataParallel.

The user name is never evidence: a sweep of one user's runs stays separate jobs. Ids come from a
:class:`JobTracker`, stable while a job runs and never reused. Each job also gets the key that names it on
every node it spans (:func:`cluster_key`: its Slurm job, its pod, or a hash of its rendezvous). The module is pure: hints are read
elsewhere (:mod:`gpusight.backends.host.procenv`, or made up by the demo).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import ipaddress
import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from gpusight.facts.workload import (
    UNDECIDED,
    Command,
    classify,
    command_of,
    find_sign,
    is_session,
    parse_command,
    split_cmdline,
)
from gpusight.snapshot.model import ContainerSample, JobSample, ProcessRole, ProcessSample

ENV_KEYS = frozenset({
    "MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID",
    "GROUP_RANK", "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_PROCID", "JPY_PARENT_PID",
})
"""The only environment variables ever kept from a process: the ones that tell its job and rank."""
_SLURM_JOB_ID = re.compile(r"[0-9]{1,20}")
"""``SLURM_JOB_ID`` as Slurm sets it: a number."""


@dataclass(frozen=True, slots=True)
class ProcessHints:
    """What a GPU process's surroundings tell about its job: environment, parent and behaviour."""

    env: Mapping[str, str] | None = None
    """The whitelisted variables (:data:`ENV_KEYS`) of its environment; None when it could not be read."""
    parent_name: str | None = None
    """The parent's name (``comm``); None when unknown."""
    parent_argv: tuple[str, ...] = ()
    """The parent's command line, one argument each; () when unreadable."""
    parent_start: float | None = None
    """When the parent started (any stable unit): with its pid it names the parent."""
    has_status: bool = False
    """True when the process publishes a ``gpusight.torch`` status record."""
    listen_port: int | None = None
    """A TCP port it listens on, when probed and found; None otherwise."""
    container: ContainerSample | None = None
    """The container, pod or Slurm job it runs in (:func:`gpusight.backends.host.containers.read_container`); None on the host."""


NO_HINTS = ProcessHints()
"""Hints of a process nothing is known about."""


class JobTracker:
    """Stable job ids: one per job identity, numbered 1, 2, 3 in order of first sight, never reused."""

    def __init__(self, grace: int = 16) -> None:
        """Forget an identity not seen in ``grace`` consecutive calls of :meth:`ids` (its id is not reused)."""
        self._grace = grace
        self._ids: dict[Hashable, tuple[int, int]] = {}
        self._next = 1
        self._calls = 0

    def ids(self, keys: Sequence[Hashable]) -> list[int]:
        """The id of each job identity in ``keys``; new identities get new ids in the given order."""
        self._calls += 1
        result = []
        for key in keys:
            known = self._ids.get(key)
            number = known[0] if known is not None else self._next
            if known is None:
                self._next += 1
            self._ids[key] = (number, self._calls)
            result.append(number)
        stale = [key for key, (_, seen) in self._ids.items() if self._calls - seen >= self._grace]
        for key in stale:
            del self._ids[key]
        return result


@dataclass(frozen=True, slots=True)
class Grouping:
    """The jobs of one poll and where each GPU process sits in them."""

    jobs: tuple[JobSample, ...] = ()
    """The jobs, by id."""
    places: Mapping[int, tuple[int, int | None]] = dataclasses.field(default_factory=dict)
    """pid -> (job id, rank) for every GPU process."""

    def apply(self, processes: Iterable[ProcessSample]) -> tuple[ProcessSample, ...]:
        """``processes`` with ``job`` and ``rank`` set on the GPU rows."""
        result = []
        for process in processes:
            place = self.places.get(process.pid) if process.role == ProcessRole.GPU else None
            if place is not None:
                process = dataclasses.replace(process, job=place[0], rank=place[1])
            result.append(process)
        return tuple(result)


@dataclass(slots=True)
class _Member:
    """One GPU process while grouping."""

    pid: int
    ppid: int | None
    create_time: float | None
    devices: list[int]
    command: Command
    argv: tuple[str, ...]
    has_workers: bool
    hints: ProcessHints
    parent: Command | None

    @property
    def rank(self) -> int | None:
        return _int(self.hints.env, "RANK")


@dataclass(slots=True)
class _Group:
    """Processes that work together, with the evidence that groups them."""

    key: Hashable
    evidence: str
    members: list[_Member]
    launcher_pid: int | None = None


def group_jobs(processes: Sequence[ProcessSample], hints: Mapping[int, ProcessHints], tracker: JobTracker) -> Grouping:
    """Group the GPU rows of ``processes`` into jobs, with ids from ``tracker`` (new jobs numbered by first GPU)."""
    members: dict[int, _Member] = {}
    for process in processes:
        if process.role != ProcessRole.GPU:
            continue
        member = members.get(process.pid)
        if member is None:
            hint = hints.get(process.pid, NO_HINTS)
            member = members[process.pid] = _Member(
                process.pid, process.ppid, process.create_time, [], command_of(process.cmdline, process.name),
                _argv_of(process.cmdline), bool(process.num_workers), hint, _parent_command(hint),
            )
        if process.device_index is not None and process.device_index not in member.devices:
            member.devices.append(process.device_index)
    groups = _groups(members)
    groups.sort(key=lambda g: (min((d for m in g.members for d in m.devices), default=1 << 30), g.members[0].pid))
    ids = tracker.ids([group.key for group in groups])
    jobs = []
    places: dict[int, tuple[int, int | None]] = {}
    for number, group in zip(ids, groups, strict=True):
        job = _job(number, group)
        jobs.append(job)
        for member in group.members:
            places[member.pid] = (number, member.rank)
    jobs.sort(key=lambda job: job.id)
    return Grouping(tuple(jobs), places)


def kind_undecided(cmdline: str | None, name: str | None, hints: ProcessHints, has_workers: bool) -> bool:
    """True when nothing but behaviour on the network could tell the kind of a GPU process.

    ``cmdline`` and ``name`` are as ``ProcessSample`` holds them; ``has_workers``: it has DataLoader workers.
    """
    command = command_of(cmdline, name)
    verdict = classify(command, _parent_command(hints), hints.env, has_workers=has_workers, has_status=hints.has_status)
    return verdict is UNDECIDED


def _groups(members: Mapping[int, _Member]) -> list[_Group]:
    """Every member in one group, by the evidence order of the module docstring."""
    left = dict(sorted(members.items()))
    groups: list[_Group] = []
    by_env: dict[tuple[str, str, str, str], list[_Member]] = {}
    for member in left.values():
        key = _env_key(member.hints.env)
        if key is not None:
            by_env.setdefault(key, []).append(member)
    for env_key, found in by_env.items():
        launcher = _shared_launcher(found)
        if launcher is not None:
            evidence = _launched(launcher, found)
        elif env_key[0] == "env":
            evidence = f"{len(found)} {_ranks(found)} share MASTER_ADDR:MASTER_PORT={env_key[1]}:{env_key[2]}"
        else:
            evidence = f"{len(found)} {_ranks(found)} of Slurm job step {env_key[1]}.{env_key[2]}"
        groups.append(_Group(env_key, evidence, found, launcher[0] if launcher is not None else None))
        for member in found:
            del left[member.pid]
    by_parent: dict[tuple[int, Hashable], list[_Member]] = {}
    for member in left.values():
        if member.ppid is not None and member.ppid > 1 and member.parent is not None:
            by_parent.setdefault((member.ppid, _isolation(member.hints.container)), []).append(member)
    for (ppid, isolation), siblings in by_parent.items():
        found = [m for m in siblings if m.pid in left]
        if not found:
            continue
        first = found[0]
        assert first.parent is not None
        sign = find_sign(first.parent)
        identity = ("parent", ppid, first.hints.parent_start, isolation)
        if sign is not None and sign.launcher:
            groups.append(_Group(identity, _launched((ppid, sign.label), found), found, ppid))
        elif not is_session(first.hints.parent_name, first.parent):
            if ppid in left and ppid not in {m.pid for m in found}:
                found = [left[ppid], *found]
            else:
                found = _one_program(found)
            if len(found) < 2:
                continue
            shown = first.parent.shown
            groups.append(_Group(identity, f"{len(found)} GPU processes share parent {shown} (PID {ppid})", found))
        else:
            continue
        for member in found:
            left.pop(member.pid, None)
    for member in left.values():
        evidence = ""
        if len(member.devices) > 1:
            evidence = f"DataParallel: PID {member.pid} uses GPUs {_span(member.devices)}"
        groups.append(_Group(("pid", member.pid, member.create_time), evidence, [member]))
    return groups


def _isolation(container: ContainerSample | None) -> Hashable:
    """What sets a process apart from its siblings: its container and Slurm job (None on the host)."""
    return None if container is None else (container.runtime, container.id, container.slurm_job_id)


@functools.lru_cache(maxsize=1024)
def _argv_of(cmdline: str | None) -> tuple[str, ...]:
    """The arguments of a GPU process's command line; remembered, as in ``command_of``."""
    return split_cmdline(cmdline)


def _one_program(siblings: list[_Member]) -> list[_Member]:
    """``siblings`` as one job, or [] when they are a sweep: runs a driver started with different command
    lines, each of a Python script or module of its own (not a ``multiprocessing`` child, whose command line
    is ``python -c ...``, nor a fork of the parent, which keeps the parent's command line)."""
    runs = all(
        (m.command.module is not None or m.command.program.endswith(".py")) and m.argv != m.hints.parent_argv
        for m in siblings
    )
    return [] if runs and len({m.argv for m in siblings}) > 1 else siblings


def _job(number: int, group: _Group) -> JobSample:
    """The job of ``group``: members in rank order, its kind from the strongest member evidence."""
    members = sorted(group.members, key=lambda m: (m.rank is None, m.rank or 0, m.pid))
    lone = len(members) == 1
    verdict = UNDECIDED
    for member in members:
        found = classify(
            member.command, member.parent, member.hints.env, has_workers=member.has_workers,
            has_status=member.hints.has_status, listen_port=member.hints.listen_port if lone else None,
        )
        if found.strength > verdict.strength:
            verdict = found
    world = next((w for w in (_int(m.hints.env, "WORLD_SIZE") for m in members) if w is not None), None)
    parts = [group.evidence] if group.evidence else []
    if world is not None:
        parts.append(f"WORLD_SIZE={world}")
    if not (verdict.launcher and group.launcher_pid is not None):
        parts.append(verdict.reason)
    devices = sorted({d for m in members for d in m.devices})
    return JobSample(
        id=number, kind=verdict.kind, evidence="; ".join(parts), pids=tuple(m.pid for m in members),
        devices=tuple(devices), world_size=world, launcher_pid=group.launcher_pid,
        cluster_key=cluster_key([m.hints for m in members]),
    )


def slurm_job_of(env: Mapping[str, str] | None) -> str | None:
    """``SLURM_JOB_ID`` of a whitelisted environment when it is a job id (a number); None otherwise."""
    value = env.get("SLURM_JOB_ID") if env else None
    return value if value is not None and _SLURM_JOB_ID.fullmatch(value) else None


def cluster_key(hints: Sequence[ProcessHints]) -> str | None:
    """What names the job of processes with ``hints`` on every node it spans (``JobSample.cluster_key``).

    The first that some process tells, in this order: its Slurm job (``slurm:12345``, from its cgroup or
    ``SLURM_JOB_ID``), its rendezvous (``rdzv:`` and 12 hex digits of the SHA-256 of ``MASTER_ADDR:MASTER_PORT``,
    with ``:TORCHELASTIC_RUN_ID`` when set: the same on every node, without the address itself), or its Kubernetes
    pod (``pod:NAMESPACE/NAME``, both read from the container); None when none does. A rendezvous on a loopback
    address names no cluster-wide job (every node has its own ``127.0.0.1:29500``), and the pods of one job across
    nodes share its rendezvous but not their names, hence that order.
    """
    for hint in hints:
        job = hint.container.slurm_job_id if hint.container is not None else None
        job = job or slurm_job_of(hint.env)
        if job is not None:
            return f"slurm:{job}"
    for hint in hints:
        key = _env_key(hint.env)
        if key is not None and key[0] == "env" and not _loopback(key[1]):
            rendezvous = f"{key[1]}:{key[2]}" + (f":{key[3]}" if key[3] else "")
            return "rdzv:" + hashlib.sha256(rendezvous.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    for hint in hints:
        container = hint.container
        if container is not None and container.pod_uid and container.pod_namespace and container.name:
            return f"pod:{container.pod_namespace}/{container.name}"
    return None


def _loopback(address: str) -> bool:
    """Whether ``MASTER_ADDR`` ``address`` names this machine only (``localhost``, ``127.0.0.1``, ``::1``)."""
    if address.lower() in ("localhost", "localhost.localdomain", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def _parent_command(hints: ProcessHints) -> Command | None:
    """What the parent runs; None when nothing of it is known."""
    if hints.parent_name is None and not hints.parent_argv:
        return None
    return _parent_of(hints.parent_argv, hints.parent_name)


@functools.lru_cache(maxsize=1024)
def _parent_of(argv: tuple[str, ...], name: str | None) -> Command:
    return parse_command(argv, name)


def _env_key(env: Mapping[str, str] | None) -> tuple[str, str, str, str] | None:
    """The job identity the environment gives: rendezvous address and run id, else Slurm job and step."""
    if not env:
        return None
    if env.get("MASTER_ADDR") and env.get("MASTER_PORT"):
        return ("env", env["MASTER_ADDR"], env["MASTER_PORT"], env.get("TORCHELASTIC_RUN_ID", ""))
    if env.get("SLURM_JOB_ID") and env.get("SLURM_STEP_ID"):
        return ("slurm", env["SLURM_JOB_ID"], env["SLURM_STEP_ID"], "")
    return None


def _shared_launcher(members: Sequence[_Member]) -> tuple[int, str] | None:
    """(pid, label) of the launcher parent every member shares, or None."""
    parents = {m.ppid for m in members}
    first = members[0]
    if len(parents) != 1 or first.ppid is None or first.parent is None:
        return None
    sign = find_sign(first.parent)
    return (first.ppid, sign.label) if sign is not None and sign.launcher else None


def _launched(launcher: tuple[int, str], members: Sequence[_Member]) -> str:
    return f"{launcher[1]} (PID {launcher[0]}) started {len(members)} {_ranks(members)}"


def _ranks(members: Sequence[_Member]) -> str:
    return "rank" if len(members) == 1 else "ranks"


def _span(devices: Sequence[int]) -> str:
    """``0-3`` for consecutive GPUs, else ``0,2,5``."""
    ordered = sorted(devices)
    if ordered == list(range(ordered[0], ordered[-1] + 1)) and len(ordered) > 2:
        return f"{ordered[0]}-{ordered[-1]}"
    return ",".join(map(str, ordered))


def _int(env: Mapping[str, str] | None, key: str) -> int | None:
    """``env[key]`` as a non-negative int; None when absent or not a number."""
    value = env.get(key) if env else None
    if value is None or not value.isascii() or not value.isdigit() or len(value) > 9:
        return None
    return int(value)


def trim_jobs(jobs: Sequence[JobSample], processes: Sequence[ProcessSample]) -> tuple[JobSample, ...]:
    """``jobs`` limited to the GPU rows in ``processes``: pids and GPUs not shown dropped, empty jobs dropped."""
    shown: dict[int, set[int]] = {}
    for process in processes:
        if process.role == ProcessRole.GPU:
            devices = shown.setdefault(process.pid, set())
            if process.device_index is not None:
                devices.add(process.device_index)
    result = []
    for job in jobs:
        pids = tuple(pid for pid in job.pids if pid in shown)
        if not pids:
            continue
        kept = tuple(sorted(set().union(*(shown[pid] for pid in pids)) & set(job.devices)))
        same = (pids, kept) == (job.pids, job.devices)
        result.append(job if same else dataclasses.replace(job, pids=pids, devices=kept))
    return tuple(result)
