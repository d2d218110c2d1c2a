"""Too few DataLoader workers: a starved trainer with no workers (``num_workers=0``), or few workers while cores sit idle."""

from __future__ import annotations

from gpusight.advice.context import Context, Finding
from gpusight.advice.feeds import cpu_text, oversubscribed_wait, workers_wait_text
from gpusight.advice.loader import SHARE_DATASET, free_cores_first, has_room_for_workers, loader_settings, plan_workers
from gpusight.advice.rules.base import Rule, pct, pct_range, workers_phrase
from gpusight.advice.speed import gain_text
from gpusight.snapshot.model import ScopeKind, Severity


def _evaluate(ctx: Context) -> list[Finding]:
    thresholds = ctx.thresholds
    findings = []
    for index in sorted(ctx.devices):
        util = ctx.util(index)
        if util is None or util >= thresholds.low_util_percent:
            continue
        for feed in ctx.feeds_on(index):
            if not (feed.starved and has_room_for_workers(ctx, feed)):
                continue
            idle = ctx.idle_cores()
            count = feed.worker_count or 0
            pid = feed.trainer.pid
            if feed.measured_wait is not None:
                load = (
                    f"waits {pct(feed.measured_wait)} of each step for data (measured by gpusight.torch) "
                    f"with num_workers={count}: {gain_text(feed.measured_wait)}"
                )
            elif count == 0:
                cpu = cpu_text(feed.trainer.cpu_percent or 0.0, feed.trainer.cpu_wait_percent, thresholds)
                load = f"loads data in its main process (num_workers=0) at {cpu}"
            else:
                load = f"has {workers_phrase(count)} at {pct_range(list(feed.worker_cpu))} CPU{workers_wait_text(feed, thresholds)}"
            evidence = f"trainer PID {pid} {load}; GPU {index} util {pct(util)} over the last {thresholds.window_s:.0f} s"
            if idle is not None and ctx.cores:
                evidence += f"; {idle:.0f} of {ctx.cores} cores idle"
            plan = plan_workers(ctx, feed)
            if plan.memory_note:
                evidence += "; " + plan.memory_note
            settings = ", ".join([f"num_workers={max(1, plan.target)}", *loader_settings(feed.trainer)])
            wait = oversubscribed_wait(feed, thresholds)
            if plan.memory_limited:
                action = SHARE_DATASET + (f"; then DataLoader({settings})" if count == 0 else "")
            elif wait is not None:
                action = free_cores_first(wait) + (
                    f"; then DataLoader({settings}): one worker overlaps loading with the GPU step" if count == 0 else ""
                )
            elif count == 0:
                action = (
                    f"DataLoader({settings}): with num_workers=0 every batch is decoded and augmented between steps "
                    "while the GPU waits; worker processes prepare the next batches during the step"
                )
            else:
                action = f"DataLoader({settings}): workers decode and augment in parallel on the idle cores"
            title = (
                f"PID {pid} loads its data in the training process (num_workers=0) for GPU {index}"
                if count == 0
                else f"PID {pid} has too few DataLoader workers ({count}) for GPU {index}"
            )
            findings.append(RULE.finding(Severity.WARN, ScopeKind.PID.of(pid), title, evidence, action, (index,)))
    return findings


RULE = Rule("few_workers", "too few DataLoader workers for the trainer", _evaluate,
            needs=("utilization_gpu_percent",))
"""A starved trainer with no workers, or few workers and idle cores."""
