"""DataLoader advice the rules share: how many workers to suggest (by idle cores and host memory) and which
loader settings are still worth setting (``gpusight.torch`` reports the ones already set)."""

from __future__ import annotations

from dataclasses import dataclass

from gpusight.advice.context import Context
from gpusight.advice.feeds import Feed
from gpusight.snapshot.model import ProcessSample


@dataclass(frozen=True, slots=True)
class WorkerPlan:
    """A worker count to grow toward, and whether host memory rather than cores limits it."""

    current: int
    """Workers now (0 when unknown)."""
    target: int
    """Suggested ``num_workers``; equals ``current`` when host memory leaves no room for another."""
    memory_note: str | None
    """How host memory sized the count, for the evidence; None when memory is unknown."""
    memory_limited: bool
    """True when host memory, not cores, is the limit: more workers would each copy the dataset again."""
    capped: bool = False
    """True when host memory lowered ``target`` below what the idle cores allow."""


def has_room_for_workers(ctx: Context, feed: Feed) -> bool:
    """True for the few_workers rule's case: no workers at all, or few workers with idle cores for more.

    A trainer with no workers always has room for the first: one worker process overlaps loading with
    the GPU step even on a busy host, which loading in the main process never can.
    """
    if feed.worker_count == 0:
        return True
    idle = ctx.idle_cores()
    return (
        feed.worker_count is not None
        and feed.worker_count <= ctx.thresholds.few_workers
        and idle is not None
        and idle >= ctx.idle_cores_needed()
    )


def plan_workers(ctx: Context, feed: Feed) -> WorkerPlan:
    """The worker count to suggest for ``feed``: the current one plus the idle cores, within this trainer's
    share of the cores, and capped by the host's free memory less ``host_memory_reserve_percent``.

    Each worker's memory is estimated from the RSS of its existing workers, else from the trainer's RSS
    (an upper bound: a forked worker shares much of its parent's pages until it writes them).
    """
    current = feed.worker_count or 0
    idle = ctx.idle_cores() or 0.0
    share = max(1, ctx.cores // max(1, len(ctx.trainers())) - 1)
    target = max(current + 1, min(current + int(idle), share))
    per_worker, source = _worker_memory(feed)
    free = ctx.free_host_memory()
    total = ctx.snapshot.host.memory_total_bytes
    if per_worker is None or free is None or not total:
        return WorkerPlan(current, target, None, False)
    spare = free - total * ctx.thresholds.host_memory_reserve_percent / 100.0
    room = max(0, int(spare // per_worker))
    note = (
        f"each worker holds about {per_worker / 2**30:.1f} GiB ({source}); {free / 2**30:.1f} GiB of host memory "
        f"free leaves room for {room} more with {ctx.thresholds.host_memory_reserve_percent:.0f} % kept free"
    )
    if room < 1:
        return WorkerPlan(current, current, note, True)
    return WorkerPlan(current, min(target, current + room), note, False, current + room < target)


def _worker_memory(feed: Feed) -> tuple[int | None, str]:
    """Estimated resident memory of one more worker, and where the estimate comes from."""
    known = [worker.rss_bytes for worker in feed.workers if worker.rss_bytes is not None]
    if known:
        return sum(known) // len(known), "RSS of its workers"
    if feed.trainer.rss_bytes is not None:
        return feed.trainer.rss_bytes, "the trainer's RSS, an upper bound"
    return None, ""


def free_cores_first(wait: float) -> str:
    """The action where the trainer or its workers wait ``wait`` percent for a CPU: more workers would queue
    for the same oversubscribed cores, so free cores or give the job its own first."""
    return (
        f"its cores are oversubscribed (it waits {wait:.0f} % for a CPU), so more workers would only queue for the "
        "same cores: free cores first (stop or renice other CPU-heavy processes) or give this job cores of its own "
        "with CPU affinity (taskset -c, numactl --physcpubind, a cgroup cpuset)"
    )


SHARE_DATASET = (
    "host memory is the limit, not cores: share the dataset between workers instead of copying it "
    "(memory-mapped arrays with numpy.memmap, Arrow/Hugging Face datasets, or tensors instead of Python lists "
    "so fork's copy-on-write pages stay shared)"
)
"""What to do when host memory, not cores, stops more workers."""


def loader_settings(trainer: ProcessSample, pin: bool = True, persistent: bool = True, prefetch: bool = True) -> list[str]:
    """The DataLoader settings still worth setting, e.g. ``["pin_memory=True", "prefetch_factor=4 (now 2)"]``.

    A setting the trainer reports already set (``gpusight.torch``) is never recommended again; a known
    ``prefetch_factor`` is quoted and doubled (at least 4).
    """
    settings = []
    if pin and trainer.loader_pin_memory is not True:
        settings.append("pin_memory=True")
    if persistent and trainer.loader_persistent_workers is not True:
        settings.append("persistent_workers=True")
    if prefetch:
        factor = trainer.loader_prefetch_factor
        if factor is None:
            settings.append("prefetch_factor=4 (default 2)")
        else:
            settings.append(f"prefetch_factor={max(4, 2 * factor)} (now {factor})")
    return settings
