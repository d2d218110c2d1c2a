"""Jobs as the collector grouped them (``Snapshot.jobs``), their ranks, and the two ways a job's GPUs fall out of step.

Jobs are never guessed here: two runs of one user are two jobs unless the collector found evidence
(a launcher, a distributed environment, a shared non-shell parent, one process on several GPUs)
that they work together. Old recordings without jobs leave these analyses empty.

- An *imbalance* is a job whose busiest GPU is well above the mean of its others: the pattern of
  ``nn.DataParallel``, which scatters and gathers on one GPU.
- A *straggler* is a multi-process job whose slowest rank's GPU is well below the median of its
  peers. In DistributedDataParallel the fast ranks wait for the slow one inside NCCL collectives,
  whose kernels count as "busy" in NVML utilization, so the peers read high while the straggler reads low.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from statistics import median

from gpusight.snapshot.model import JobSample, ProcessSample, ScopeKind, WorkloadKind
from gpusight.textsafe import safe_text

EVIDENCE_LENGTH = 80
"""Longest part of a job's own evidence quoted in advice."""

TRAINER_KINDS = frozenset({WorkloadKind.TRAINING, WorkloadKind.UNKNOWN})
"""Workload kinds that get trainer advice without further evidence."""


@dataclass(frozen=True, slots=True)
class Rank:
    """One GPU process of a job on one GPU."""

    process: ProcessSample
    """The GPU process."""
    device: int
    """The GPU it runs on."""

    def label(self) -> str:
        """``"rank 5 (PID 4105)"``, or ``"PID 4105"`` when its rank is unknown."""
        pid = self.process.pid
        return f"PID {pid}" if self.process.rank is None else f"rank {self.process.rank} (PID {pid})"


@dataclass(frozen=True, slots=True)
class Job:
    """A job from the snapshot with its GPU processes on answering GPUs, in rank order."""

    sample: JobSample
    """The job as the collector reported it."""
    ranks: tuple[Rank, ...]
    """Its GPU processes on answering GPUs, in the job's pid order (rank order where ranks are known)."""

    @property
    def scope(self) -> str:
        """Advice scope of the job, e.g. ``"job3"``."""
        return ScopeKind.JOB.of(self.sample.id)

    @property
    def devices(self) -> tuple[int, ...]:
        """Indexes of its answering GPUs, ascending."""
        return tuple(sorted({rank.device for rank in self.ranks}))

    def describe(self) -> str:
        """``"job 3: 8 processes on 8 GPUs; torchrun (PID 4100) started 8 ranks"`` for the evidence.

        The job's own evidence (how it was grouped) follows, escaped: it quotes program names.
        """
        processes = len({rank.process.pid for rank in self.ranks})
        noun = "process" if processes == 1 else "processes"
        gpus = len(self.devices)
        text = f"job {self.sample.id}: {processes} {noun} on {gpus} GPU{'' if gpus == 1 else 's'}"
        how = safe_text(self.sample.evidence, EVIDENCE_LENGTH)
        return f"{text}; {how}" if how else text

    def one_rank_per_gpu(self) -> bool:
        """True when it has several processes, each on its own GPU (DistributedDataParallel's layout)."""
        pids = [rank.process.pid for rank in self.ranks]
        devices = [rank.device for rank in self.ranks]
        return len(pids) > 1 and len(set(pids)) == len(pids) and len(set(devices)) == len(devices)


@dataclass(frozen=True, slots=True)
class Imbalance:
    """A job whose busiest GPU is well above its others."""

    job: Job
    """The job."""
    busiest: int
    """Index of its busiest GPU."""
    peers: tuple[int, ...]
    """Its other GPUs."""
    utils: dict[int, float]
    """Mean utilization of each of its GPUs."""


@dataclass(frozen=True, slots=True)
class Straggler:
    """A multi-process job whose slowest rank is well below the median of its peers."""

    job: Job
    """The job."""
    slow: Rank
    """The slowest rank."""
    peers: tuple[Rank, ...]
    """Its other ranks."""
    utils: dict[int, float]
    """Mean utilization of each of the job's GPUs."""
    peer_median: float
    """Median utilization of the peers' GPUs."""


def build_jobs(jobs: tuple[JobSample, ...], processes: dict[int, list[ProcessSample]], answering: set[int]) -> list[Job]:
    """The snapshot's jobs with their GPU processes (``processes`` by device) on ``answering`` GPUs."""
    by_pid: dict[int, list[Rank]] = {}
    for index in sorted(processes):
        if index in answering:
            for process in processes[index]:
                by_pid.setdefault(process.pid, []).append(Rank(process, index))
    found = []
    for sample in sorted(jobs, key=lambda job: job.id):
        ranks = tuple(rank for pid in sample.pids for rank in by_pid.get(pid, ()))
        if ranks:
            found.append(Job(sample, ranks))
    return found


def find_imbalances(jobs: list[Job], util: Callable[[int], float | None], gap_percent: float) -> list[Imbalance]:
    """Trainer jobs on several GPUs whose busiest GPU's ``util`` exceeds the mean of its others by ``gap_percent``.

    A job with any GPU of unknown utilization is left out.
    """
    found = []
    for job in jobs:
        utils = _utils(job, util)
        if job.sample.kind not in TRAINER_KINDS or utils is None or len(utils) < 2:
            continue
        busiest = max(utils, key=lambda index: (utils[index], -index))
        peers = tuple(index for index in sorted(utils) if index != busiest)
        if utils[busiest] - sum(utils[index] for index in peers) / len(peers) >= gap_percent:
            found.append(Imbalance(job, busiest, peers, utils))
    return found


def find_stragglers(
    jobs: list[Job], util: Callable[[int], float | None], gap_percent: float, peer_util_percent: float
) -> list[Straggler]:
    """Trainer jobs of one process per GPU whose slowest rank's ``util`` is ``gap_percent`` below its peers' median.

    The peers' median must be at least ``peer_util_percent``: waiting ranks spin in NCCL kernels
    and read busy. A job with any GPU of unknown utilization is left out.
    """
    found = []
    for job in jobs:
        utils = _utils(job, util)
        if job.sample.kind not in TRAINER_KINDS or utils is None or not job.one_rank_per_gpu():
            continue
        slow = min(job.ranks, key=lambda rank: (utils[rank.device], rank.device))
        peers = tuple(rank for rank in job.ranks if rank is not slow)
        middle = median(utils[rank.device] for rank in peers)
        if middle >= peer_util_percent and middle - utils[slow.device] >= gap_percent:
            found.append(Straggler(job, slow, peers, utils, middle))
    return found


def _utils(job: Job, util: Callable[[int], float | None]) -> dict[int, float] | None:
    """Mean utilization of each of the job's GPUs; None when any is unknown."""
    utils = {}
    for index in job.devices:
        value = util(index)
        if value is None:
            return None
        utils[index] = value
    return utils
