"""How a trainer is fed: its DataLoader workers, their CPU use, and whether the input pipeline is saturated.

Shared by the rules that tell input-bound work from compute-side problems (input_bound,
few_workers, gpu_underused, batch_headroom, pcie_h2d, straggler) through
:meth:`~gputop.advice.context.Context.feeds_on`, so they agree on one verdict per trainer.
"""

from __future__ import annotations

from dataclasses import dataclass

from gputop.advice.config import Thresholds
from gputop.collect.model import ProcessSample


@dataclass(frozen=True, slots=True)
class Feed:
    """A GPU process (the trainer), its DataLoader workers and the verdict on its input pipeline."""

    trainer: ProcessSample
    """The GPU process."""
    workers: tuple[ProcessSample, ...]
    """Its DataLoader workers seen in the snapshot."""
    worker_count: int | None
    """How many workers it has; None when unknown (e.g. its children could not be read)."""
    worker_cpu: tuple[float, ...]
    """Known CPU percents of the workers."""
    known: bool
    """True when the trainer's CPU and its worker count are known, so a verdict is possible."""
    starved: bool
    """True when the GPU is likely waiting for input (see :func:`input_starved`)."""
    loads_itself: bool
    """True when it has no workers and is CPU-saturated, so it loads data in its main process."""
    measured_wait: float | None = None
    """Percent of each step the trainer waits for its next batch, measured by ``gputop.torch``."""
    cpu_bound: bool = False
    """True when the loading is CPU-bound: the workers' mean CPU is saturated, or the trainer loads itself."""


def feed_of(trainer: ProcessSample, workers: tuple[ProcessSample, ...], thresholds: Thresholds) -> Feed:
    """The feed of ``trainer``, given the DataLoader workers seen under it."""
    count = trainer.num_workers if trainer.num_workers is not None else (len(workers) if workers else None)
    if count is None:
        count = trainer.loader_num_workers
    cpu = tuple(w.cpu_percent for w in workers if w.cpu_percent is not None)
    measured = trainer.input_wait_percent
    known = measured is not None or (trainer.cpu_percent is not None and count is not None and (count == 0 or bool(cpu)))
    starved, loads_itself = input_starved(trainer, count, cpu, thresholds) if known else (False, False)
    saturated = bool(cpu) and sum(cpu) / len(cpu) >= thresholds.cpu_saturated_percent
    return Feed(trainer, workers, count, cpu, known, starved, loads_itself, measured, saturated or loads_itself)


def input_starved(
    trainer: ProcessSample, worker_count: int | None, worker_cpu: tuple[float, ...], thresholds: Thresholds
) -> tuple[bool, bool]:
    """Whether the trainer waits on its input pipeline, and whether it loads data itself.

    When the trainer is instrumented with ``gputop.torch``, its measured input-wait percent
    decides. Otherwise it is inferred from the outside: the workers' mean CPU is at the
    saturation threshold (each worker is one Python process, so a worker at ~100 % of a core is
    the limit), or there are no workers and the trainer itself is saturated (it decodes and
    augments in the main process).
    """
    if trainer.input_wait_percent is not None:
        starved = trainer.input_wait_percent >= thresholds.input_wait_percent
        return starved, starved and worker_count == 0
    if worker_count == 0:
        saturated = (trainer.cpu_percent or 0.0) >= thresholds.cpu_saturated_percent
        return saturated, saturated
    if worker_cpu and sum(worker_cpu) / len(worker_cpu) >= thresholds.cpu_saturated_percent:
        return True, False
    return False, False
