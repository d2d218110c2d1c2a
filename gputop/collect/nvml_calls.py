"""One guarded NVML call per metric: unsupported calls are remembered, lost GPUs raise, other faults are noted once."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import pynvml

from gputop.collect.model import ErrorNote
from gputop.collect.nvml_errors import TRANSIENT_CODES, UNSUPPORTED_CODES, describe

_T = TypeVar("_T")


class GpuLost(Exception):
    """Raised out of a device read when the GPU fell off the bus or stopped answering."""


class CallGuard:
    """Runs the NVML calls of one device and turns their errors into None, notes or ``GpuLost``.

    - NOT_SUPPORTED, FUNCTION_NOT_FOUND and ARGUMENT_VERSION_MISMATCH: None, and the call is never made again.
    - GPU_IS_LOST, or UNKNOWN while a probe call also fails that way: ``GpuLost``.
    - TIMEOUT and other transient codes: None for this poll only.
    - Anything else: None, and one note until the call succeeds again.
    """

    def __init__(self, index: int, probe: Callable[[], object]) -> None:
        self.index = index
        """The device index, used in note scopes."""
        self._probe = probe
        self._unsupported: set[str] = set()
        self._reported: set[str] = set()
        self._notes: list[ErrorNote] = []

    def call(self, key: str, fn: Callable[..., _T] | None, *args: object, **kwargs: object) -> _T | None:
        """Call ``fn`` (None = missing from this pynvml) under the name ``key``; None when it gave no value."""
        if key in self._unsupported:
            return None
        if fn is None:
            self._unsupported.add(key)
            return None
        try:
            value = fn(*args, **kwargs)
        except pynvml.NVMLError as error:
            self._failed(key, error)
            return None
        self._reported.discard(key)
        return value

    def supported(self, key: str) -> bool:
        """False once ``key`` was found unsupported."""
        return key not in self._unsupported

    def take_notes(self) -> list[ErrorNote]:
        """The notes collected since the last call, emptied."""
        notes, self._notes = self._notes, []
        return notes

    def note(self, key: str, message: str) -> None:
        """Record a fault of call ``key`` once, until that call succeeds again."""
        if key not in self._reported:
            self._reported.add(key)
            self._notes.append(ErrorNote(f"gpu{self.index}", f"{key}: {message}"))

    def succeeded(self, key: str) -> None:
        """Forget an earlier fault of ``key`` so that a new one is reported again."""
        self._reported.discard(key)

    def _failed(self, key: str, error: pynvml.NVMLError) -> None:
        code = error.value
        if code in UNSUPPORTED_CODES:
            self._unsupported.add(key)
        elif code == pynvml.NVML_ERROR_GPU_IS_LOST or code == pynvml.NVML_ERROR_UNKNOWN and self._probe_says_lost():
            raise GpuLost() from error
        elif code not in TRANSIENT_CODES:
            self.note(key, describe(error))

    def _probe_says_lost(self) -> bool:
        try:
            self._probe()
        except pynvml.NVMLError as error:
            return error.value in (pynvml.NVML_ERROR_GPU_IS_LOST, pynvml.NVML_ERROR_UNKNOWN)
        return False


def raw_text_call(fn: Callable[..., object]) -> Callable[..., str]:
    """Wrap a pynvml string getter so that invalid UTF-8 from the driver is replaced, never raised."""
    raw = getattr(fn, "__wrapped__", fn)  # pynvml's convertStrBytes decodes strictly

    def call(*args: object) -> str:
        value = raw(*args)
        return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)

    return call
