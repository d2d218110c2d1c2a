"""``watch(loader)``: a wrapper for any iterable of batches that measures the training loop from the inside.

It is a thin iterator over :class:`~gpusight.torch.meter.LoopMeter`: each pass over the loader is one
``begin``/``end``, and each batch is asked for (``batch_requested``) before ``next()`` and handed over
(``batch_arrived``) after it. *Wait* is the time spent in ``next()`` on the loader (the training thread blocked on
data); a *step* is the time from one batch to the next (wait plus the loop body).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, Generic, TypeVar

from gpusight.torch.meter import (
    DEFAULT_PROFILE_EVERY,
    DEFAULT_PUBLISH_INTERVAL,
    DEFAULT_WINDOW_SECONDS,
    LoopMeter,
)
from gpusight.torch.system_metrics import ScalarWriter, SystemMetrics
from gpusight.torch.window import WindowStats

_T = TypeVar("_T")


class Watched(Generic[_T]):
    """An iterable that yields the loader's batches unchanged and measures the loop around them.

    Iterate it as often as the loader (once per epoch). :meth:`stats` gives the rolling statistics;
    the status record is kept until :meth:`close` or process exit, and marked inactive between
    iterations. Use it from one thread at a time.
    """

    def __init__(self, loader: Iterable[_T], meter: LoopMeter) -> None:
        """Wrap ``loader``, measuring with ``meter``; :func:`watch` builds both."""
        self.loader = loader
        """The wrapped iterable."""
        self.meter = meter
        """What measures and publishes the loop."""

    @property
    def name(self) -> str:
        """Label written to the status record."""
        return self.meter.name

    @property
    def metrics(self) -> SystemMetrics | None:
        """Where GPU metrics and the loop's figures are logged (see :attr:`LoopMeter.metrics`), or None."""
        return self.meter.metrics

    @property
    def status_path(self) -> Path | None:
        """Where this process's status record is written; None when publishing is off."""
        return self.meter.status_path

    def __len__(self) -> int:
        """The loader's length (raises ``TypeError`` when it has none)."""
        return len(self.loader)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[_T]:
        """Yield the loader's batches, measuring the wait for each and the steps between them."""
        meter = self.meter
        iterator = iter(self.loader)
        meter.begin()
        try:
            while True:
                meter.batch_requested()
                try:
                    batch = next(iterator)
                except StopIteration:
                    return
                meter.batch_arrived(batch)
                yield batch
        finally:
            meter.end()

    def stats(self) -> WindowStats:
        """Rolling statistics as of the latest bucket (at most ``publish_interval`` old while iterating)."""
        return self.meter.stats()

    def close(self) -> None:
        """Remove the status record and the model hook, and stop the logging ``watch`` set up for ``log_to``;
        iterating again publishes a new record."""
        self.meter.close()

    def __enter__(self) -> Watched[_T]:
        """Return self; the record is removed on leaving the block."""
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        """Call :meth:`close`."""
        self.close()


def watch(
    loader: Iterable[_T],
    *,
    name: str = "train",
    model: Any = None,
    batch_size: int | None = None,
    flops_per_step: float | None = None,
    flops: str | None = "count",
    peak_tflops: float | None = None,
    profile_every: int | None = DEFAULT_PROFILE_EVERY,
    window_seconds: float = DEFAULT_WINDOW_SECONDS,
    publish_interval: float = DEFAULT_PUBLISH_INTERVAL,
    publish: bool = True,
    directory: Path | None = None,
    log_to: SystemMetrics | ScalarWriter | str | None = None,
) -> Watched[_T]:
    """Wrap ``loader`` (a DataLoader or any iterable) so the loop's wait, speed and FLOP/s are measured and published.

    ``for batch in gpusight.torch.watch(loader): ...`` yields the same batches. ``model`` (a
    ``torch.nn.Module``), when given, gets a forward pre-hook that tells whether autocast is active in
    the forward pass and in which dtype; without it autocast is reported only when it wraps the whole loop.
    Statistics cover the last ``window_seconds`` of iteration; the record in ``directory`` (default
    ``$XDG_RUNTIME_DIR/gpusight`` or ``<tempdir>/gpusight-<uid>``) is rewritten at most every
    ``publish_interval`` seconds; ``publish=False`` only measures.

    Speed: samples per step are the leading dimension of the batch's first tensor (or ``batch_size``), tokens the
    size of its token ids; FLOPs per step are counted once (``flops="count"``: HFU), given (``flops_per_step``:
    MFU) or estimated (``flops="6N"``: MFU); the peak comes from the GPU's datasheet or ``peak_tflops``; one step
    in every ``profile_every`` is profiled for the step-time breakdown. See :class:`~gpusight.torch.meter.LoopMeter`.

    ``log_to`` also logs the GPUs' metrics and the loop's figures into the run's own tracker at the step
    rate (a point a second by default, step = the number of the batch, counted from 0 across epochs):
    a ``torch.utils.tensorboard.SummaryWriter``, ``"mlflow"`` (the active MLflow run), or a
    :class:`~gpusight.torch.system_metrics.SystemMetrics` for other settings. See docs/trackers.md.
    """
    meter = LoopMeter(
        name=name,
        model=model,
        loader=loader,
        batch_size=batch_size,
        flops_per_step=flops_per_step,
        flops=flops,
        peak_tflops=peak_tflops,
        profile_every=profile_every,
        window_seconds=window_seconds,
        publish_interval=publish_interval,
        publish=publish,
        directory=directory,
        log_to=log_to,
    )
    return Watched(loader, meter)
