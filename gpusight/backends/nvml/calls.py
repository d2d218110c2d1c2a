"""One guarded NVML call per metric: unsupported calls are remembered, lost GPUs raise, other faults are noted once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import pynvml

from gpusight.backends.nvml.errors import TRANSIENT_CODES, UNSUPPORTED_CODES, describe
from gpusight.snapshot.model import ErrorNote

_T = TypeVar("_T")

REPEATED_FAILURE_POLLS = 3
"""Consecutive polls with a timeout on one device after which the device gets a note saying so."""

_REPEATED_CODES = frozenset({pynvml.NVML_ERROR_TIMEOUT, pynvml.NVML_ERROR_IRQ_ISSUE})
"""Transient codes that mean a fault, not just "no new data", when they keep coming."""

_REPEATED_KEY = "timeouts"
"""Note key of the one line a device gets when its calls keep timing out."""


class GpuLost(Exception):
    """Raised out of a device read when the GPU fell off the bus or stopped answering."""


class CallGuard:
    """Runs the NVML calls of one device and turns their errors into None, notes or ``GpuLost``.

    - NOT_SUPPORTED, FUNCTION_NOT_FOUND and ARGUMENT_VERSION_MISMATCH: None, and the call is never made again.
    - GPU_IS_LOST, or UNKNOWN while a probe call also fails that way: ``GpuLost``.
    - TIMEOUT and other transient codes: None for this poll only; when a TIMEOUT or IRQ_ISSUE comes
      on ``REPEATED_FAILURE_POLLS`` polls in a row, one note for the device until a poll is clean.
    - Anything else: None, and one note until the call succeeds again.
    """

    def __init__(self, index: int, probe: Callable[[], object]) -> None:
        self.index = index
        """The device index, used in note scopes."""
        self._probe = probe
        self._unsupported: set[str] = set()
        self._reported: set[str] = set()
        self._notes: list[ErrorNote] = []
        self._timed_out: tuple[str, pynvml.NVMLError] | None = None
        self._timeout_polls = 0

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
        """The notes collected since the last call, emptied; called once at the end of every poll."""
        if self._timed_out is None:
            self._timeout_polls = 0
            self._reported.discard(_REPEATED_KEY)
        else:
            self._timeout_polls += 1
            key, error = self._timed_out
            self._timed_out = None
            if self._timeout_polls >= REPEATED_FAILURE_POLLS:
                self.note(_REPEATED_KEY, f"NVML calls ({key} first) failed on {self._timeout_polls} polls in a row: "
                          f"{describe(error)}")
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
        elif code in _REPEATED_CODES:
            self._timed_out = self._timed_out or (key, error)
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


_VALUE_MEMBERS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


def field_value(field: Any) -> tuple[float | int, int]:
    """(value, width in bits) of an ``nvmlFieldValue_t``."""
    member = _VALUE_MEMBERS.get(field.valueType, "ullVal")
    width = 32 if member in ("uiVal", "siVal") else 16 if member == "usVal" else 64
    return getattr(field.value, member), width
