"""What the rules see on one evaluation: the snapshot indexed for quick lookups, cached window means and the
per-evaluation analyses several rules share (which processes train, how each trainer is fed, which jobs are
imbalanced or held back by a straggler)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpusight.advice.config import Thresholds
from gpusight.advice.feeds import Feed, feed_of
from gpusight.advice.jobs import TRAINER_KINDS, Imbalance, Job, Straggler, build_jobs, find_imbalances, find_stragglers
from gpusight.facts.speed import JobSpeed, job_speed
from gpusight.sampling.history import History, MetricSummary, summarize
from gpusight.snapshot.model import (
    Advice,
    DeviceSample,
    JobSample,
    MigDeviceSample,
    ProcessRole,
    ProcessSample,
    Snapshot,
    WorkloadKind,
)


@dataclass(frozen=True, slots=True)
class Finding:
    """A rule's advice for a condition that holds now, and the GPUs it concerns."""

    advice: Advice
    """The advice to show while the condition holds."""
    devices: frozenset[int] = frozenset()
    """Indexes of the GPUs it is about (a GPU with any finding is not called healthy)."""


class Context:
    """The current snapshot, indexed by device and trainer, with window statistics from the history and
    the analyses several rules share: how each trainer is fed and which multi-GPU jobs are imbalanced.

    Built once per evaluation and shared by all rules. Window statistics, feeds and imbalances
    are computed on first use and cached, and only the newest samples within the window are
    read, so a call costs O(processes + devices x window) whatever the history's length.
    """

    def __init__(
        self,
        snapshot: Snapshot,
        history: History,
        thresholds: Thresholds,
        held_for: Callable[[str], float] = lambda advice_id: 0.0,
    ) -> None:
        self.snapshot = snapshot
        """The snapshot being advised on."""
        self.history = history
        """History, whose newest sample is ``snapshot``."""
        self.thresholds = thresholds
        """Thresholds in force."""
        self.now = snapshot.timestamp
        """Time of the snapshot, epoch seconds (never the wall clock)."""
        self.held_for = held_for
        """Seconds a condition (by advice id) has been holding before this evaluation."""
        self.devices: dict[int, DeviceSample] = {d.index: d for d in snapshot.devices if not d.lost}
        """Devices that answered, by index."""
        self.gpu_processes: dict[int, list[ProcessSample]] = {}
        """GPU processes by device index, in pid order."""
        self.workers: dict[int, list[ProcessSample]] = {}
        """DataLoader workers by trainer pid, in pid order."""
        for process in sorted(snapshot.processes, key=lambda p: p.pid):
            if process.role == ProcessRole.GPU and process.device_index is not None:
                self.gpu_processes.setdefault(process.device_index, []).append(process)
            elif process.role == ProcessRole.DATALOADER_WORKER and process.trainer_pid is not None:
                self.workers.setdefault(process.trainer_pid, []).append(process)
        self.mig: dict[tuple[int, int], MigDeviceSample] = {
            (mig.device_index, mig.gpu_instance_id): mig
            for mig in snapshot.mig_devices
            if mig.gpu_instance_id is not None and mig.device_index in self.devices
        }
        """MIG devices of answering GPUs, by (parent GPU index, GPU instance id)."""
        self.mig_processes: dict[tuple[int, int], list[ProcessSample]] = {}
        """GPU processes running on a MIG device, by (parent GPU index, GPU instance id), in pid order."""
        for index, processes in self.gpu_processes.items():
            for process in processes:
                if process.gpu_instance_id is not None:
                    self.mig_processes.setdefault((index, process.gpu_instance_id), []).append(process)
        self.job_of: dict[int, JobSample] = {pid: job for job in snapshot.jobs for pid in job.pids}
        """The job of each GPU process, by pid (empty for recordings made before jobs existed)."""
        self.cores = len(snapshot.host.cpu_percent_per_core)
        """Logical cores on the host (0 when unknown)."""
        self._counts: dict[float, int] = {}
        self._stats: dict[tuple[int | None, str, float], MetricSummary | None] = {}
        self._feeds: dict[int, list[Feed]] = {}
        self._jobs: list[Job] | None = None
        self._imbalances: list[Imbalance] | None = None
        self._stragglers: list[Straggler] | None = None
        self._speeds: dict[int, JobSpeed] = {}
        self._utils: dict[int, float | None] = {}
        self._trains: dict[int, tuple[ProcessSample, bool]] = {}

    def samples_within(self, seconds: float) -> int:
        """How many of the newest history samples lie within ``seconds`` before the snapshot."""
        count = self._counts.get(seconds)
        if count is None:
            count = _count_recent(self.history, self.now - seconds)
            self._counts[seconds] = count
        return count

    def device_stat(self, index: int, metric: str, seconds: float | None = None) -> MetricSummary | None:
        """Min/mean/max of a device metric over the window (``window_s`` when None); None when unknown."""
        key = (index, metric, self.thresholds.window_s if seconds is None else seconds)
        try:
            return self._stats[key]
        except KeyError:
            stat = self._stats[key] = summarize(self.history.device(index, metric, self.samples_within(key[2])))
            return stat

    def host_stat(self, metric: str, seconds: float | None = None) -> MetricSummary | None:
        """Min/mean/max of a host metric over the window (``window_s`` when None); None when unknown."""
        seconds = self.thresholds.window_s if seconds is None else seconds
        key = (None, metric, seconds)
        if key not in self._stats:
            self._stats[key] = summarize(self.history.host(metric, self.samples_within(seconds)))
        return self._stats[key]

    def util(self, index: int) -> float | None:
        """Mean NVML GPU utilization of a device over the window; None on a GPU in MIG mode, whose figure (when
        a driver gives one at all) is no one job's: its instances are advised on by the MIG rules. Computed once per
        evaluation: most rules ask for it."""
        try:
            return self._utils[index]
        except KeyError:
            pass
        device = self.devices.get(index)
        stat = None if device is not None and device.mig_mode else self.device_stat(index, "utilization_gpu_percent")
        util = self._utils[index] = None if stat is None else stat.mean
        return util

    def idle_cores(self) -> float | None:
        """Cores left idle on average over the window; None when host CPU is unknown."""
        stat = self.host_stat("cpu_percent")
        if stat is None or not self.cores:
            return None
        return self.cores * (100.0 - stat.mean) / 100.0

    def idle_cores_needed(self) -> float:
        """Idle cores needed before more workers are advised: ``min_idle_cores``, or ``min_idle_core_share``
        of the cores on a host too small for that (at least one)."""
        share = max(1.0, self.cores * self.thresholds.min_idle_core_share)
        return min(self.thresholds.min_idle_cores, share)

    def free_host_memory(self) -> int | None:
        """Host memory not in use (total minus used) now; None when unknown."""
        host = self.snapshot.host
        if host.memory_total_bytes is None or host.memory_used_bytes is None:
            return None
        return max(0, host.memory_total_bytes - host.memory_used_bytes)

    def kind_of(self, process: ProcessSample) -> WorkloadKind:
        """The workload kind of a GPU process's job; unknown when it is in no job."""
        job = self.job_of.get(process.pid)
        return WorkloadKind.UNKNOWN if job is None else job.kind

    def trains(self, process: ProcessSample) -> bool:
        """True when a GPU process gets trainer advice: training and unknown kinds, and a notebook that shows
        training behaviour (DataLoader workers or a ``gpusight.torch`` record); never an inference server. Judged
        once per process sample and evaluation: several rules ask about every process."""
        known = self._trains.get(id(process))
        if known is None or known[0] is not process:
            known = self._trains[id(process)] = (process, self._judge_trains(process))
        return known[1]

    def _judge_trains(self, process: ProcessSample) -> bool:
        """:meth:`trains`, uncached."""
        kind = self.kind_of(process)
        if kind in TRAINER_KINDS:
            return True
        if kind != WorkloadKind.NOTEBOOK:
            return False
        has_workers = bool(self.workers.get(process.pid)) or bool(process.num_workers)
        return has_workers or has_torch_record(process)

    def trainers(self) -> list[tuple[int, ProcessSample]]:
        """(device index, GPU process) for every process that trains (:meth:`trains`) on an answering device,
        in (device, pid) order."""
        return [
            (index, process)
            for index in sorted(self.gpu_processes)
            if index in self.devices
            for process in self.gpu_processes[index]
            if self.trains(process)
        ]

    def feeds_on(self, index: int) -> list[Feed]:
        """How each process that trains on device ``index`` is fed, in pid order (empty: no trainer there)."""
        feeds = self._feeds.get(index)
        if feeds is None:
            feeds = [
                feed_of(trainer, tuple(self.workers.get(trainer.pid, ())), self.thresholds)
                for trainer in self.gpu_processes.get(index, [])
                if self.trains(trainer)
            ]
            self._feeds[index] = feeds
        return feeds

    def jobs(self) -> list[Job]:
        """The snapshot's jobs with their GPU processes on answering GPUs, by job id."""
        if self._jobs is None:
            self._jobs = build_jobs(self.snapshot.jobs, self.gpu_processes, set(self.devices))
        return self._jobs

    def job_speed(self, job: Job) -> JobSpeed:
        """The speed its ranks report (:func:`~gpusight.facts.speed.job_speed`): throughput, MFU/HFU, breakdown."""
        speed = self._speeds.get(job.sample.id)
        if speed is None:
            speed = self._speeds[job.sample.id] = job_speed(job.sample, (rank.process for rank in job.ranks))
        return speed

    def imbalances(self) -> list[Imbalance]:
        """Trainer jobs whose busiest GPU is well above the mean of its others (``imbalance_gap_percent``)."""
        if self._imbalances is None:
            self._imbalances = find_imbalances(self.jobs(), self.util, self.thresholds.imbalance_gap_percent)
        return self._imbalances

    def stragglers(self) -> list[Straggler]:
        """Trainer jobs whose slowest rank is well below its peers' median (``straggler_gap_percent``)."""
        if self._stragglers is None:
            thresholds = self.thresholds
            self._stragglers = find_stragglers(
                self.jobs(), self.util, thresholds.straggler_gap_percent, thresholds.straggler_peer_util_percent
            )
        return self._stragglers


def has_torch_record(process: ProcessSample) -> bool:
    """True when the process publishes a ``gpusight.torch`` status record (any of its measured fields is known)."""
    return any(
        value is not None
        for value in (process.input_wait_percent, process.steps_per_second, process.loader_num_workers, process.autocast)
    )


def _count_recent(history: History, cutoff: float) -> int:
    """Number of newest timestamps at or after ``cutoff``, reading only about that many."""
    total = len(history)
    probe = 64
    while True:
        stamps = history.timestamps(min(probe, total))
        if probe >= total or (stamps and stamps[0] < cutoff):
            return sum(1 for stamp in stamps if stamp >= cutoff)
        probe *= 2
