"""Input-pipeline bound: the GPU is under-used while its trainer waits for batches (measured, or CPU-saturated workers)."""

from __future__ import annotations

from gpusight.advice.context import Context, Finding
from gpusight.advice.feeds import Feed, oversubscribed_wait, workers_wait_text
from gpusight.advice.loader import SHARE_DATASET, free_cores_first, has_room_for_workers, loader_settings, plan_workers
from gpusight.advice.rules.base import Rule, pct, pct_range, workers_phrase
from gpusight.advice.speed import gain_text
from gpusight.collect.model import ScopeKind, Severity


def _evaluate(ctx: Context) -> list[Finding]:
    thresholds = ctx.thresholds
    findings = []
    for index in sorted(ctx.devices):
        util = ctx.util(index)
        if util is None or util >= thresholds.low_util_percent:
            continue
        starved = (feed for feed in ctx.feeds_on(index) if feed.starved and not has_room_for_workers(ctx, feed))
        feed = next(starved, None)
        if feed is not None:
            findings.append(_finding(ctx, index, util, feed))
    return findings


def _finding(ctx: Context, index: int, util: float, feed: Feed) -> Finding:
    """The advice for a starved trainer on GPU ``index``; its title and action depend on whether loading is CPU-bound."""
    thresholds = ctx.thresholds
    pid = feed.trainer.pid
    window = f"over the last {thresholds.window_s:.0f} s"
    if feed.worker_cpu:
        workers = (
            f"its {workers_phrase(len(feed.worker_cpu))} run at {pct_range(list(feed.worker_cpu))} CPU"
            + workers_wait_text(feed, thresholds)
        )
    else:
        workers = f"num_workers={feed.worker_count if feed.worker_count is not None else 'unknown'}"
    if feed.measured_wait is not None:
        evidence = (
            f"GPU {index}'s trainer (PID {pid}) waits {pct(feed.measured_wait)} of each step for data "
            f"(measured by gpusight.torch): {gain_text(feed.measured_wait)}; GPU {index} util {pct(util)} {window}; "
            f"{workers}"
        )
    else:
        evidence = f"GPU {index} util {pct(util)} {window} while {workers} (trainer PID {pid})"
    if ctx.cores:
        evidence += f" on {ctx.cores} cores"
    settings = ", ".join(loader_settings(feed.trainer))
    if not feed.cpu_bound:
        title = f"GPU {index} waits for its input pipeline (workers not CPU-bound: reads, locks or prefetch)"
        action = (
            "the workers are not short of CPU, so more of them will not help by itself: check storage reads "
            "(iowait, network-filesystem throughput) and look for a lock or one shared file handle in "
            "Dataset.__getitem__"
        )
        return RULE.finding(Severity.WARN, ScopeKind.GPU.of(index), title, evidence, _with(action, settings), (index,))
    plan = plan_workers(ctx, feed)
    if plan.memory_note:
        evidence += "; " + plan.memory_note
    idle = ctx.idle_cores()
    wait = oversubscribed_wait(feed, thresholds)
    if plan.memory_limited:
        more = SHARE_DATASET
    elif wait is not None:
        more = free_cores_first(wait)
    elif idle is not None and idle >= 1.0 and ctx.cores:
        capped = ", capped by host memory" if plan.capped else ""
        more = (
            f"raise DataLoader num_workers from {plan.current} toward {plan.target} "
            f"({ctx.cores} cores, {ctx.cores - idle:.0f} busy{capped})"
        )
    else:
        more = "no idle cores for more workers, so make each sample cheaper"
    action = _with(more, settings) + (
        "; move augmentation to the GPU (DALI, torchvision.transforms.v2 on CUDA tensors) or precompute it offline; "
        "store data pre-decoded"
    )
    title = f"GPU {index} waits for its input pipeline (CPU-bound data loading)"
    return RULE.finding(Severity.WARN, ScopeKind.GPU.of(index), title, evidence, action, (index,))


def _with(action: str, settings: str) -> str:
    """``action`` followed by the loader settings still worth setting, if any."""
    return f"{action}; DataLoader({settings})" if settings else action


RULE = Rule("input_bound", "the GPU waits on its input pipeline", _evaluate)
"""GPU under-used while its trainer waits for input."""
