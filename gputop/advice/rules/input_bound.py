"""Input-pipeline bound: the GPU is under-used while the DataLoader (or a trainer loading its own data) is CPU-saturated."""

from __future__ import annotations

from gputop.advice.context import Context, Finding
from gputop.advice.feeds import Feed
from gputop.advice.rules.base import Rule, pct, pct_range, workers_phrase
from gputop.collect.model import ScopeKind, Severity


def suggested_workers(ctx: Context, current: int, idle: float) -> int:
    """A worker count to grow toward: the current one plus the idle cores, within this trainer's share of cores."""
    trainers = max(1, len(ctx.trainers()))
    share = max(1, ctx.cores // trainers - 1)
    return max(current + 1, min(current + int(idle), share))


def has_room_for_workers(ctx: Context, feed: Feed) -> bool:
    """True when the trainer has few workers and enough idle cores for more (the few_workers rule's case)."""
    idle = ctx.idle_cores()
    return (
        feed.worker_count is not None
        and feed.worker_count <= ctx.thresholds.few_workers
        and idle is not None
        and idle >= ctx.thresholds.min_idle_cores
    )


def _evaluate(ctx: Context) -> list[Finding]:
    thresholds = ctx.thresholds
    findings = []
    for index in sorted(ctx.devices):
        util = ctx.util(index)
        if util is None or util >= thresholds.low_util_percent:
            continue
        starved = (feed for feed in ctx.feeds_on(index) if feed.starved and not has_room_for_workers(ctx, feed))
        feed = next(starved, None)
        if feed is None:
            continue
        pid = feed.trainer.pid
        idle = ctx.idle_cores()
        if feed.measured_wait is not None:
            evidence = (
                f"GPU {index}'s trainer (PID {pid}) waits {pct(feed.measured_wait)} of each step for data "
                f"(measured by gputop.torch); GPU {index} util {pct(util)} over the last {thresholds.window_s:.0f} s; "
                f"num_workers={feed.worker_count if feed.worker_count is not None else 'unknown'}"
                + (f" on {ctx.cores} cores" if ctx.cores else "")
            )
        elif feed.loads_itself:
            evidence = (
                f"GPU {index} util {pct(util)} over the last {thresholds.window_s:.0f} s while trainer PID {pid} "
                f"has no DataLoader workers and runs at {pct(feed.trainer.cpu_percent or 0.0)} CPU"
            )
        else:
            evidence = (
                f"GPU {index} util {pct(util)} over the last {thresholds.window_s:.0f} s while its "
                f"{workers_phrase(len(feed.worker_cpu))} (trainer PID {pid}) run at {pct_range(list(feed.worker_cpu))} CPU"
            )
        current = feed.worker_count or 0
        if idle is not None and idle >= 1.0 and ctx.cores:
            busy = ctx.cores - idle
            more = (
                f"raise DataLoader num_workers from {current} toward {suggested_workers(ctx, current, idle)} "
                f"({ctx.cores} cores, {busy:.0f} busy); "
            )
        else:
            more = "no idle cores for more workers, so make each sample cheaper: "
        action = (
            more + "pin_memory=True, persistent_workers=True; move augmentation to the GPU (DALI, "
            "torchvision.transforms.v2 on CUDA tensors) or precompute it offline; store data pre-decoded"
        )
        title = f"GPU {index} waits for its input pipeline (CPU-bound data loading)"
        findings.append(RULE.finding(Severity.WARN, ScopeKind.GPU.of(index), title, evidence, action, (index,)))
    return findings


RULE = Rule("input_bound", _evaluate)
"""GPU under-used while the input pipeline is CPU-saturated."""
