"""Multi-GPU imbalance: one GPU of a job much busier than its peers."""

from __future__ import annotations

from dataclasses import dataclass

from gputop.advice.context import Context, Finding
from gputop.advice.rules.base import Rule, listing, pct


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


def jobs(ctx: Context) -> list[Job]:
    """Multi-GPU jobs, deduplicated by device set.

    A job is one process on several GPUs, the GPU processes sharing a parent (torchrun or
    mpirun children, scope of the parent), or, for processes in neither, one user's GPU
    processes spread over several GPUs.
    """
    trainers = ctx.trainers()
    by_pid: dict[int, set[int]] = {}
    by_parent: dict[int, dict[int, set[int]]] = {}
    for index, p in trainers:
        by_pid.setdefault(p.pid, set()).add(index)
        if p.ppid is not None and p.ppid > 1:
            by_parent.setdefault(p.ppid, {}).setdefault(p.pid, set()).add(index)
    found: list[Job] = []
    grouped: set[int] = set()
    for pid, devices in sorted(by_pid.items()):
        if len(devices) > 1:
            found.append(Job(f"pid{pid}", f"PID {pid}", tuple(sorted(devices)), False))
            grouped.add(pid)
    for parent, children in sorted(by_parent.items()):
        devices = set().union(*children.values())
        if len(children) > 1 and len(devices) > 1:
            found.append(Job(f"pid{parent}", f"{len(children)} processes under PID {parent}", tuple(sorted(devices)), False))
            grouped.update(children)
    by_user: dict[str, set[int]] = {}
    for index, p in trainers:
        if p.pid not in grouped and p.user is not None:
            by_user.setdefault(p.user, set()).add(index)
    for user, devices in sorted(by_user.items()):
        if len(devices) > 1:
            found.append(Job(f"gpu{min(devices)}", f"{len(devices)} GPUs used by one user", tuple(sorted(devices)), True))
    unique: dict[tuple[int, ...], Job] = {}
    for job in found:
        unique.setdefault(job.devices, job)
    return list(unique.values())


def imbalanced(ctx: Context) -> list[Imbalance]:
    """The imbalanced jobs (cached per evaluation)."""
    cached: list[Imbalance] | None = ctx.shared.get("imbalanced")
    if cached is None:
        cached = []
        for job in jobs(ctx):
            known = {index: ctx.util(index) for index in job.devices}
            utils = {index: u for index, u in known.items() if u is not None}
            if len(utils) < len(known):
                continue
            busiest = max(job.devices, key=lambda i: (utils[i], -i))
            peers = tuple(i for i in job.devices if i != busiest)
            if utils[busiest] - sum(utils[i] for i in peers) / len(peers) >= ctx.t.imbalance_gap_percent:
                cached.append(Imbalance(job, busiest, peers, utils))
        ctx.shared["imbalanced"] = cached
    return cached


def waiting_peers(ctx: Context) -> set[int]:
    """GPUs that idle because a busier GPU of their job (known from the process tree) holds them back."""
    return {i for found in imbalanced(ctx) if not found.job.by_user_only for i in found.peers}


def _evaluate(ctx: Context) -> list[Finding]:
    t = ctx.t
    out = []
    for found in imbalanced(ctx):
        busiest, peers, utils = found.busiest, found.peers, found.utils
        peer_text = listing([f"GPU {i} {pct(utils[i])}" for i in peers])
        evidence = (
            f"GPU {busiest} util {pct(utils[busiest])} vs {peer_text} over the last {t.window_s:.0f} s "
            f"({found.job.description})"
        )
        action = (
            "with nn.DataParallel, switch to DistributedDataParallel (DataParallel scatters and gathers on one GPU); "
            "otherwise look for a straggler or uneven sharding: DistributedSampler, equal per-rank batch sizes, "
            "length-bucketed sequences, and logging, evaluation or checkpointing done only on rank 0"
        )
        title = f"GPU {busiest} does much more work than the other GPUs of its job"
        out.append(RULE.finding("warn", found.job.scope, title, evidence, action, found.job.devices))
    return out


RULE = Rule("imbalance", _evaluate)
"""Busiest GPU of a job well above the mean of its peers."""
