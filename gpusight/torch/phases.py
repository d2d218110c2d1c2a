"""Driving a :class:`~gpusight.torch.meter.LoopMeter` from a training framework's callback hooks.

A framework tells its callbacks when training, an epoch and a step begin and end, and when it leaves the loop for
evaluation or a checkpoint. :class:`TrainingPhases` turns those calls into the meter's four (``begin``,
``batch_arrived``, ``batch_requested``, ``end``): the time from a step's end to the next step's start is the wait
for data, and evaluation and checkpointing in the middle of an epoch belong to no step (the meter is ended before
them and begun again after, so they count neither as waiting nor as stepping).
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Any, TypedDict

from gpusight.torch.meter import LoopMeter
from gpusight.torch.system_metrics import ScalarWriter, SystemMetrics


class MeterOptions(TypedDict, total=False):
    """The keyword arguments a framework callback passes on to :class:`~gpusight.torch.meter.LoopMeter`."""

    name: str
    batch_size: int | None
    flops_per_step: float | None
    flops: str | None
    peak_tflops: float | None
    profile_every: int | None
    window_seconds: float
    publish_interval: float
    publish: bool
    directory: Path | None
    log_to: SystemMetrics | ScalarWriter | str | None


class _Phase(enum.Enum):
    """Where the framework's loop is, as the meter sees it."""

    OUTSIDE = "outside"
    """Not in an epoch (before training, between epochs, after)."""
    STEPPING = "stepping"
    """In an epoch: a step is running, or the loop is waiting for the next batch."""
    AWAY = "away"
    """In an epoch, but evaluating or saving a checkpoint."""


class TrainingPhases:
    """One training run's meter, driven from a framework's hooks; each method is safe to call in any phase."""

    def __init__(self, options: MeterOptions) -> None:
        """Keep ``options`` for the meter that :meth:`start` makes."""
        self._options = options
        self._phase = _Phase.OUTSIDE
        self.meter: LoopMeter | None = None
        """The meter of the run under way, or None before :meth:`start` and after :meth:`finish`."""

    def start(self, model: Any, loader: Any) -> LoopMeter:
        """Training starts: a new meter for ``model`` (a ``torch.nn.Module``) and ``loader`` (read for its settings)."""
        self.finish()
        self.meter = LoopMeter(model=model, loader=loader, **self._options)
        return self.meter

    def epoch_begins(self) -> None:
        """An epoch starts: waiting for its first batch starts now."""
        if self.meter is not None:
            if self._phase is _Phase.STEPPING:
                self.meter.end()
            self._enter()

    def step_begins(self, batch: Any = None, *, samples: int | None = None, tokens: int | None = None) -> None:
        """A step starts (its batch is here); ``samples``/``tokens`` count it when the batch is not at hand."""
        if self.meter is None:
            return
        if self._phase is not _Phase.STEPPING:  # a loop that never said its epoch began, or came back unannounced
            self.meter.begin()
            self._phase = _Phase.STEPPING
        self.meter.batch_arrived(batch, samples=samples, tokens=tokens)

    def step_ends(self) -> None:
        """The step's work is done: from now on the loop waits for its next batch (calling it again moves that start
        later, so work the loop does after a step, such as logging, counts as the step's)."""
        if self.meter is not None and self._phase is _Phase.STEPPING:
            self.meter.batch_requested()

    def step_away(self) -> None:
        """The loop leaves its steps for evaluation or a checkpoint; that time belongs to no step."""
        if self.meter is not None and self._phase is _Phase.STEPPING:
            self.meter.end()
            self._phase = _Phase.AWAY

    def come_back(self) -> None:
        """Evaluation or the checkpoint is over: waiting for the next batch starts now."""
        if self.meter is not None and self._phase is _Phase.AWAY:
            self._enter()

    def epoch_ends(self) -> None:
        """The epoch is over; the record says the loop is idle."""
        if self.meter is not None and self._phase is _Phase.STEPPING:
            self.meter.end()
        self._phase = _Phase.OUTSIDE

    def finish(self) -> None:
        """Training is over (or failed): the status record is removed and the meter closed."""
        self.epoch_ends()
        if self.meter is not None:
            self.meter.close()
            self.meter = None

    def _enter(self) -> None:
        """Begin the meter and start waiting for a batch."""
        assert self.meter is not None
        self.meter.begin()
        self.meter.batch_requested()
        self._phase = _Phase.STEPPING
