"""The step-time breakdown: one step in every N runs under ``torch.profiler``; its activities are split into parts.

The parts follow the PyTorch profiler TensorBoard plugin's step-time categories, merged: *data* (the plugin's
DataLoader: here the wait the meter measures on every step, not only the profiled ones), *compute* (Kernel, plus
Memset and the other directions of Memcpy; CPU operators on a host without CUDA), *communication* (Communication:
NCCL kernels, or c10d/gloo collectives on the host), *copy* (the host-to-device part of Memcpy) and *idle* (the
rest: the plugin's CPU Exec, Runtime, Other and Idle, i.e. time the GPU, or the host's operators, did nothing).

With CUDA in use the profiled activities are the GPU's (``source: device``): compute is every non-NCCL kernel
(and memset, and device-to-host or device-to-device copy), communication the NCCL kernels not overlapped by compute,
copy the host-to-device copies overlapped by neither. Without
CUDA it is what the host sees (``source: host``): compute is the top-level CPU operators, communication the
collectives, copy none. :func:`step_shares` does the arithmetic over plain (kind, start, end) intervals.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Iterable
from typing import Any

from torch.profiler import DeviceType

from gpusight.snapshot.model import BreakdownSource
from gpusight.torch.accelerator import XPU, Accelerator, accelerator_in_use
from gpusight.torch.instrument import exit_quietly

COMPUTE, COMMUNICATION, COPY, IDLE, DATA = "compute", "communication", "copy", "idle", "data"
"""The parts of a step (the record's ``breakdown`` keys)."""
BUSY_PARTS = (COMPUTE, COMMUNICATION, COPY)
"""The parts an activity can be, in the order that decides overlaps: compute hides communication hides copy."""
SAMPLES_KEPT = 4
"""Profiled steps whose shares are averaged."""
_COLLECTIVE_MARKS = ("c10d::", "gloo", "nccl", "record_param_comms")
"""Parts of a host operator's name that make it a collective (lower case)."""

Interval = tuple[str, float, float]
"""(part, start, end) of one activity."""


def step_shares(intervals: Iterable[Interval], start: float, end: float) -> dict[str, float]:
    """Shares (0..1, summing to 1) of the span ``start``..``end`` by part.

    Each instant of the span goes to the first of compute, communication and copy active then (activities are
    clipped to the span; nested and overlapping ones count once), and to idle when none is. An empty span is idle.
    """
    shares = dict.fromkeys((*BUSY_PARTS, IDLE), 0.0)
    span = end - start
    if span <= 0:
        shares[IDLE] = 1.0
        return shares
    rank = {part: index for index, part in enumerate(BUSY_PARTS)}
    edges: list[tuple[float, int, int]] = []
    for part, begin, finish in intervals:
        begin, finish = max(begin, start), min(finish, end)
        if finish > begin:
            edges.append((begin, 1, rank[part]))
            edges.append((finish, -1, rank[part]))
    edges.sort()
    active = [0] * len(BUSY_PARTS)
    previous = start
    for moment, change, index in edges:
        if moment > previous:
            _credit(shares, active, moment - previous)
            previous = moment
        active[index] += change
    busy = sum(shares[part] for part in BUSY_PARTS)
    shares = {part: seconds / span for part, seconds in shares.items()}
    shares[IDLE] = max(0.0, 1.0 - busy / span)
    return shares


def _credit(shares: dict[str, float], active: list[int], seconds: float) -> None:
    """Give ``seconds`` to the first part with an activity running (none: nothing, it stays idle)."""
    for index, count in enumerate(active):
        if count > 0:
            shares[BUSY_PARTS[index]] += seconds
            return


def device_part(name: str) -> str:
    """The part of a GPU activity, from its name: NCCL kernels, host-to-device copies, and the rest (kernels,
    memsets, other copies)."""
    if "nccl" in name.lower():
        return COMMUNICATION
    if name.startswith("Memcpy HtoD"):
        return COPY
    return COMPUTE


def host_part(name: str) -> str:
    """The part of a top-level CPU operator, from its name (collectives, or compute)."""
    lowered = name.lower()
    return COMMUNICATION if any(mark in lowered for mark in _COLLECTIVE_MARKS) else COMPUTE


def profile_intervals(events: Iterable[Any], device: bool) -> list[Interval]:
    """The (part, start, end) intervals in nanoseconds of a profile's raw events (``kineto_results.events()``): the
    GPU's with ``device``, else the host's operators on every thread (nested ones count once in
    :func:`step_shares`). User annotations (``record_function`` ranges, which span Python as well) are left out,
    except collectives' (gloo records its work as ``gloo:all_reduce`` and alike)."""
    intervals: list[Interval] = []
    for event in events:
        on_gpu = event.device_type() != DeviceType.CPU
        if on_gpu == device:
            name = event.name()
            part = device_part(name) if device else host_part(name)
            if part == COMMUNICATION or not event.is_user_annotation():
                intervals.append((part, event.start_ns(), event.end_ns()))
    return intervals


QUIET_KINETO_LOG_LEVEL = "6"
"""Kineto's log level above its per-session ``USDT: profiler_start``/``profiler_stop`` lines (checked with torch 2.13)."""


class BreakdownSampler:
    """Profiles one step (an instrument: :meth:`start` before the body, :meth:`stop` after) and keeps the shares of
    the last few profiled steps."""

    def __init__(self) -> None:
        self._profiler: Any = None
        self._device: Accelerator | None = None
        self._began = 0.0
        self._samples: deque[dict[str, float]] = deque(maxlen=SAMPLES_KEPT)
        self._source: BreakdownSource | None = None

    def start(self) -> None:
        """Start profiling the step that begins (the GPU's activities when CUDA, ROCm or XPU is in use, else the
        host's)."""
        from torch.profiler import ProfilerActivity, profile

        # Kineto writes two lines to stderr per profiling session unless its log level is raised; the training's log
        # is no place for them (read when the profiler first starts; a level the user set is kept).
        os.environ.setdefault("KINETO_LOG_LEVEL", QUIET_KINETO_LOG_LEVEL)
        self._device = accelerator_in_use()
        activities = [ProfilerActivity.CPU]
        if self._device is not None:
            activities.append(ProfilerActivity.XPU if self._device.backend == XPU else ProfilerActivity.CUDA)
        try:
            profiler = profile(activities=activities)
            profiler.__enter__()  # type: ignore[no-untyped-call]  # torch leaves it unannotated
        except Exception:  # noqa: BLE001 - profiling is best effort (another profiler may be running)
            return
        self._profiler = profiler
        self._began = time.perf_counter_ns()

    def stop(self) -> None:
        """Stop profiling and keep the profiled step's shares."""
        profiler, self._profiler = self._profiler, None
        if profiler is None:
            return
        if self._device is not None:
            self._device.module.synchronize()  # the step's kernels belong to the step (a sampled step only)
        span = time.perf_counter_ns() - self._began
        try:
            profiler.__exit__(None, None, None)
            results = profiler.profiler.kineto_results  # raw events: building FunctionEvents costs 100x more
            start = results.trace_start_ns()
            intervals = profile_intervals(results.events(), self._device is not None)
        except Exception:  # noqa: BLE001 - profiling is best effort
            return
        self._samples.append(step_shares(intervals, start, start + span))
        self._source = BreakdownSource.DEVICE if self._device is not None else BreakdownSource.HOST

    def abandon(self) -> None:
        """Stop profiling without keeping anything (the step did not end normally)."""
        profiler, self._profiler = self._profiler, None
        if profiler is not None:
            exit_quietly(profiler)

    def shares(self, input_wait: float | None) -> tuple[dict[str, float] | None, BreakdownSource | None]:
        """The breakdown (data, compute, communication, copy, idle; summing to exactly 1) and its source: the data
        share is ``input_wait``, the rest of the step is split as the profiled steps' mean; None before any."""
        if not self._samples or input_wait is None:
            return None, None
        body = 1.0 - input_wait
        count = len(self._samples)
        parts = {DATA: input_wait}
        for part in BUSY_PARTS:
            parts[part] = body * sum(sample[part] for sample in self._samples) / count
        parts[IDLE] = max(0.0, 1.0 - sum(parts.values()))
        return parts, self._source
