"""Bounded ring-buffer history of device and host metrics, behind the charts and the advice rules."""

from __future__ import annotations

import math
import threading
from array import array
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from gpusight.snapshot.model import Advice, ProcessRole, ProcessSample, Snapshot

DEFAULT_CAPACITY = 3600
"""Samples kept per metric: 15 minutes at 4 Hz, 30 minutes at the default 0.5 s interval."""

DEVICE_METRICS = (
    "utilization_gpu_percent",
    "utilization_memory_percent",
    "memory_used_bytes",
    "power_watts",
    "temperature_celsius",
    "fan_percent",
    "clock_sm_mhz",
    "pcie_rx_bytes_per_s",
    "pcie_tx_bytes_per_s",
    "nvlink_rx_bytes_per_s",
    "nvlink_tx_bytes_per_s",
    "sm_active_percent",
    "tensor_active_percent",
    "dram_active_percent",
)
"""DeviceSample fields whose history is kept."""

DERIVED_DEVICE_METRICS = (
    "trainer_cpu_percent",
    "dataloader_cpu_percent",
    "trainer_cpu_wait_percent",
    "dataloader_cpu_wait_percent",
)
"""Per-device series computed from each snapshot's processes, aligned with the device metrics so rules can
compare what the CPU side did at the same instants as the GPU (the periodic-stall rule):
``trainer_cpu_percent`` is the summed CPU of the GPU processes on the device, ``dataloader_cpu_percent`` the
summed CPU of their DataLoader workers (0 when every GPU process there is known to have none; missing when
nothing is known); the ``*_cpu_wait_percent`` series sum their run-queue waits (``cpu_wait_percent``) alike,
missing where no wait is known. Not part of exports, which keep to ``DEVICE_METRICS``."""

HOST_METRICS = ("cpu_percent", "iowait_percent", "memory_used_bytes", "swap_used_bytes")
"""Host series kept; ``cpu_percent`` is the mean over all cores."""


class RingBuffer:
    """A fixed-capacity series of floats where a missing value is stored as NaN and read back as None."""

    __slots__ = ("_capacity", "_data", "_start", "_size")

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self._capacity = capacity
        self._data = array("d", [math.nan]) * capacity
        self._start = 0
        self._size = 0

    def __len__(self) -> int:
        return self._size

    @property
    def capacity(self) -> int:
        """Most values held; older ones are overwritten."""
        return self._capacity

    def append(self, value: float | None) -> None:
        """Add a value (None for missing), dropping the oldest when full."""
        stored = math.nan if value is None else float(value)
        if self._size < self._capacity:
            self._data[(self._start + self._size) % self._capacity] = stored
            self._size += 1
        else:
            self._data[self._start] = stored
            self._start = (self._start + 1) % self._capacity

    def values(self, last: int | None = None) -> list[float | None]:
        """The newest ``last`` values (all when None), oldest first, missing ones as None."""
        count = self._size if last is None else max(0, min(last, self._size))
        cap = self._capacity
        first = (self._start + self._size - count) % cap
        if first + count <= cap:
            chunk = self._data[first : first + count].tolist()
        else:
            chunk = self._data[first:].tolist() + self._data[: first + count - cap].tolist()
        return [None if v != v else v for v in chunk]


@dataclass(frozen=True, slots=True)
class MetricSummary:
    """Minimum, mean and maximum of a metric's known values over a window."""

    minimum: float
    """Smallest value."""
    mean: float
    """Arithmetic mean."""
    maximum: float
    """Largest value."""
    count: int
    """How many known values went into it."""


class History:
    """Per-metric ring buffers for every device and the host, aligned on one timestamp series.

    Memory is bounded by ``capacity`` values per series whatever the run length. A device that
    appears later is padded with missing values so every series lines up with ``timestamps()``.

    One thread appends (the sampler's) while others read (an export, the UI): every method holds
    one lock, so a read never sees half an append. Reads that must line up with each other, such
    as ``timestamps(n)`` and ``device(i, m, n)``, go together inside ``with history.reading():``.
    """

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = capacity
        """Samples kept per series."""
        self._latest: Snapshot | None = None
        self._lock = threading.RLock()  # re-entrant: summaries read through the public methods
        self._timestamps = RingBuffer(capacity)
        self._devices: dict[int, dict[str, RingBuffer]] = {}
        self._host = {name: RingBuffer(capacity) for name in HOST_METRICS}
        self._advice: deque[tuple[float, tuple[Advice, ...]]] = deque(maxlen=capacity)

    @property
    def latest(self) -> Snapshot | None:
        """The most recent snapshot appended, as it was appended (the snapshot on screen, filtered and with its advice,
        is the sampler's ``latest_frame``)."""
        return self._latest

    def __len__(self) -> int:
        with self._lock:
            return len(self._timestamps)

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Hold off appends for the reads made inside the ``with`` block, so they all see the same samples.

        Keep the block short: the sampler waits for it.
        """
        with self._lock:
            yield

    def clear(self) -> None:
        """Forget every sample (a replay jumped to another time); ``latest`` stays until the next append."""
        with self._lock:
            self._timestamps = RingBuffer(self.capacity)
            self._devices = {}
            self._host = {name: RingBuffer(self.capacity) for name in HOST_METRICS}

    def append(self, snapshot: Snapshot) -> None:
        """Record the device and host metrics of ``snapshot``."""
        with self._lock:
            self._append(snapshot)

    def _append(self, snapshot: Snapshot) -> None:
        self._latest = snapshot
        self._timestamps.append(snapshot.timestamp)
        seen = set()
        derived = _derived_device_metrics(snapshot)
        for device in snapshot.devices:
            seen.add(device.index)
            series = self._devices.get(device.index)
            if series is None:
                series = self._new_device_series()
                self._devices[device.index] = series
            for name in DEVICE_METRICS:
                series[name].append(getattr(device, name))
            values = derived.get(device.index, (None,) * len(DERIVED_DEVICE_METRICS))
            for name, value in zip(DERIVED_DEVICE_METRICS, values, strict=True):
                series[name].append(value)
        for index, series in self._devices.items():
            if index not in seen:
                for ring in series.values():
                    ring.append(None)
        host = snapshot.host
        cores = host.cpu_percent_per_core
        self._host["cpu_percent"].append(sum(cores) / len(cores) if cores else None)
        self._host["iowait_percent"].append(host.iowait_percent)
        self._host["memory_used_bytes"].append(host.memory_used_bytes)
        self._host["swap_used_bytes"].append(host.swap_used_bytes)

    def _new_device_series(self) -> dict[str, RingBuffer]:
        series = {name: RingBuffer(self.capacity) for name in DEVICE_METRICS + DERIVED_DEVICE_METRICS}
        for _ in range(len(self._timestamps) - 1):
            for ring in series.values():
                ring.append(None)
        return series

    def record_advice(self, advice: tuple[Advice, ...]) -> None:
        """Note the advice standing at the latest sample (the sampler calls this once the rules have run).

        Only changes are kept (a new entry when the ids or severities change, else the latest texts replace the last
        entry's), at most ``capacity`` of them, so the log costs little however long the session runs.
        """
        with self._lock:
            stamps = self._timestamps.values(1)
            if not stamps or stamps[0] is None:
                return
            key = [(a.id, a.severity) for a in advice]
            if self._advice and [(a.id, a.severity) for a in self._advice[-1][1]] == key:
                self._advice[-1] = (self._advice[-1][0], advice)
            else:
                self._advice.append((stamps[0], advice))

    def advice_log(self) -> list[tuple[float, tuple[Advice, ...]]]:
        """(time, advice standing from then on) at each change noted by :meth:`record_advice`, oldest first."""
        with self._lock:
            return list(self._advice)

    def timestamps(self, last: int | None = None) -> list[float]:
        """Epoch seconds of the newest ``last`` samples, oldest first."""
        with self._lock:
            return [t for t in self._timestamps.values(last) if t is not None]

    def device_indexes(self) -> list[int]:
        """Indexes of every device seen so far."""
        with self._lock:
            return sorted(self._devices)

    def device(self, index: int, metric: str, last: int | None = None) -> list[float | None]:
        """Series of a device metric (one of DEVICE_METRICS or DERIVED_DEVICE_METRICS); empty for an unknown device."""
        if metric not in DEVICE_METRICS and metric not in DERIVED_DEVICE_METRICS:
            raise KeyError(f"untracked device metric {metric!r}")
        with self._lock:
            series = self._devices.get(index)
            return series[metric].values(last) if series else []

    def host(self, metric: str, last: int | None = None) -> list[float | None]:
        """Series of a host metric (one of HOST_METRICS)."""
        with self._lock:
            return self._host[metric].values(last)

    def samples_within(self, seconds: float) -> int:
        """How many of the newest samples fall within ``seconds`` of the latest one."""
        with self._lock:
            size = len(self._timestamps)
            if size == 0:
                return 0
            # Read back in growing chunks so a short window never copies the whole history.
            chunk = 64
            while True:
                stamps = self.timestamps(min(chunk, size))
                cutoff = stamps[-1] - seconds
                for offset, t in enumerate(reversed(stamps)):
                    if t < cutoff:
                        return offset
                if len(stamps) == size:
                    return size
                chunk *= 4

    def device_summary(self, index: int, metric: str, seconds: float | None = None) -> MetricSummary | None:
        """Min/mean/max of a device metric over the last ``seconds`` (all history when None)."""
        with self._lock:
            last = None if seconds is None else self.samples_within(seconds)
            series = self.device(index, metric, last)
        return summarize(series)

    def host_summary(self, metric: str, seconds: float | None = None) -> MetricSummary | None:
        """Min/mean/max of a host metric over the last ``seconds`` (all history when None)."""
        with self._lock:
            last = None if seconds is None else self.samples_within(seconds)
            series = self.host(metric, last)
        return summarize(series)


def _derived_device_metrics(snapshot: Snapshot) -> dict[int, tuple[float | None, ...]]:
    """Per device index, the ``DERIVED_DEVICE_METRICS`` in order: summed CPU of its GPU processes, summed CPU of
    their DataLoader workers, and the same two for run-queue wait; None when unknown."""
    trainers: dict[int, list[ProcessSample]] = {}
    workers: dict[int, list[ProcessSample]] = {}
    no_workers: dict[int, bool] = {}
    for process in snapshot.processes:
        index = process.device_index
        if index is None:
            continue
        if process.role == ProcessRole.DATALOADER_WORKER:
            workers.setdefault(index, []).append(process)
            continue
        trainers.setdefault(index, []).append(process)
        no_workers[index] = no_workers.get(index, True) and process.num_workers == 0
    result: dict[int, tuple[float | None, ...]] = {}
    for index in set(trainers) | set(workers):
        none_known = 0.0 if no_workers.get(index) else None
        mine, theirs = trainers.get(index, []), workers.get(index, [])
        result[index] = (
            _summed(mine, "cpu_percent"),
            _summed(theirs, "cpu_percent", none_known),
            _summed(mine, "cpu_wait_percent"),
            _summed(theirs, "cpu_wait_percent", none_known),
        )
    return result


def _summed(processes: list[ProcessSample], field: str, empty: float | None = None) -> float | None:
    """The sum of ``field`` over ``processes`` where known; ``empty`` when there are no processes, None when no
    value is known."""
    if not processes:
        return empty
    known = [value for value in (getattr(process, field) for process in processes) if value is not None]
    return sum(known) if known else None


def summarize(values: list[float | None]) -> MetricSummary | None:
    """Summarize the known values of a series; None when none is known."""
    known = [v for v in values if v is not None]
    if not known:
        return None
    return MetricSummary(min(known), sum(known) / len(known), max(known), len(known))
