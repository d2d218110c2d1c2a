"""Xid events without stalling the sampler: one event set, one thread blocked in ``nvmlEventSetWait_v2``.

Devices are registered from the sampler thread (``register``); the listener thread only waits on the set
and appends what arrives to a deque. Each poll ``collect``s the deque into per-GPU counts and the latest
events, so a poll never waits for an event and an event is never lost between polls.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pynvml

from gpusight.backends.nvml.errors import UNSUPPORTED_CODES, describe
from gpusight.snapshot.model import XID_RECENT_LIMIT, ErrorNote, XidEvent

XID_EVENT_TYPE: int = pynvml.nvmlEventTypeXidCriticalError
"""The event type whose data is an Xid number."""

WAIT_MS = 50
"""How long one ``nvmlEventSetWait_v2`` blocks at most: the thread notices ``close`` within this time.

Short, because a quit gives the sampler's release (this thread's end, then ``nvmlShutdown``) about 0.1 s
(``Sampler.stop``) before the process exits; a wait that times out costs the driver one idle poll of its
event file, 20 a second."""

RETRY_PAUSE_S = 1.0
"""Pause after a wait that failed (a lost GPU answers GPU_IS_LOST at once), so the thread never spins."""

NO_INSTANCE = 0xFFFFFFFF
"""Instance id NVML gives an event that hit no particular MIG instance."""


class _TryLater(Exception):
    """The GPU could not be registered now (it is lost); the next attach tries again."""


@dataclass
class _Counts:
    """What one GPU has received since gpusight started listening."""

    total: int = 0
    recent: deque[XidEvent] = field(default_factory=lambda: deque(maxlen=XID_RECENT_LIMIT))


def _address(handle: object) -> int | None:
    """The address a device handle points to, to match an event's device against a registered handle."""
    try:
        return ctypes.cast(handle, ctypes.c_void_p).value  # type: ignore[arg-type]
    except (TypeError, ctypes.ArgumentError):
        return None


def _instance(value: int) -> int | None:
    return None if value == NO_INSTANCE else int(value)


class XidListener:
    """Receives the Xid events of every registered GPU on a daemon thread; see the module docstring.

    A GPU whose registration fails (NOT_SUPPORTED, NO_PERMISSION, ...) gets one note and reads
    ``xid_total`` None. The thread survives lost GPUs and stops on ``close``.
    """

    THREAD_NAME = "gpusight-nvml-xid"
    """Name of the background thread."""

    def __init__(self, wall_clock: Callable[[], float] = time.time) -> None:
        self._wall_clock = wall_clock
        self._lock = threading.Lock()
        self._event_set: Any = None
        self._set_failed = False
        self._handles: dict[int, int] = {}
        self._counts: dict[int, _Counts] = {}
        self._refused: set[int] = set()
        self._arrived: deque[tuple[int, XidEvent]] = deque()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        """True while the background thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def register(self, index: int, handle: object) -> ErrorNote | None:
        """Listen for device ``index``'s Xid events from now on (once per device); a note when it cannot be done."""
        if index in self._counts or index in self._refused or self._stop.is_set():
            return None
        try:
            reason = self._register(handle)
        except _TryLater:
            return None
        if reason is not None:
            self._refused.add(index)
            return ErrorNote(f"gpu{index}", f"Xid events: {reason}")
        address = _address(handle)
        with self._lock:
            if address is not None:
                self._handles[address] = index
            self._counts[index] = _Counts()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self.THREAD_NAME, daemon=True)
            self._thread.start()
        return None

    def collect(self) -> None:
        """Fold the events that arrived since the last call into the per-GPU counts (sampler thread)."""
        while self._arrived:
            index, event = self._arrived.popleft()
            counts = self._counts.get(index)
            if counts is not None:
                counts.total += 1
                counts.recent.append(event)

    def state(self, index: int) -> tuple[int | None, tuple[XidEvent, ...]]:
        """(events received since listening began, the latest ones oldest first); total None when not listening."""
        counts = self._counts.get(index)
        if counts is None:
            return None, ()
        return counts.total, tuple(counts.recent)

    def close(self, timeout: float = 2.0) -> None:
        """Stop the thread, wait for it (at most ``timeout`` s) and free the event set once it stopped."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        if self._event_set is not None and not self.running:
            try:
                pynvml.nvmlEventSetFree(self._event_set)
            except pynvml.NVMLError:
                pass
            self._event_set = None

    def _register(self, handle: object) -> str | None:
        """Register ``handle`` for Xid events in the shared set; the reason it failed, or None.

        Raises ``_TryLater`` when the GPU is lost: it is registered once it answers again.
        """
        try:
            supported = pynvml.nvmlDeviceGetSupportedEventTypes(handle)
            if not supported & XID_EVENT_TYPE:
                return "not supported on this GPU"
            if self._event_set is None:
                if self._set_failed:
                    return "no event set"
                try:
                    self._event_set = pynvml.nvmlEventSetCreate()
                except pynvml.NVMLError:
                    self._set_failed = True
                    raise
            pynvml.nvmlDeviceRegisterEvents(handle, XID_EVENT_TYPE, self._event_set)
        except pynvml.NVMLError as error:
            if error.value in (pynvml.NVML_ERROR_GPU_IS_LOST, pynvml.NVML_ERROR_UNKNOWN):
                raise _TryLater() from error
            if error.value in UNSUPPORTED_CODES:
                return "not supported on this GPU or driver"
            return describe(error)
        return None

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = pynvml.nvmlEventSetWait_v2(self._event_set, WAIT_MS)
            except pynvml.NVMLError as error:
                if error.value != pynvml.NVML_ERROR_TIMEOUT:
                    self._stop.wait(RETRY_PAUSE_S)  # a lost GPU, or NVML going away: never spin
                continue
            if data.eventType & XID_EVENT_TYPE:
                self._receive(data)

    def _receive(self, data: Any) -> None:
        with self._lock:
            index = self._handles.get(_address(data.device) or 0)
        if index is None:
            return
        event = XidEvent(code=int(data.eventData), timestamp=self._wall_clock(),
                         gpu_instance_id=_instance(data.gpuInstanceId),
                         compute_instance_id=_instance(data.computeInstanceId))
        self._arrived.append((index, event))
