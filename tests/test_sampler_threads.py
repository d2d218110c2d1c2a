"""History, frames and subscribers read from other threads while the sampler appends: no torn or misaligned read.

Every snapshot of the source encodes one counter ``n`` in every metric and in its timestamp, so any
read can be checked on its own: a series must hold consecutive ``n``, the timestamps read with it
the same ``n``, and a frame's snapshot, its chart columns and its metrics must all agree.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator

import pytest

from gpusight.sampling.filters import Filters
from gpusight.sampling.frame import Frame
from gpusight.sampling.history import History
from gpusight.sampling.sampler import MIN_INTERVAL, Sampler
from gpusight.snapshot.model import DeviceSample, HostSample, Snapshot, SourceKind

MIB = 1 << 20
T0 = 1_700_000_000.0
STEP = 0.01
GPUS = 4
ROUNDS = {"writer": 2000, "reader": 300, "refilter": 300}
"""Rounds each thread must have run, all at the same time, before the hammering stops."""
HANG_SECONDS = 120.0
"""Longest the hammering may take before it is called a hang (not a speed limit: 2 s is usual)."""
LASTS = (1, 2, 7, 64, 500, None)


class CounterSource:
    """Snapshot ``n`` has ``n`` (or ``n % 101`` for percentages) in every metric and time ``T0 + n * STEP``."""

    kind = SourceKind.DEMO

    def __init__(self) -> None:
        self.n = 0

    def poll(self) -> Snapshot:
        n = self.n
        self.n += 1
        devices = tuple(
            DeviceSample(
                index=index,
                utilization_gpu_percent=float(n % 101),
                utilization_memory_percent=float(n % 101),
                memory_used_bytes=n * MIB,
                power_watts=float(n),
                temperature_celsius=float(n),
                clock_sm_mhz=n,
                pcie_rx_bytes_per_s=float(n),
                pcie_tx_bytes_per_s=float(n),
            )
            for index in range(GPUS)
        )
        host = HostSample(cpu_percent_per_core=(float(n % 101),), memory_used_bytes=n * MIB, swap_used_bytes=n)
        return Snapshot(timestamp=T0 + n * STEP, source=self.kind, devices=devices, host=host)

    def close(self) -> None:
        pass


def counter(timestamp: float) -> int:
    return round((timestamp - T0) / STEP)


def check_history(history: History, last: int | None) -> None:
    """Timestamps and series read together describe the same consecutive snapshots."""
    with history.reading():
        stamps = history.timestamps(last)
        series = {(index, metric): history.device(index, metric, last) for index in range(GPUS)
                  for metric in ("power_watts", "memory_used_bytes", "utilization_gpu_percent", "clock_sm_mhz")}
        swap = history.host("swap_used_bytes", last)
        size = len(history)
    ns = [counter(t) for t in stamps]
    assert len(ns) == (size if last is None else min(last, size))
    assert ns == list(range(ns[0], ns[0] + len(ns))), f"timestamps not consecutive: {ns[:3]}...{ns[-3:]}"
    scale = {"power_watts": 1, "memory_used_bytes": MIB, "clock_sm_mhz": 1}
    for (index, metric), values in series.items():
        if metric == "utilization_gpu_percent":
            expected = [float(n % 101) for n in ns]
        else:
            expected = [float(n * scale[metric]) for n in ns]
        assert values == expected, f"gpu{index} {metric} does not line up with the timestamps (last={last})"
    assert swap == [float(n) for n in ns], f"host swap does not line up with the timestamps (last={last})"


def check_single_reads(history: History, last: int) -> None:
    """Each read on its own holds consecutive snapshots, whatever the appends around it."""
    power = history.device(0, "power_watts", last)
    assert power == [power[0] + k for k in range(len(power))], "torn power series"
    ns = [counter(t) for t in history.timestamps(last)]
    assert ns == list(range(ns[0], ns[0] + len(ns))), "torn timestamps"


def check_frame(frame: Frame) -> int:
    """The frame's snapshot and charts come from the same poll and agree metric by metric; returns its ``n``."""
    snapshot = frame.snapshot
    n = counter(snapshot.timestamp)
    for device in snapshot.devices:
        assert (device.power_watts, device.temperature_celsius, device.memory_used_bytes) == (n, n, n * MIB)
    for level in range(len(frame.charts.levels)):
        for index in range(GPUS):
            power = frame.charts.series(level, index, "power_watts", 30, paged=False)
            assert power[-1] == n, f"level {level} newest column is not the snapshot's poll"
            for metric in ("temperature_celsius", "pcie_rx_bytes_per_s", "pcie_tx_bytes_per_s"):
                assert frame.charts.series(level, index, metric, 30, paged=False) == power, metric
            memory = frame.charts.series(level, index, "memory_used_bytes", 30, paged=False)
            assert memory == [None if p is None else p * MIB for p in power]
            utilization = frame.charts.series(level, index, "utilization_gpu_percent", 30, paged=False)
            assert all((u is None) == (p is None) and (u is None or 0 <= u <= 100) for u, p in zip(utilization, power,
                                                                                                       strict=True))
    return n


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Let the interpreter switch threads every microsecond, so interleavings happen inside short reads."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


class Hammer:
    """Runs ``work`` in a loop on its own thread until stopped; keeps the first failure."""

    def __init__(self, name: str, work, stop: threading.Event, failures: list[BaseException]) -> None:
        self.rounds = 0
        self._work, self._stop, self._failures = work, stop, failures
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._work(self.rounds)
                self.rounds += 1
        except BaseException as exc:  # handed to the test thread
            self._failures.append(exc)
            self._stop.set()


def run_hammers(work: dict[str, object], rounds: dict[str, int]) -> dict[str, int]:
    """Run every ``work`` on its own thread until each has done its ``rounds`` (or one fails); the rounds run."""
    stop = threading.Event()
    failures: list[BaseException] = []
    hammers = {name: Hammer(name, fn, stop, failures) for name, fn in work.items()}
    for hammer in hammers.values():
        hammer.thread.start()
    deadline = time.monotonic() + HANG_SECONDS
    try:
        while not stop.wait(0.05) and any(hammers[name].rounds < least for name, least in rounds.items()):
            assert time.monotonic() < deadline, f"the threads hang: {[(n, h.rounds) for n, h in hammers.items()]}"
    finally:
        stop.set()
        for hammer in hammers.values():
            hammer.thread.join(10)
    if failures:
        raise failures[0]
    return {name: hammer.rounds for name, hammer in hammers.items()}


def test_reads_from_other_threads_never_see_a_torn_or_misaligned_history_or_frame(fast_switching):
    sampler = Sampler(CounterSource(), history=History(capacity=1000))
    delivered: list[int] = []

    def subscriber(frame: Frame) -> None:  # called on the thread that changes the filters
        delivered.append(check_frame(frame))

    sampler.subscribe(subscriber)
    sampler.poll_once()

    def read(round_: int) -> None:
        last = LASTS[round_ % len(LASTS)]
        check_history(sampler.history, last)
        check_single_reads(sampler.history, last or 1000)
        frame = sampler.latest_frame
        assert frame is not None
        check_frame(frame)

    rounds = run_hammers(
        {
            "writer": lambda _: sampler.poll_once(),
            "reader": read,
            "refilter": lambda _: sampler.set_filters(Filters()),
        },
        ROUNDS,
    )
    assert delivered == sorted(delivered), "a subscriber was handed an older frame after a newer one"
    assert len(delivered) == rounds["refilter"]


def test_a_running_sampler_hands_subscribers_consistent_frames_in_order(fast_switching):
    sampler = Sampler(CounterSource(), interval=MIN_INTERVAL, history=History(capacity=100))
    delivered: list[int] = []
    failures: list[BaseException] = []

    def subscriber(frame: Frame) -> None:
        try:
            delivered.append(check_frame(frame))
        except BaseException as exc:
            failures.append(exc)

    sampler.subscribe(subscriber)
    sampler.start()
    try:
        assert sampler.wait_for_first(10)
        deadline = time.monotonic() + 10
        while len(delivered) < 8 and time.monotonic() < deadline:
            check_history(sampler.history, 5)  # while the sampler thread polls
    finally:
        sampler.stop()
    assert not failures, failures[0]
    assert len(delivered) >= 8
    assert delivered == list(range(delivered[0], delivered[0] + len(delivered)))
