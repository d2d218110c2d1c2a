"""GPU metrics and the loop's own figures, logged into the run's own TensorBoard ``SummaryWriter`` or MLflow run.

``watch(loader, log_to=writer)`` (or ``log_to="mlflow"``) logs, against the training step, what gpusight
shows beside the process: each GPU's utilization, memory, power, temperature, SM/tensor activity and
PCIe traffic (tags as in ``gpusight --convert --to tensorboard``, under ``gpusight/``), and the loop's measured
input-wait share, steps, samples and tokens per second, achieved TFLOP/s, MFU or HFU (``mfu_percent`` or
``hfu_percent``, after how the FLOPs are known) and the step-time shares (``step_time/{part}_percent``). :class:`SystemMetrics` does the same for a loop that counts its
own steps: ``metrics.step(global_step)``.

The training thread only decides whether a step is due (a comparison) and hands the step over; a
background thread polls the GPUs (those CUDA shows this process, unless told otherwise) and writes
to the tracker, so a slow tracker server never stalls training. When logging falls behind, the oldest
waiting points are dropped, never the training's time. Neither torch, tensorboard nor mlflow is imported
here: the writer is anything with ``add_scalar``, and MLflow is imported only for ``log_to="mlflow"``.
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from collections import deque
from collections.abc import Sequence
from typing import Any, Protocol

from gpusight.backends.interface import BackendOptions, GpuReader, Roots
from gpusight.backends.joined import GpuSelectingReader
from gpusight.backends.registry import AUTO, open_backends
from gpusight.facts.gpu_selection import CudaVisible, GpuIds, GpuRequest
from gpusight.torch.window import WindowStats
from gpusight.tracker_scalars import STEP_TIME_PARTS, UTILIZATION_FIELD, device_scalars, trainer_scalars

DEFAULT_PREFIX = "gpusight/"
"""What every tag starts with, so gpusight's charts sit in a section of their own beside the run's."""

DEFAULT_EVERY_SECONDS = 1.0
"""Least seconds between two logged points unless ``every_n_steps`` is given."""

MAX_PENDING = 100
"""Points waiting for the background thread beyond which the oldest are dropped."""

DRAIN_SECONDS = 5.0
"""Longest a :meth:`SystemMetrics.flush` waits for the waiting points to be written."""


class ScalarWriter(Protocol):
    """A TensorBoard-style writer: ``torch.utils.tensorboard.SummaryWriter``, tensorboardX's, or alike."""

    def add_scalar(self, tag: str, scalar_value: float, global_step: int | None = None,
                   walltime: float | None = None) -> Any:
        """Log one value."""
        ...


class _Sink(Protocol):
    """Where a point's scalars go."""

    def log(self, step: int, wall_time: float, scalars: list[tuple[str, float]]) -> None:
        """Write the scalars of one point."""
        ...

    def flush(self) -> None:
        """Push written points out."""
        ...


class _WriterSink:
    """Scalars through ``add_scalar`` of a SummaryWriter-like object."""

    def __init__(self, writer: ScalarWriter) -> None:
        self.writer = writer
        """The run's writer (never closed here)."""

    def log(self, step: int, wall_time: float, scalars: list[tuple[str, float]]) -> None:
        """One ``add_scalar`` per value, at ``step`` and ``wall_time``."""
        for tag, value in scalars:
            self.writer.add_scalar(tag, value, global_step=step, walltime=wall_time)

    def flush(self) -> None:
        """The writer's ``flush`` when it has one."""
        flush = getattr(self.writer, "flush", None)
        if callable(flush):
            flush()


class _MlflowSink:
    """Scalars into the MLflow run that was active when logging was set up, one ``log_batch`` per point."""

    def __init__(self) -> None:
        import mlflow
        from mlflow.entities import Metric

        run = mlflow.active_run()
        if run is None:
            raise ValueError('log_to="mlflow" needs an active MLflow run: call mlflow.start_run() first')
        self.run_id: str = run.info.run_id
        """The run logged into (runs are per thread in MLflow; this one is kept for the logging thread)."""
        self._client = mlflow.MlflowClient()
        self._metric = Metric

    def log(self, step: int, wall_time: float, scalars: list[tuple[str, float]]) -> None:
        """One batch holding every value of the point."""
        stamp = int(wall_time * 1000)
        metrics = [self._metric(key=tag, value=value, timestamp=stamp, step=step) for tag, value in scalars]
        self._client.log_batch(self.run_id, metrics=metrics)

    def flush(self) -> None:
        """Nothing: each batch is written when logged."""


class SystemMetrics:
    """Logs the GPUs' metrics and the loop's own figures into ``target`` at the training step rate.

    ``target`` is a SummaryWriter (anything with ``add_scalar``) or ``"mlflow"`` (the active MLflow run).
    A point is logged on the first step at least ``every_seconds`` after the last one or, with
    ``every_n_steps``, on every N-th step. ``gpus`` are NVML indexes or UUIDs (as ``gpusight --gpus``);
    by default the GPUs ``CUDA_VISIBLE_DEVICES`` shows this process. Tags start with ``prefix``.
    Call :meth:`close` (or use ``with``) before closing the writer or ending the run.
    """

    def __init__(
        self,
        target: ScalarWriter | str,
        *,
        every_n_steps: int | None = None,
        every_seconds: float = DEFAULT_EVERY_SECONDS,
        gpus: Sequence[int | str] | None = None,
        prefix: str = DEFAULT_PREFIX,
    ) -> None:
        if every_n_steps is not None and every_n_steps < 1:
            raise ValueError("every_n_steps must be at least 1")
        if every_seconds < 0:
            raise ValueError("every_seconds must not be negative")
        self._sink = _sink_for(target)
        self.every_n_steps = every_n_steps
        """Log every N-th step; None: by time."""
        self.every_seconds = every_seconds
        """Least seconds between two points when logging by time."""
        self.prefix = prefix
        """What every tag starts with."""
        self._gpus: GpuRequest = CudaVisible.from_environment(os.environ) if gpus is None \
            else GpuIds(tuple(str(gpu) for gpu in gpus))
        self._due_step = 0
        self._due_time = 0.0
        self._pending: deque[tuple[int, float, WindowStats | None]] = deque(maxlen=MAX_PENDING)
        self._busy = False
        self._closed = False
        self._condition = threading.Condition()
        self._warned: set[str] = set()
        self._thread = threading.Thread(target=self._run, name="gpusight-system-metrics", daemon=True)
        self._thread.start()

    def step(self, step: int, stats: WindowStats | None = None, *, force: bool = False) -> bool:
        """Log a point at training step ``step`` if one is due (or ``force``); True when one was handed over.

        Cheap enough to call on every step: the NVML poll and the writing happen on a background thread.
        ``stats`` (``Watched.stats()`` or ``LoopMeter.stats()``) adds the loop's figures: input wait, throughput,
        achieved TFLOP/s, MFU or HFU and the step-time shares, each where known.
        """
        if not force:
            if self.every_n_steps is not None:
                if step < self._due_step:
                    return False
            elif time.monotonic() < self._due_time:
                return False
        if self.every_n_steps is not None:
            self._due_step = (step // self.every_n_steps + 1) * self.every_n_steps
        self._due_time = time.monotonic() + self.every_seconds
        with self._condition:
            if self._closed:
                return False
            self._pending.append((step, time.time(), stats))
            self._condition.notify()
        return True

    def flush(self, timeout: float = DRAIN_SECONDS) -> bool:
        """Wait until the waiting points are written (at most ``timeout`` seconds); True when they are."""
        deadline = time.monotonic() + timeout
        with self._condition:
            while self._pending or self._busy:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self._thread.is_alive():
                    return False
                self._condition.wait(remaining)
        return True

    def close(self) -> None:
        """Write the waiting points, stop the thread and release NVML; the writer or run stays open."""
        self.flush()
        with self._condition:
            self._closed = True
            self._condition.notify_all()
        self._thread.join(DRAIN_SECONDS)

    def __enter__(self) -> SystemMetrics:
        """Return self; :meth:`close` on leaving the block."""
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Call :meth:`close`."""
        self.close()

    def _run(self) -> None:
        """The background thread: poll the GPUs and write each waiting point; the backends live and die on this thread.

        The GPU backends are the live screen's (NVML, and amdgpu or Intel where their GPUs are), so a ROCm or XPU run
        logs its GPUs too.
        """
        backends, selects_itself = open_backends((AUTO,), BackendOptions(Roots.from_environment(), self._gpus))
        source: GpuReader = backends if selects_itself else GpuSelectingReader(backends, self._gpus)
        try:
            while True:
                with self._condition:
                    while not self._pending and not self._closed:
                        self._busy = False
                        self._condition.notify_all()
                        self._condition.wait()
                    if not self._pending:
                        self._busy = False
                        self._condition.notify_all()
                        return
                    point = self._pending.popleft()
                    self._busy = True
                self._write(source, *point)
        finally:
            source.close()

    def _write(self, source: GpuReader, step: int, wall_time: float, stats: WindowStats | None) -> None:
        """Poll the GPUs and log one point; a failure is warned about once per kind and never raised."""
        reading = source.poll()
        scalars = [scalar for device in reading.devices for scalar in device_scalars(device, self.prefix)]
        if not reading.devices and reading.errors:
            self._warn_once("nvml", f"gpusight.torch: no GPU metrics: {reading.errors[0].message}")
        if stats is not None:
            name = "MFU" if stats.flops_source is None else stats.flops_source.utilization_name
            scalars += trainer_scalars(self.prefix, _window_values(stats).get, name)
        try:
            self._sink.log(step, wall_time, scalars)
            self._sink.flush()
        except Exception as error:  # noqa: BLE001 - a tracker failure must never reach the training loop
            self._warn_once(type(error).__name__, f"gpusight.torch: logging system metrics failed: {error}")

    def _warn_once(self, kind: str, message: str) -> None:
        """Warn with ``message`` the first time a problem of ``kind`` happens."""
        if kind not in self._warned:
            self._warned.add(kind)
            warnings.warn(message, RuntimeWarning, stacklevel=2)


def _percent(fraction: float | None) -> float | None:
    """A share (0..1) in percent; None stays None."""
    return None if fraction is None else 100.0 * fraction


def _window_values(stats: WindowStats) -> dict[str, float | None]:
    """The loop's figures keyed by the :class:`~gpusight.snapshot.model.ProcessSample` field they become."""
    shares = stats.breakdown or {}
    return {
        "input_wait_percent": _percent(stats.input_wait_fraction),
        "steps_per_second": stats.steps_per_second,
        "samples_per_second": stats.samples_per_second,
        "tokens_per_second": stats.tokens_per_second,
        "achieved_tflops": stats.achieved_tflops,
        UTILIZATION_FIELD: _percent(stats.flops_utilization_fraction),
    } | {field: _percent(shares.get(part)) for part, field in STEP_TIME_PARTS}


def check_target(target: ScalarWriter | str | None) -> None:
    """Raise unless ``target`` can be logged into: None, ``"mlflow"`` or a writer with ``add_scalar``."""
    if target is None or target == "mlflow":
        return
    if isinstance(target, str):
        raise ValueError(f'log_to must be a SummaryWriter or "mlflow", not {target!r}')
    if not callable(getattr(target, "add_scalar", None)):
        raise TypeError(f'log_to must be a SummaryWriter or "mlflow", not {type(target).__name__}')


def _sink_for(target: ScalarWriter | str) -> _Sink:
    """The sink for ``target``: ``"mlflow"`` or a writer with ``add_scalar``."""
    check_target(target)
    if isinstance(target, str):
        return _MlflowSink()
    return _WriterSink(target)
