"""``watch(loader)``: a wrapper for any iterable of batches that measures the training loop from the inside.

Per step it costs two ``perf_counter`` calls, two additions and one comparison. A few times a second
(every ``publish_interval`` seconds, checked on the step that crosses it) it closes a bucket of the
rolling window, reads the loader settings, CUDA memory and autocast state, and rewrites the process's
status record for the monitor.

*Wait* is the time spent in ``next()`` on the loader (the training thread blocked on data); a *step*
is the time from one batch to the next (wait plus the loop body).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, Generic, TypeVar

from gpusight.torch.probes import autocast_active, cuda_memory, loader_settings
from gpusight.torch.publisher import StatusPublisher
from gpusight.torch.system_metrics import ScalarWriter, SystemMetrics, check_target
from gpusight.torch.window import RollingWindow, WindowStats

_T = TypeVar("_T")

DEFAULT_WINDOW_SECONDS = 10.0
"""Seconds of iteration the rolling statistics cover by default."""
DEFAULT_PUBLISH_INTERVAL = 0.25
"""Least seconds between two status records (and two window buckets) by default."""


class Watched(Generic[_T]):
    """An iterable that yields the loader's batches unchanged and measures how long the loop waits for them.

    Iterate it as often as the loader (once per epoch). :meth:`stats` gives the rolling statistics;
    the status record is kept until :meth:`close` or process exit, and marked inactive between
    iterations. Use it from one thread at a time.
    """

    def __init__(
        self,
        loader: Iterable[_T],
        *,
        name: str = "train",
        model: Any = None,
        window_seconds: float = DEFAULT_WINDOW_SECONDS,
        publish_interval: float = DEFAULT_PUBLISH_INTERVAL,
        publish: bool = True,
        directory: Path | None = None,
        log_to: SystemMetrics | ScalarWriter | str | None = None,
    ) -> None:
        """Wrap ``loader``; see :func:`watch` for the arguments."""
        if publish_interval <= 0:
            raise ValueError("publish_interval must be positive")
        self.loader = loader
        """The wrapped iterable."""
        self.name = name
        """Label written to the status record."""
        self._window = RollingWindow(window_seconds)
        self._interval = publish_interval
        self._publisher = StatusPublisher(directory) if publish else None
        self._active = False
        self._autocast: bool | None = None
        self._probe_autocast = False
        self._hook = None
        if not isinstance(log_to, SystemMetrics):
            check_target(log_to)
        self._log_to = None if isinstance(log_to, SystemMetrics) else log_to
        self.metrics = log_to if isinstance(log_to, SystemMetrics) else None
        """Where GPU metrics and the input wait are logged at the step rate (from ``log_to``; for a writer or
        ``"mlflow"``, set up for each pass over the loader and closed at its end), or None."""
        if model is not None:
            self._hook = model.register_forward_pre_hook(self._on_forward)

    @property
    def status_path(self) -> Path | None:
        """Where this process's status record is written; None when publishing is off."""
        return None if self._publisher is None else self._publisher.path

    def __len__(self) -> int:
        """The loader's length (raises ``TypeError`` when it has none)."""
        return len(self.loader)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[_T]:
        """Yield the loader's batches, timing the wait for each."""
        clock = time.perf_counter
        if self._log_to is not None and self.metrics is None:
            self.metrics = SystemMetrics(self._log_to)
        iterator = iter(self.loader)
        start = last = clock()
        due = start  # publish on the first batch, so the record appears at once
        wait = 0.0
        steps = 0
        self._active = True
        try:
            while True:
                before = clock()
                try:
                    batch = next(iterator)
                except StopIteration:
                    last = clock()
                    wait += last - before
                    return
                last = clock()
                wait += last - before
                steps += 1
                if last >= due:
                    self._bucket(last, last - start, wait, steps)
                    start, wait, steps = last, 0.0, 0
                    due = last + self._interval
                yield batch
        finally:
            # On exhaustion the last step's body is known to have ended; after a break or an
            # error only the time up to the last batch is counted.
            self._active = False
            self._bucket(last, last - start, wait, steps, final=True)

    def stats(self) -> WindowStats:
        """Rolling statistics as of the latest bucket (at most ``publish_interval`` old while iterating)."""
        return self._window.stats()

    def close(self) -> None:
        """Remove the status record and the model hook, and stop the logging ``watch`` set up for ``log_to``;
        iterating again publishes a new record."""
        if self._log_to is not None and self.metrics is not None:
            self.metrics.close()
            self.metrics = None
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        if self._publisher is not None:
            self._publisher.remove()

    def __enter__(self) -> Watched[_T]:
        """Return self; the record is removed on leaving the block."""
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        """Call :meth:`close`."""
        self.close()

    def _on_forward(self, module: Any, args: Any) -> None:
        """Forward pre-hook: note whether autocast is on, once per bucket."""
        if self._probe_autocast:
            self._probe_autocast = False
            self._autocast = autocast_active()

    def _bucket(self, end: float, elapsed: float, wait: float, steps: int, final: bool = False) -> None:
        """Add a bucket to the window, publish the record and hand a point to the logging when one is due.

        At the end of a pass (``final``) a last point is logged and written before the loop goes on, so it is
        in the writer before the program closes it.
        """
        if elapsed > 0.0 or steps:
            self._window.add(end, elapsed, wait, steps)
        if self.metrics is not None:
            taken = self._window.stats()
            if taken.total_steps:
                self.metrics.step(taken.total_steps - 1, taken, force=final)
            if final and self._log_to is not None:
                self.metrics.close()
                self.metrics = None
            elif final:
                self.metrics.flush()
        if self._hook is not None:
            self._probe_autocast = True
        elif autocast_active():
            self._autocast = True  # autocast wraps the whole loop; seen from here
        if self._publisher is None:
            return
        stats = self._window.stats()
        self._publisher.publish(
            {
                "updated_at": time.time(),
                "active": self._active,
                "name": self.name,
                "window_seconds": stats.window_seconds,
                "steps": stats.steps,
                "total_steps": stats.total_steps,
                "input_wait_fraction": stats.input_wait_fraction,
                "steps_per_second": stats.steps_per_second,
                "step_seconds": stats.step_seconds,
                "wait_seconds": stats.wait_seconds,
                "loader": loader_settings(self.loader),
                "cuda": cuda_memory(),
                "autocast": self._autocast,
            }
        )


def watch(
    loader: Iterable[_T],
    *,
    name: str = "train",
    model: Any = None,
    window_seconds: float = DEFAULT_WINDOW_SECONDS,
    publish_interval: float = DEFAULT_PUBLISH_INTERVAL,
    publish: bool = True,
    directory: Path | None = None,
    log_to: SystemMetrics | ScalarWriter | str | None = None,
) -> Watched[_T]:
    """Wrap ``loader`` (a DataLoader or any iterable) so the loop's input wait is measured and published.

    ``for batch in gpusight.torch.watch(loader): ...`` yields the same batches. ``model`` (a
    ``torch.nn.Module``), when given, gets a forward pre-hook that tells whether autocast is active in
    the forward pass; without it autocast is reported only when it wraps the whole loop. Statistics
    cover the last ``window_seconds`` of iteration; the record in ``directory`` (default
    ``$XDG_RUNTIME_DIR/gpusight`` or ``<tempdir>/gpusight-<uid>``) is rewritten at most every
    ``publish_interval`` seconds; ``publish=False`` only measures.

    ``log_to`` also logs the GPUs' metrics and the input wait into the run's own tracker at the step
    rate (a point a second by default, step = the number of the batch, counted from 0 across epochs):
    a ``torch.utils.tensorboard.SummaryWriter``, ``"mlflow"`` (the active MLflow run), or a
    :class:`~gpusight.torch.system_metrics.SystemMetrics` for other settings. See docs/trackers.md.
    """
    return Watched(
        loader,
        name=name,
        model=model,
        window_seconds=window_seconds,
        publish_interval=publish_interval,
        publish=publish,
        directory=directory,
        log_to=log_to,
    )
