"""Multi-GPU jobs as the process tree tells them, and the ones whose busiest GPU is well above its peers.

Shared by the imbalance rule and by gpu_underused (a GPU held back by a busier peer is not
under-used by its own code) through :meth:`~gputop.advice.context.Context.imbalances`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gputop.collect.model import ProcessSample, ScopeKind


@dataclass(frozen=True, slots=True)
class Job:
    """GPUs that work together, as far as the process tree tells."""

    scope: str
    """Advice scope: the process or parent pid, or the lowest GPU for a user's processes."""
    description: str
    """How the job was recognised, for the evidence."""
    devices: tuple[int, ...]
    """Its GPU indexes, ascending."""
    by_user_only: bool
    """True when grouped only because one user owns the processes (a weaker guess)."""


@dataclass(frozen=True, slots=True)
class Imbalance:
    """A job whose busiest GPU is well above its peers."""

    job: Job
    """The job."""
    busiest: int
    """Index of its busiest GPU."""
    peers: tuple[int, ...]
    """Its other GPUs."""
    utils: dict[int, float]
    """Mean utilization of each of its GPUs."""


def find_jobs(trainers: list[tuple[int, ProcessSample]]) -> list[Job]:
    """Multi-GPU jobs among (device index, GPU process) pairs, deduplicated by device set.

    A job is one process on several GPUs, the GPU processes sharing a parent (torchrun or
    mpirun children, scope of the parent), or, for processes in neither, one user's GPU
    processes spread over several GPUs.
    """
    by_pid: dict[int, set[int]] = {}
    by_parent: dict[int, dict[int, set[int]]] = {}
    for index, process in trainers:
        by_pid.setdefault(process.pid, set()).add(index)
        if process.ppid is not None and process.ppid > 1:
            by_parent.setdefault(process.ppid, {}).setdefault(process.pid, set()).add(index)
    found: list[Job] = []
    grouped: set[int] = set()
    for pid, devices in sorted(by_pid.items()):
        if len(devices) > 1:
            found.append(Job(ScopeKind.PID.of(pid), f"PID {pid}", tuple(sorted(devices)), False))
            grouped.add(pid)
    for parent, children in sorted(by_parent.items()):
        devices = set().union(*children.values())
        if len(children) > 1 and len(devices) > 1:
            description = f"{len(children)} processes under PID {parent}"
            found.append(Job(ScopeKind.PID.of(parent), description, tuple(sorted(devices)), False))
            grouped.update(children)
    by_user: dict[str, set[int]] = {}
    for index, process in trainers:
        if process.pid not in grouped and process.user is not None:
            by_user.setdefault(process.user, set()).add(index)
    for _user, devices in sorted(by_user.items()):
        if len(devices) > 1:
            description = f"{len(devices)} GPUs used by one user"
            found.append(Job(ScopeKind.GPU.of(min(devices)), description, tuple(sorted(devices)), True))
    unique: dict[tuple[int, ...], Job] = {}
    for job in found:
        unique.setdefault(job.devices, job)
    return list(unique.values())


def find_imbalances(jobs: list[Job], util: Callable[[int], float | None], gap_percent: float) -> list[Imbalance]:
    """The jobs whose busiest GPU's ``util`` exceeds the mean of its peers' by ``gap_percent`` points or more.

    A job with any GPU of unknown utilization is left out.
    """
    found = []
    for job in jobs:
        known = {index: util(index) for index in job.devices}
        utils = {index: value for index, value in known.items() if value is not None}
        if len(utils) < len(known):
            continue
        busiest = max(job.devices, key=lambda index: (utils[index], -index))
        peers = tuple(index for index in job.devices if index != busiest)
        if utils[busiest] - sum(utils[index] for index in peers) / len(peers) >= gap_percent:
            found.append(Imbalance(job, busiest, peers, utils))
    return found
