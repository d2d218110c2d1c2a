"""``GpusightTrainerCallback``: gpusight's training-loop measurements for a Hugging Face Transformers ``Trainer``.

``Trainer(..., callbacks=[GpusightTrainerCallback()])`` measures what :func:`gpusight.torch.watch` measures: the wait
for data, steps, samples and tokens per second, the FLOPs per step and MFU/HFU, the step-time breakdown, and
publishes the status record that a running ``gpusight`` shows beside the process.

Where the Trainer calls its hooks (transformers 4.57 to 5.x): an optimizer step fetches all its
``gradient_accumulation_steps`` micro-batches, then calls ``on_step_begin``, runs them and the optimizer, and calls
``on_step_end``; then it logs, evaluates and saves as due. So a *step* here is an optimizer step, its *wait* is the
time from one ``on_step_end`` to the next ``on_step_begin`` less evaluation and checkpoints (the meter steps away for
them: ``control.should_evaluate``/``should_save`` are set by then) and less logging (``on_log`` ends the step again:
the loss is read back there, which waits for the device, not for data).

The callback gets no batch, so a forward pre-hook on the model counts the samples (the leading dimension of the
first tensor argument) and tokens (``input_ids``) of every training forward pass in a step; each step's counts are
handed to the meter at the start of the next, which over a window of many steps is the same rate (the first step of
a run counts ``per_device_train_batch_size`` x ``gradient_accumulation_steps`` samples and unknown tokens, so tokens/s
shows once it has left the window). Needs ``transformers`` (and ``accelerate``, which its Trainer needs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from transformers import TrainerCallback

from gpusight.torch.batch_counts import BatchCounter
from gpusight.torch.meter import LoopMeter
from gpusight.torch.phases import TrainingPhases

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from gpusight.torch.phases import MeterOptions


class GpusightTrainerCallback(TrainerCallback):  # type: ignore[misc]  # transformers is not type-checked here
    """A ``TrainerCallback`` that measures the Trainer's loop and publishes it to gpusight.

    Keyword arguments are :class:`~gpusight.torch.meter.LoopMeter`'s (as for :func:`gpusight.torch.watch`):
    ``name``, ``batch_size`` (samples per optimizer step, else counted from the forward passes), ``flops_per_step``,
    ``flops`` (``"count"``, ``"6N"`` or None), ``peak_tflops``, ``profile_every``, ``window_seconds``,
    ``publish_interval``, ``publish``, ``directory`` and ``log_to``. Each ``train()`` call gets a new meter; the
    record is removed when it ends.
    """

    def __init__(self, **options: Unpack[MeterOptions]) -> None:
        """Keep ``options`` for each training run's meter."""
        self._phases = TrainingPhases(options)
        self._counter = BatchCounter()
        self._hook: Any = None
        self._in_step = False
        self._samples: int | None = 0
        self._tokens: int | None = 0

    @property
    def meter(self) -> LoopMeter | None:
        """The meter of the training run under way (its ``stats()`` and ``status_path``), or None."""
        return self._phases.meter

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, train_dataloader: Any = None,
                       **kwargs: Any) -> None:
        """Training starts: a new meter, and a hook on the model that counts each step's samples and tokens."""
        self._remove_hook()
        self._phases.start(model, train_dataloader)
        # No step has finished before the first: its samples are the Trainer's settings, its tokens unknown.
        self._samples, self._tokens = args.per_device_train_batch_size * args.gradient_accumulation_steps, None
        if model is not None:
            self._hook = model.register_forward_pre_hook(self._count, with_kwargs=True)

    def on_epoch_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """An epoch starts; the wait for its first batches starts."""
        self._phases.epoch_begins()

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """The step's micro-batches are here; the previous step's counts go to the meter."""
        self._phases.step_begins(samples=self._samples, tokens=self._tokens)
        self._samples, self._tokens = (0, 0) if self._hook is not None else (None, None)  # no model: nothing counted
        self._in_step = True

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """The optimizer step is done; evaluation or a checkpoint due now is time away from the loop."""
        self._in_step = False
        self._phases.step_ends()
        if control.should_evaluate or control.should_save:
            self._phases.step_away()

    def on_log(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Logging read the loss back (waiting for the device): the wait for data starts only now."""
        self._phases.step_ends()

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Evaluation is over; back to the loop unless a checkpoint follows."""
        if not control.should_save:
            self._phases.come_back()

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """The checkpoint is written; back to the loop."""
        self._phases.come_back()

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """The epoch is over."""
        self._phases.epoch_ends()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Training is over: the record is removed and the hook too."""
        self._phases.finish()
        self._remove_hook()

    def _count(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Forward pre-hook: add a training forward pass's samples and tokens to the step's."""
        if not self._in_step or not module.training:
            return
        samples, tokens = self._counter.counts(kwargs or args)
        self._samples = None if samples is None or self._samples is None else self._samples + samples
        self._tokens = None if tokens is None or self._tokens is None else self._tokens + tokens

    def _remove_hook(self) -> None:
        """Remove the counting hook, if any."""
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
