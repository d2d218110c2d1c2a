"""The monitor's reader of the status records that instrumented trainers publish (see :mod:`gpusight.torch`).

What the writer and the reader agree on (the record's kind, layout version, breakdown parts, age and where records
live) is the protocol in :mod:`gpusight.trainer_record`; this module parses a record into a :class:`TrainerStatus`.

The reader trusts nothing in a record: it opens only ``<pid>.json`` for the pids it is asked about,
in directories of the process owner, refuses symlinks and files not owned by that user, checks that
the record names the same process (pid and start time, so a reused pid or a file left by a killed
process is not believed) and that it was updated recently, and skips anything malformed.
"""

from __future__ import annotations

import json
import math
import os
import stat
import time
from dataclasses import dataclass
from typing import Any

from gpusight import old_name
from gpusight.snapshot.model import BatchSizeSource, BreakdownSource, FlopsSource, MathMode
from gpusight.trainer_record import (
    BREAKDOWN_PARTS,
    BREAKDOWN_TOLERANCE,
    MAX_AGE_SECONDS,
    RECORD_KIND,
    RECORD_SCHEMA,
    status_dirs,
)

CREATE_TIME_TOLERANCE = 0.5
"""Seconds by which the recorded and the observed process start times may differ."""
MAX_RECORD_BYTES = 64 * 1024
"""Larger files are not records and are not read in full."""
MAX_TEXT = 240
"""Longest free text (a peak's source, a note) kept from a record; longer text is cut."""


class StatusFormatError(ValueError):
    """Bytes that are not a valid trainer status record."""


@dataclass(frozen=True, slots=True)
class TrainerStatus:
    """One trainer's self-reported status, as read from its record. Unknown values are None."""

    pid: int
    """Process id of the trainer that wrote it."""
    create_time: float
    """The trainer's start time (epoch seconds, as psutil reports it)."""
    uid: int
    """The trainer's user id."""
    updated_at: float
    """Epoch seconds when the record was written."""
    active: bool
    """True while the trainer iterates its data; False between epochs or after the loop ended."""
    name: str | None = None
    """Label of the watched loader (e.g. ``"train"``); untrusted text."""
    window_seconds: float | None = None
    """Seconds of iteration the rolling statistics cover."""
    steps: int | None = None
    """Steps within the window."""
    total_steps: int | None = None
    """Steps since the loader was first watched."""
    input_wait_fraction: float | None = None
    """Share (0..1) of the window spent waiting for the next batch."""
    steps_per_second: float | None = None
    """Steps per second over the window."""
    step_seconds: float | None = None
    """Mean time from one batch to the next over the window."""
    wait_seconds: float | None = None
    """Mean time spent waiting for a batch over the window."""
    loader_num_workers: int | None = None
    """The loader's ``num_workers`` setting."""
    loader_pin_memory: bool | None = None
    """The loader's ``pin_memory`` setting."""
    loader_persistent_workers: bool | None = None
    """The loader's ``persistent_workers`` setting."""
    loader_prefetch_factor: int | None = None
    """The loader's ``prefetch_factor`` (None with ``num_workers=0``)."""
    loader_batch_size: int | None = None
    """The loader's ``batch_size`` (None with a custom batch sampler)."""
    cuda_device: int | None = None
    """CUDA device the training thread uses; None when CUDA is not in use."""
    cuda_allocated_bytes: int | None = None
    """``torch.cuda.memory_allocated``: memory held by live tensors."""
    cuda_reserved_bytes: int | None = None
    """``torch.cuda.memory_reserved``: memory held by the caching allocator."""
    cuda_peak_bytes: int | None = None
    """``torch.cuda.max_memory_allocated``: peak of allocated memory."""
    autocast: bool | None = None
    """Whether autocast (mixed precision) was active in the forward pass; None when not observed."""
    samples_per_second: float | None = None
    """Samples per second over the window."""
    tokens_per_second: float | None = None
    """Tokens per second over the window, where batches hold token ids."""
    batch_size_source: BatchSizeSource | None = None
    """How the samples per step are known."""
    flops_per_step: float | None = None
    """FLOPs of one training step."""
    flops_source: FlopsSource | None = None
    """Where ``flops_per_step`` comes from."""
    achieved_tflops: float | None = None
    """FLOPs per step times steps per second, in TFLOP/s."""
    peak_tflops: float | None = None
    """The GPU's peak dense TFLOP/s for ``math_mode`` (or as given)."""
    peak_source: str | None = None
    """Where the peak comes from; untrusted text."""
    math_mode: MathMode | None = None
    """The arithmetic of the matrix multiplications."""
    flops_utilization_fraction: float | None = None
    """Achieved over peak FLOP/s (0..1 normally; may exceed 1 when the given FLOPs or peak are wrong)."""
    flops_utilization_note: str | None = None
    """Why the utilization is unknown; untrusted text."""
    breakdown: dict[str, float] | None = None
    """Step-time shares (0..1) by part (``BREAKDOWN_PARTS``), summing to 1; None when no step was profiled."""
    breakdown_source: BreakdownSource | None = None
    """What the breakdown was measured from."""


def _number(data: dict[str, Any], key: str, kind: type, required: bool = False) -> Any:
    """``data[key]`` checked to be a finite number of ``kind`` (None when absent and not required)."""
    value = data.get(key)
    if value is None:
        if required:
            raise StatusFormatError(f"missing {key!r}")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise StatusFormatError(f"{key!r} must be a number")
    if kind is int:
        if not isinstance(value, int):
            raise StatusFormatError(f"{key!r} must be an integer")
        return value
    if not math.isfinite(value):
        raise StatusFormatError(f"{key!r} must be finite")
    return float(value)


def _flag(data: dict[str, Any], key: str) -> bool | None:
    """``data[key]`` checked to be true, false or absent."""
    value = data.get(key)
    if value is not None and not isinstance(value, bool):
        raise StatusFormatError(f"{key!r} must be true or false")
    return value


def _text(data: dict[str, Any], key: str) -> str | None:
    """``data[key]`` checked to be a string or absent, cut to ``MAX_TEXT`` characters."""
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise StatusFormatError(f"{key!r} must be a string")
    return None if value is None else value[:MAX_TEXT]


def _choice(data: dict[str, Any], key: str, kind: type[Any]) -> Any:
    """``data[key]`` checked to be one of the values of enum ``kind`` (None when absent)."""
    value = data.get(key)
    if value is None:
        return None
    try:
        return kind(value)
    except ValueError:
        raise StatusFormatError(f"{key!r} must be one of {', '.join(member.value for member in kind)}") from None


def _positive(data: dict[str, Any], key: str) -> float | None:
    """``data[key]`` checked to be a finite number that is not negative (None when absent)."""
    value: float | None = _number(data, key, float)
    if value is not None and value < 0.0:
        raise StatusFormatError(f"{key!r} must not be negative")
    return value


def _breakdown(section: dict[str, Any]) -> dict[str, float] | None:
    """The step-time shares of a ``breakdown`` section: each in 0..1 and summing to 1; None when absent."""
    if not section:
        return None
    shares = {part: _positive(section, part) for part in BREAKDOWN_PARTS}
    if any(share is None or share > 1.0 for share in shares.values()):
        raise StatusFormatError(f"'breakdown' needs {', '.join(BREAKDOWN_PARTS)}, each in 0..1")
    if abs(sum(share for share in shares.values() if share is not None) - 1.0) > BREAKDOWN_TOLERANCE:
        raise StatusFormatError("'breakdown' shares must sum to 1")
    return {part: share for part, share in shares.items() if share is not None}


def _section(data: dict[str, Any], key: str) -> dict[str, Any]:
    """The sub-object ``data[key]``, or an empty one when absent or null."""
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise StatusFormatError(f"{key!r} must be an object")
    return value


def parse_status(raw: bytes | str) -> TrainerStatus:
    """Decode a record; raise :class:`StatusFormatError` for anything that is not a valid one."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise StatusFormatError(f"not JSON: {exc}") from exc
    if not isinstance(data, dict) or data.get("kind") not in (RECORD_KIND, old_name.STATUS_RECORD_KIND):
        raise StatusFormatError("not a gpusight trainer status record")
    schema = _number(data, "schema", int, required=True)
    if schema > RECORD_SCHEMA:
        raise StatusFormatError(f"schema {schema} is newer than this gpusight understands")
    active = data.get("active")
    if not isinstance(active, bool):
        raise StatusFormatError("'active' must be true or false")
    name = data.get("name")
    if name is not None and not isinstance(name, str):
        raise StatusFormatError("'name' must be a string")
    fraction = _number(data, "input_wait_fraction", float)
    if fraction is not None and not 0.0 <= fraction <= 1.0:
        raise StatusFormatError("'input_wait_fraction' must lie in 0..1")
    loader, cuda, speed = _section(data, "loader"), _section(data, "cuda"), _section(data, "speed")
    breakdown = _section(data, "breakdown")
    return TrainerStatus(
        pid=_number(data, "pid", int, required=True),
        create_time=_number(data, "create_time", float, required=True),
        uid=_number(data, "uid", int, required=True),
        updated_at=_number(data, "updated_at", float, required=True),
        active=active,
        name=name,
        window_seconds=_number(data, "window_seconds", float),
        steps=_number(data, "steps", int),
        total_steps=_number(data, "total_steps", int),
        input_wait_fraction=fraction,
        steps_per_second=_number(data, "steps_per_second", float),
        step_seconds=_number(data, "step_seconds", float),
        wait_seconds=_number(data, "wait_seconds", float),
        loader_num_workers=_number(loader, "num_workers", int),
        loader_pin_memory=_flag(loader, "pin_memory"),
        loader_persistent_workers=_flag(loader, "persistent_workers"),
        loader_prefetch_factor=_number(loader, "prefetch_factor", int),
        loader_batch_size=_number(loader, "batch_size", int),
        cuda_device=_number(cuda, "device", int),
        cuda_allocated_bytes=_number(cuda, "allocated_bytes", int),
        cuda_reserved_bytes=_number(cuda, "reserved_bytes", int),
        cuda_peak_bytes=_number(cuda, "peak_bytes", int),
        autocast=_flag(data, "autocast"),
        samples_per_second=_positive(speed, "samples_per_second"),
        tokens_per_second=_positive(speed, "tokens_per_second"),
        batch_size_source=_choice(speed, "batch_size_source", BatchSizeSource),
        flops_per_step=_positive(speed, "flops_per_step"),
        flops_source=_choice(speed, "flops_source", FlopsSource),
        achieved_tflops=_positive(speed, "achieved_tflops"),
        peak_tflops=_positive(speed, "peak_tflops"),
        peak_source=_text(speed, "peak_source"),
        math_mode=_choice(speed, "math_mode", MathMode),
        flops_utilization_fraction=_positive(speed, "flops_utilization_fraction"),
        flops_utilization_note=_text(speed, "flops_utilization_note"),
        breakdown=_breakdown(breakdown),
        breakdown_source=_choice(breakdown, "source", BreakdownSource),
    )


def _owner(pid: int) -> int | None:
    """The user id owning ``/proc/PID`` (the process's effective uid), or None when it is gone."""
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def _identity(path: str, uid: int) -> tuple[int, int, int] | None:
    """(inode, mtime, size) of ``path`` when it is a regular file (not a symlink) owned by ``uid``, else None."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode) or info.st_uid != uid or info.st_size > MAX_RECORD_BYTES:
        return None
    return (info.st_ino, info.st_mtime_ns, info.st_size)


def _read_file(path: str, identity: tuple[int, int, int]) -> bytes | None:
    """The bytes of ``path`` if it is still the file ``identity`` describes; no symlinks followed."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if (info.st_ino, info.st_mtime_ns, info.st_size) != identity:
            return None
        return os.read(fd, MAX_RECORD_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)


class TrainerStatusReader:
    """Finds and validates the records of given processes; caches parsed records by file identity.

    Use from one thread: call :meth:`read` for each process of a poll, then :meth:`forget_unseen`.
    The status directories of each user are looked up once per poll, not once per process.
    """

    def __init__(self, max_age: float = MAX_AGE_SECONDS) -> None:
        """Create a reader that ignores records older than ``max_age`` seconds."""
        self.max_age = max_age
        """Seconds after which a record that was not rewritten is stale."""
        self._cache: dict[str, tuple[tuple[int, int, int], TrainerStatus | None]] = {}
        self._seen: set[str] = set()
        self._dirs: dict[int, list[str]] = {}

    def read(self, pid: int, create_time: float | None, now: float | None = None) -> TrainerStatus | None:
        """The fresh, valid record of process ``pid`` that started at ``create_time``, or None.

        Never raises: a missing, unreadable, foreign, malformed, stale or mismatched record is None.
        """
        if create_time is None:
            return None
        uid = _owner(pid)
        if uid is None:
            return None
        now = time.time() if now is None else now
        for directory in self._existing_dirs(uid):
            status = self._load(os.path.join(directory, f"{pid}.json"), uid)
            if status is None:
                continue
            if (
                status.pid == pid
                and status.uid == uid
                and abs(status.create_time - create_time) <= CREATE_TIME_TOLERANCE
                and now - self.max_age <= status.updated_at <= now + self.max_age
            ):
                return status
        return None

    def forget_unseen(self) -> None:
        """Drop cached records not looked at since the previous call; look the directories up anew."""
        for path in self._cache.keys() - self._seen:
            del self._cache[path]
        self._seen = set()
        self._dirs.clear()

    def _existing_dirs(self, uid: int) -> list[str]:
        """The status directories of ``uid`` that exist, found once per poll."""
        dirs = self._dirs.get(uid)
        if dirs is None:
            dirs = self._dirs[uid] = [str(directory) for directory in status_dirs(uid) if directory.is_dir()]
        return dirs

    def _load(self, path: str, uid: int) -> TrainerStatus | None:
        """The parsed record at ``path`` owned by ``uid``, re-parsed only when the file changed."""
        identity = _identity(path, uid)
        if identity is None:
            return None
        self._seen.add(path)
        cached = self._cache.get(path)
        if cached is not None and cached[0] == identity:
            return cached[1]
        data = _read_file(path, identity)
        if data is None:
            return None
        try:
            status: TrainerStatus | None = parse_status(data)
        except StatusFormatError:
            status = None
        self._cache[path] = (identity, status)
        return status
