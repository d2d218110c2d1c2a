"""PCIe traffic without stalling the sampler: cumulative-counter rates and a background throughput poller.

``nvmlDeviceGetPcieThroughput`` samples for about 20 ms per call, so it runs only on the
``PcieThroughputPoller`` thread; the sampler reads the latest values it published and never waits.
"""

from __future__ import annotations

import threading

import pynvml

from gpusight.backends.nvml.errors import UNSUPPORTED_CODES

KIB = 1024
"""NVML reports PCIe throughput in KB/s, meaning 1024 bytes."""

_COUNTER_WIDTH_32 = 1 << 32


class CounterRate:
    """Turns a cumulative byte counter into bytes per second between two readings."""

    def __init__(self) -> None:
        self._last: tuple[int, float] | None = None

    def update(self, value: int, timestamp: float, width_bits: int = 64) -> float | None:
        """Record ``value`` read at ``timestamp`` (seconds); the rate since the previous reading, or None.

        None on the first reading, when no time passed, and when a 64-bit counter went backwards
        (a driver reload reset it). 32-bit counters wrap and are unwrapped.
        """
        last, self._last = self._last, (value, timestamp)
        if last is None:
            return None
        previous, previous_time = last
        elapsed = timestamp - previous_time
        if elapsed <= 0:
            return None
        delta = value - previous
        if delta < 0:
            if width_bits != 32:
                return None
            delta += _COUNTER_WIDTH_32
        return delta / elapsed


class PcieThroughputPoller:
    """A daemon thread that loops over the watched GPUs calling ``nvmlDeviceGetPcieThroughput``.

    The thread starts with the first ``watch`` and stops on ``close``. A GPU that answers
    NOT_SUPPORTED is dropped and reads None from then on.
    """

    THREAD_NAME = "gpusight-nvml-pcie"
    """Name of the background thread."""

    def __init__(self, pause_s: float = 0.1) -> None:
        self._pause_s = pause_s
        self._lock = threading.Lock()
        self._handles: dict[int, object] = {}
        self._latest: dict[int, tuple[float | None, float | None]] = {}
        self._unsupported: set[int] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, index: int, handle: object) -> None:
        """Poll device ``index`` through ``handle`` from now on (no-op if it is unsupported or closed)."""
        with self._lock:
            if index in self._unsupported or self._stop.is_set():
                return
            self._handles[index] = handle
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self.THREAD_NAME, daemon=True)
                self._thread.start()

    def forget(self, index: int) -> None:
        """Stop polling device ``index`` (lost or closed) and drop its values."""
        with self._lock:
            self._handles.pop(index, None)
            self._latest.pop(index, None)
            self._unsupported.discard(index)

    def latest(self, index: int) -> tuple[float | None, float | None]:
        """The most recent (TX, RX) bytes per second published for ``index``; (None, None) before any."""
        with self._lock:
            return self._latest.get(index, (None, None))

    @property
    def running(self) -> bool:
        """True while the background thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def close(self, timeout: float = 2.0) -> None:
        """Stop the thread and wait for it (at most ``timeout`` seconds)."""
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                devices = list(self._handles.items())
            for index, handle in devices:
                if self._stop.is_set():
                    return
                self._poll_one(index, handle)
            self._stop.wait(self._pause_s)

    def _poll_one(self, index: int, handle: object) -> None:
        rates: list[float | None] = []
        for counter in (pynvml.NVML_PCIE_UTIL_TX_BYTES, pynvml.NVML_PCIE_UTIL_RX_BYTES):
            try:
                rates.append(float(pynvml.nvmlDeviceGetPcieThroughput(handle, counter)) * KIB)
            except pynvml.NVMLError as error:
                if error.value in UNSUPPORTED_CODES:
                    with self._lock:
                        self._handles.pop(index, None)
                        self._unsupported.add(index)
                        self._latest[index] = (None, None)
                    return
                rates.append(None)
        with self._lock:
            if index in self._handles:
                self._latest[index] = (rates[0], rates[1])
