"""How a trainer is fed: its DataLoader workers, their CPU use, and whether the input pipeline is saturated.

Shared by the rules that tell input-bound work from compute-side problems (input_bound,
few_workers, gpu_underused, batch_headroom, pcie_h2d, straggler) through
:meth:`~gpusight.advice.context.Context.feeds_on`, so they agree on one verdict per trainer.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpusight.advice.config import Thresholds
from gpusight.snapshot.model import ProcessSample


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
    worker_wait: float | None
    """Mean run-queue wait of the workers whose wait is known (see :func:`cpu_demand`); None when none is."""
    known: bool
    """True when the trainer's CPU and its worker count are known, so a verdict is possible."""
    starved: bool
    """True when the GPU is likely waiting for input (see :func:`input_starved`)."""
    loads_itself: bool
    """True when it has no workers and is CPU-saturated, so it loads data in its main process."""
    measured_wait: float | None = None
    """Percent of each step the trainer waits for its next batch, measured by ``gpusight.torch``."""
    cpu_bound: bool = False
    """True when the loading is CPU-bound: the workers' mean CPU is saturated, or the trainer loads itself."""


def feed_of(trainer: ProcessSample, workers: tuple[ProcessSample, ...], thresholds: Thresholds) -> Feed:
    """The feed of ``trainer``, given the DataLoader workers seen under it."""
    count = trainer.num_workers if trainer.num_workers is not None else (len(workers) if workers else None)
    if count is None:
        count = trainer.loader_num_workers
    cpu = tuple(w.cpu_percent for w in workers if w.cpu_percent is not None)
    waits = [w.cpu_wait_percent for w in workers if w.cpu_percent is not None and w.cpu_wait_percent is not None]
    wait = sum(waits) / len(waits) if waits else None
    measured = trainer.input_wait_percent
    known = measured is not None or (trainer.cpu_percent is not None and count is not None and (count == 0 or bool(cpu)))
    starved, loads_itself = input_starved(trainer, count, cpu, wait, thresholds) if known else (False, False)
    saturated = bool(cpu) and cpu_saturated(sum(cpu) / len(cpu), wait, thresholds)
    return Feed(trainer, workers, count, cpu, wait, known, starved, loads_itself, measured, saturated or loads_itself)


def cpu_demand(cpu: float, wait: float | None) -> float:
    """The CPU a process (or the mean of several) would use with a core of its own: its CPU percent plus its
    run-queue wait (``cpu_wait_percent``; taken as 0 where unknown).

    On a host whose cores are oversubscribed, a process that wants a whole core but shares it reads, say,
    59 % CPU and waits 41 % on the run queue: it is as short of CPU as one that reads 100 %.
    """
    return cpu + (wait or 0.0)


def cpu_saturated(cpu: float | None, wait: float | None, thresholds: Thresholds) -> bool:
    """True when CPU plus run-queue wait (:func:`cpu_demand`) reaches ``cpu_saturated_percent``; False for unknown CPU."""
    return cpu is not None and cpu_demand(cpu, wait) >= thresholds.cpu_saturated_percent


def cpu_text(cpu: float, wait: float | None, thresholds: Thresholds) -> str:
    """``"59 % CPU"``, with the run-queue wait added where it made the process saturated, e.g.
    ``"59 % CPU and waits 38 % for a CPU (cores oversubscribed)"``."""
    text = f"{cpu:.0f} % CPU"
    if wait is not None and tipped_by_wait(cpu, wait, thresholds):
        text += f" and waits {wait:.0f} % for a CPU (cores oversubscribed)"
    return text


def tipped_by_wait(cpu: float, wait: float, thresholds: Thresholds) -> bool:
    """True when the run-queue wait alone makes ``cpu`` saturated: below the threshold, at or above it with the wait."""
    return cpu < thresholds.cpu_saturated_percent <= cpu_demand(cpu, wait)


def workers_wait_text(feed: Feed, thresholds: Thresholds) -> str:
    """``" and wait 38 % for a CPU each (cores oversubscribed)"`` where the workers' run-queue wait made them
    saturated; empty otherwise."""
    if not feed.worker_cpu or feed.worker_wait is None:
        return ""
    if tipped_by_wait(sum(feed.worker_cpu) / len(feed.worker_cpu), feed.worker_wait, thresholds):
        return f" and wait {feed.worker_wait:.0f} % for a CPU each (cores oversubscribed)"
    return ""


def input_starved(
    trainer: ProcessSample,
    worker_count: int | None,
    worker_cpu: tuple[float, ...],
    worker_wait: float | None,
    thresholds: Thresholds,
) -> tuple[bool, bool]:
    """Whether the trainer waits on its input pipeline, and whether it loads data itself.

    When the trainer is instrumented with ``gpusight.torch``, its measured input-wait percent
    decides. Otherwise it is inferred from the outside: the workers' mean CPU demand (CPU plus
    run-queue wait, :func:`cpu_saturated`) is at the saturation threshold (each worker is one
    Python process, so a worker at ~100 % of a core is the limit), or there are no workers and the
    trainer itself is saturated (it decodes and augments in the main process).
    """
    if trainer.input_wait_percent is not None:
        starved = trainer.input_wait_percent >= thresholds.input_wait_percent
        return starved, starved and worker_count == 0
    if worker_count == 0:
        saturated = cpu_saturated(trainer.cpu_percent or 0.0, trainer.cpu_wait_percent, thresholds)
        return saturated, saturated
    if worker_cpu and cpu_saturated(sum(worker_cpu) / len(worker_cpu), worker_wait, thresholds):
        return True, False
    return False, False


def oversubscribed_wait(feed: Feed, thresholds: Thresholds) -> float | None:
    """The run-queue wait of the trainer or its workers (the larger) when it reaches ``cpu_wait_percent``:
    their cores are oversubscribed, so more workers would queue for the same cores; None otherwise."""
    waits = [wait for wait in (feed.trainer.cpu_wait_percent, feed.worker_wait) if wait is not None]
    worst = max(waits, default=None)
    return worst if worst is not None and worst >= thresholds.cpu_wait_percent else None
