"""The hooks of gpusight's Lightning callbacks, shared by both packages Lightning ships as (``lightning`` and
``pytorch_lightning``: a trainer of one takes only callbacks of the same package).

Where Lightning calls its hooks (2.x): the fit loop fetches a batch, moves it to the device and calls
``on_train_batch_start`` with it, runs the training step, and calls ``on_train_batch_end``. So a *step* here is one
batch (with ``accumulate_grad_batches`` several batches make an optimizer step, as in a plain loop under ``watch``),
and its *wait* is the time from one ``on_train_batch_end`` to the next ``on_train_batch_start``: fetching and moving
the batch, and the loop's own bookkeeping between batches. Validation inside an epoch (``val_check_interval``) and
checkpoints belong to no step: the meter steps away at ``on_validation_start`` and ``on_save_checkpoint`` and comes
back when the next batch starts. No hook falls after a checkpoint is written (``ModelCheckpoint`` saves in
``on_validation_end`` or ``on_train_batch_end``, after this callback's hooks), so the fetch of the batch after one is
not counted as waiting either. The sanity check before training falls outside the epoch's steps anyway.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpusight.torch.meter import LoopMeter
from gpusight.torch.phases import TrainingPhases

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from gpusight.torch.phases import MeterOptions


class LightningHooks:
    """Callback hooks that measure Lightning's fit loop and publish it to gpusight (mixed into a ``Callback``).

    Keyword arguments are :class:`~gpusight.torch.meter.LoopMeter`'s (as for :func:`gpusight.torch.watch`):
    ``name``, ``batch_size`` (samples per batch, else the batch's leading dimension), ``flops_per_step``,
    ``flops`` (``"count"``, ``"6N"`` or None), ``peak_tflops``, ``profile_every``, ``window_seconds``,
    ``publish_interval``, ``publish``, ``directory`` and ``log_to``. Each ``fit()`` gets a new meter; the record is
    removed when it ends or fails.
    """

    def __init__(self, **options: Unpack[MeterOptions]) -> None:
        """Keep ``options`` for each fit's meter."""
        super().__init__()
        self._phases = TrainingPhases(options)

    @property
    def meter(self) -> LoopMeter | None:
        """The meter of the fit under way (its ``stats()`` and ``status_path``), or None."""
        return self._phases.meter

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        """Training starts: a new meter for the module and the training loader."""
        self._phases.start(pl_module, trainer.train_dataloader)

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        """An epoch starts; the wait for its first batch starts."""
        self._phases.epoch_begins()

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        """The batch is here (on the device): the step starts."""
        self._phases.step_begins(batch)

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        """The step is done: the wait for the next batch starts."""
        self._phases.step_ends()

    def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
        """Validation inside an epoch is time away from the steps (until the next batch starts)."""
        self._phases.step_away()

    def on_save_checkpoint(self, trainer: Any, pl_module: Any, checkpoint: dict[str, Any]) -> None:
        """A checkpoint is being written: time away from the steps (until the next batch starts)."""
        self._phases.step_away()

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        """The epoch is over."""
        self._phases.epoch_ends()

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        """Training is over: the record is removed."""
        self._phases.finish()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        """Training failed or was interrupted: the record is removed."""
        self._phases.finish()
