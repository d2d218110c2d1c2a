"""What the rules see on one evaluation: the snapshot indexed for quick lookups, cached window means and the
per-evaluation analyses several rules share (how each trainer is fed, which multi-GPU jobs are imbalanced)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gputop.advice.config import Thresholds
from gputop.advice.feeds import Feed, feed_of
from gputop.advice.jobs import Imbalance, find_imbalances, find_jobs
from gputop.collect.history import History, MetricSummary, summarize
from gputop.collect.model import (
    Advice,
    DeviceSample,
    ProcessRole,
    ProcessSample,
    Snapshot,
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
        self.cores = len(snapshot.host.cpu_percent_per_core)
        """Logical cores on the host (0 when unknown)."""
        self._counts: dict[float, int] = {}
        self._stats: dict[tuple[int | None, str, float], MetricSummary | None] = {}
        self._feeds: dict[int, list[Feed]] = {}
        self._imbalances: list[Imbalance] | None = None

    def samples_within(self, seconds: float) -> int:
        """How many of the newest history samples lie within ``seconds`` before the snapshot."""
        count = self._counts.get(seconds)
        if count is None:
            count = _count_recent(self.history, self.now - seconds)
            self._counts[seconds] = count
        return count

    def device_stat(self, index: int, metric: str, seconds: float | None = None) -> MetricSummary | None:
        """Min/mean/max of a device metric over the window (``window_s`` when None); None when unknown."""
        seconds = self.thresholds.window_s if seconds is None else seconds
        key = (index, metric, seconds)
        if key not in self._stats:
            self._stats[key] = summarize(self.history.device(index, metric, self.samples_within(seconds)))
        return self._stats[key]

    def host_stat(self, metric: str, seconds: float | None = None) -> MetricSummary | None:
        """Min/mean/max of a host metric over the window (``window_s`` when None); None when unknown."""
        seconds = self.thresholds.window_s if seconds is None else seconds
        key = (None, metric, seconds)
        if key not in self._stats:
            self._stats[key] = summarize(self.history.host(metric, self.samples_within(seconds)))
        return self._stats[key]

    def util(self, index: int) -> float | None:
        """Mean NVML GPU utilization of a device over the window."""
        stat = self.device_stat(index, "utilization_gpu_percent")
        return None if stat is None else stat.mean

    def idle_cores(self) -> float | None:
        """Cores left idle on average over the window; None when host CPU is unknown."""
        stat = self.host_stat("cpu_percent")
        if stat is None or not self.cores:
            return None
        return self.cores * (100.0 - stat.mean) / 100.0

    def trainers(self) -> list[tuple[int, ProcessSample]]:
        """(device index, GPU process) for every GPU process on an answering device, in (device, pid) order."""
        return [
            (index, process)
            for index in sorted(self.gpu_processes)
            if index in self.devices
            for process in self.gpu_processes[index]
        ]

    def feeds_on(self, index: int) -> list[Feed]:
        """How each GPU process on device ``index`` is fed, in pid order."""
        feeds = self._feeds.get(index)
        if feeds is None:
            feeds = [
                feed_of(trainer, tuple(self.workers.get(trainer.pid, ())), self.thresholds)
                for trainer in self.gpu_processes.get(index, [])
            ]
            self._feeds[index] = feeds
        return feeds

    def imbalances(self) -> list[Imbalance]:
        """Multi-GPU jobs whose busiest GPU is well above the mean of its peers (``imbalance_gap_percent``)."""
        if self._imbalances is None:
            jobs = find_jobs(self.trainers())
            self._imbalances = find_imbalances(jobs, self.util, self.thresholds.imbalance_gap_percent)
        return self._imbalances


def _count_recent(history: History, cutoff: float) -> int:
    """Number of newest timestamps at or after ``cutoff``, reading only about that many."""
    total = len(history)
    probe = 64
    while True:
        stamps = history.timestamps(min(probe, total))
        if probe >= total or (stamps and stamps[0] < cutoff):
            return sum(1 for stamp in stamps if stamp >= cutoff)
        probe *= 2
