"""``LoopMeter``: measures a training loop from its step boundaries and publishes the status record.

The loop (or :func:`~gpusight.torch.watch`, or a framework callback) tells the meter four things: iteration
begins (:meth:`LoopMeter.begin`), the step body ended and the loop asks for the next batch
(:meth:`~LoopMeter.batch_requested`), the batch arrived and the body starts (:meth:`~LoopMeter.batch_arrived`),
and iteration ends (:meth:`~LoopMeter.end`). *Wait* is the time from a request to the batch's arrival; a
*step* is the time from one arrival to the next.

Per step it costs two ``perf_counter`` calls, a few additions and one ``.shape`` read. A few times a second
(every ``publish_interval`` seconds, checked on the step that crosses it) it closes a bucket of the rolling
window, and rewrites the process's status record. Two kinds of step are *instrumented*: one early step runs
under ``FlopCounterMode`` to count the FLOPs per step, and one step in every ``profile_every`` runs under
``torch.profiler`` for the step-time breakdown. Their time is left out of the window, so the instrumentation
never distorts the throughput.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpusight.snapshot.model import BatchSizeSource
from gpusight.torch.batch_counts import BatchCounter
from gpusight.torch.breakdown import BreakdownSampler
from gpusight.torch.flops import FlopsMeter
from gpusight.torch.instrument import Instrument
from gpusight.torch.probes import autocast_active, cuda_memory, loader_settings
from gpusight.torch.publisher import StatusPublisher
from gpusight.torch.system_metrics import ScalarWriter, SystemMetrics, check_target
from gpusight.torch.window import Bucket, RollingWindow, WindowStats

DEFAULT_WINDOW_SECONDS = 10.0
"""Seconds of iteration the rolling statistics cover by default."""
DEFAULT_PUBLISH_INTERVAL = 0.25
"""Least seconds between two status records (and two window buckets) by default."""
DEFAULT_PROFILE_EVERY = 500
"""Steps between two profiled steps by default (see benchmarks/RESULTS-torch.md for the cost)."""
COUNT_STEP = 1
"""The first step (counted from 0 over the meter's life) that may run under the FLOP counter: not the very first
(lazy initialisation); a counted step that did not end normally is counted again on the next."""
FIRST_PROFILED_STEP = 3
"""The first profiled step: early, so a breakdown shows soon, and after the counted step."""


class LoopMeter:
    """Measures a training loop from its step boundaries and publishes the status record.

    ``model`` (a ``torch.nn.Module``) lets the meter see autocast and the math mode in the forward pass and count
    parameters for ``flops="6N"``; ``loader`` is only read for its settings. ``batch_size`` gives the samples per
    step (else the leading dimension of the batch's first tensor). FLOPs per step: ``flops_per_step`` when given,
    else counted once (``flops="count"``, the FLOPs that run: HFU), else ``flops="6N"`` (6 x trainable
    parameters x tokens: decoder-only transformers, an estimate), else none (``flops=None``). ``peak_tflops``
    overrides the peak table. One step in every ``profile_every`` is profiled for the breakdown (None: never).
    The rest is as for :func:`~gpusight.torch.watch`. Use it from one thread at a time.
    """

    def __init__(
        self,
        *,
        name: str = "train",
        model: Any = None,
        loader: Any = None,
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
    ) -> None:
        """Set up the meter; see the class docstring."""
        if publish_interval <= 0:
            raise ValueError("publish_interval must be positive")
        if batch_size is not None and batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if profile_every is not None and profile_every < 1:
            raise ValueError("profile_every must be at least 1 (or None: never profile)")
        self.name = name
        """Label written to the status record."""
        self.loader = loader
        """The loader whose settings the record shows, or None."""
        self._window = RollingWindow(window_seconds)
        self._interval = publish_interval
        self._publisher = StatusPublisher(directory) if publish else None
        self._batch_size = batch_size
        self._counter = BatchCounter()
        self._flops = FlopsMeter(model, flops_per_step=flops_per_step, flops=flops, peak_tflops=peak_tflops)
        self._breakdown = BreakdownSampler()
        self._profile_every = profile_every
        self._active = False
        self._autocast: bool | None = None
        self._probe_forward = False
        self._hook = None
        if not isinstance(log_to, SystemMetrics):
            check_target(log_to)
        self._log_to = None if isinstance(log_to, SystemMetrics) else log_to
        self.metrics = log_to if isinstance(log_to, SystemMetrics) else None
        """Where GPU metrics and the loop's figures are logged at the step rate (from ``log_to``; for a writer or
        ``"mlflow"``, set up at each :meth:`begin` and closed at each :meth:`end`), or None."""
        if model is not None:
            self._hook = model.register_forward_pre_hook(self._on_forward)
        self._instrument: Instrument | None = None
        self._reset(time.perf_counter())
        self._due = self._start
        self._steps_made = 0
        self._next_instrumented = self._following(0)

    @property
    def status_path(self) -> Path | None:
        """Where this process's status record is written; None when publishing is off."""
        return None if self._publisher is None else self._publisher.path

    def _reset(self, now: float) -> None:
        """Start a new bucket at ``now``."""
        self._start = self._last = now
        self._requested: float | None = None
        self._arrived: float | None = None
        self._wait = self._excluded = 0.0
        self._steps = self._samples = self._sample_steps = self._tokens = self._token_steps = self._skipped = 0

    def begin(self) -> None:
        """Iteration starts (an epoch): the record says active; the first bucket is published at the first batch."""
        if self._log_to is not None and self.metrics is None:
            self.metrics = SystemMetrics(self._log_to)
        if self._instrument is not None:  # the previous pass never ended
            self._abandon_instrument()
        self._reset(time.perf_counter())
        self._due = self._start
        self._active = True

    def batch_requested(self) -> None:
        """The current step's body has ended; waiting for the next batch starts."""
        now = time.perf_counter()
        if self._instrument is not None:
            now = self._finish_instrument()
        self._requested = now

    def batch_arrived(self, batch: Any = None, *, samples: int | None = None, tokens: int | None = None) -> None:
        """The next batch is here and the step body starts; ``samples``/``tokens`` count it when there is no batch."""
        now = time.perf_counter()
        if self._instrument is not None:  # the previous step never asked for a batch
            now = self._finish_instrument()
        requested = self._requested
        wait = 0.0 if requested is None else now - requested
        self._requested = None
        self._last = self._arrived = now
        step = self._steps_made
        self._steps_made = step + 1
        if step == self._next_instrumented:
            self._start_instrument(now, wait)
            return
        self._wait += wait
        self._steps += 1
        if self._batch_size is not None:
            samples = self._batch_size
        elif samples is None and batch is not None:
            samples, found_tokens = self._counter.counts(batch)
            tokens = found_tokens if tokens is None else tokens
        if samples is not None:
            self._samples += samples
            self._sample_steps += 1
        if tokens is not None:
            self._tokens += tokens
            self._token_steps += 1
        if now >= self._due:
            self._close_bucket(now)

    def end(self) -> None:
        """Iteration stops (epoch end, break, error): a last bucket is added and the record says idle.

        A pending request (the loader ran out) counts as waiting up to now; after a break or an error only the time
        up to the last batch is counted.
        """
        now = time.perf_counter()
        if self._instrument is not None:
            self._abandon_instrument()
        if self._requested is not None:
            self._wait += now - self._requested
            self._last = now
            self._requested = None
        self._active = False
        self._close_bucket(self._last, final=True)

    def stats(self) -> WindowStats:
        """Rolling figures as of the latest bucket (at most ``publish_interval`` old while iterating)."""
        taken = self._window.stats()
        speed = self._flops.figures(taken)
        breakdown, source = self._breakdown.shares(taken.input_wait_fraction)
        batch_source = None
        if taken.samples_per_second is not None:
            batch_source = BatchSizeSource.GIVEN if self._batch_size is not None else BatchSizeSource.BATCH
        return replace(taken, batch_size_source=batch_source, breakdown=breakdown, breakdown_source=source, **speed)

    def close(self) -> None:
        """Remove the status record and the model hook, and stop the logging set up for ``log_to``; a later
        :meth:`begin` publishes a new record."""
        if self._instrument is not None:
            self._abandon_instrument()
        if self._log_to is not None and self.metrics is not None:
            self.metrics.close()
            self.metrics = None
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        if self._publisher is not None:
            self._publisher.remove()

    def _following(self, step: int) -> int:
        """The first step from ``step`` on that runs under the FLOP counter or the profiler (-1: none)."""
        if self._flops.wants_count():
            return max(step, COUNT_STEP)
        every = self._profile_every
        if every is None:
            return -1
        if step <= FIRST_PROFILED_STEP:
            return FIRST_PROFILED_STEP
        return FIRST_PROFILED_STEP + -(-(step - FIRST_PROFILED_STEP) // every) * every

    def _start_instrument(self, now: float, wait: float) -> None:
        """Run the step that starts at ``now`` under the FLOP counter or the profiler; it is left out of the window."""
        self._excluded += wait
        self._skipped += 1
        self._next_instrumented = -1  # known again when this one ends
        self._instrument = self._flops if self._flops.wants_count() else self._breakdown
        self._instrument.start()
        if now >= self._due:
            self._close_bucket(now)

    def _finish_instrument(self) -> float:
        """Stop the running instrument; its step (wait, body and the instrument's own cost) leaves the window.

        Returns the time the loop's own clock resumes.
        """
        instrument, self._instrument = self._instrument, None
        if instrument is not None:
            instrument.stop()
        self._next_instrumented = self._following(self._steps_made)
        resumed = time.perf_counter()
        self._excluded += resumed - (self._arrived or resumed)
        self._last = resumed
        return resumed

    def _abandon_instrument(self) -> None:
        """Stop the running instrument without keeping its result (the step did not end normally)."""
        instrument, self._instrument = self._instrument, None
        if instrument is not None:
            instrument.abandon()
        self._next_instrumented = self._following(self._steps_made)

    def _on_forward(self, module: Any, args: Any) -> None:
        """Forward pre-hook: note autocast and the math mode, once per bucket."""
        if self._probe_forward:
            self._probe_forward = False
            self._autocast = autocast_active()
            self._flops.see_forward(module)

    def _close_bucket(self, end: float, final: bool = False) -> None:
        """Add a bucket to the window, publish the record and hand a point to the logging when one is due.

        At the end of a pass (``final``) a last point is logged and written before the loop goes on, so it is
        in the writer before the program closes it.
        """
        elapsed = max(0.0, end - self._start - self._excluded)
        if elapsed > 0.0 or self._steps or self._skipped:
            self._window.add_bucket(Bucket(end, elapsed, min(self._wait, elapsed), self._steps, self._samples,
                                           self._sample_steps, self._tokens, self._token_steps, self._skipped))
        self._start = end
        self._wait = self._excluded = 0.0
        self._steps = self._samples = self._sample_steps = self._tokens = self._token_steps = self._skipped = 0
        self._due = end + self._interval
        self._log(final)
        if self._hook is not None:
            self._probe_forward = True
        elif autocast_active():
            self._autocast = True  # autocast wraps the whole loop; seen from here
        if self._publisher is not None:
            self._publish(self.stats())

    def _log(self, final: bool) -> None:
        """Hand the tracker a point when one is due; at the end of a pass, write it out."""
        if self.metrics is None:
            return
        taken = self.stats()
        if taken.total_steps:
            self.metrics.step(taken.total_steps - 1, taken, force=final)
        if final and self._log_to is not None:
            self.metrics.close()
            self.metrics = None
        elif final:
            self.metrics.flush()

    def _publish(self, stats: WindowStats) -> None:
        """Write the status record from ``stats``."""
        assert self._publisher is not None
        breakdown = None
        if stats.breakdown is not None and stats.breakdown_source is not None:
            breakdown = {**stats.breakdown, "source": stats.breakdown_source.value}
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
                "speed": _speed_section(stats),
                "breakdown": breakdown,
            }
        )


_SPEED_KEYS = ("samples_per_second", "tokens_per_second", "batch_size_source", "flops_per_step", "flops_source",
               "achieved_tflops", "peak_tflops", "peak_source", "math_mode", "flops_utilization_fraction",
               "flops_utilization_note")
"""The record's ``speed`` keys, each a :class:`WindowStats` field of the same name."""


def _speed_section(stats: WindowStats) -> dict[str, Any]:
    """The record's ``speed`` section: the known speed figures of ``stats`` (enums as their values)."""
    section: dict[str, Any] = {}
    for key in _SPEED_KEYS:
        value = getattr(stats, key)
        if value is not None:
            section[key] = getattr(value, "value", value)
    return section
