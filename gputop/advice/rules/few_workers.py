"""Too few DataLoader workers: a saturated trainer with zero or few workers while many cores sit idle."""

from __future__ import annotations

from gputop.advice.context import Context, Finding
from gputop.advice.rules.base import Rule, pct, pct_range, workers_phrase
from gputop.advice.rules.input_bound import has_room_for_workers, suggested_workers
from gputop.collect.model import ScopeKind, Severity


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
            idle = ctx.idle_cores() or 0.0
            count = feed.worker_count or 0
            pid = feed.trainer.pid
            if feed.measured_wait is not None:
                load = (
                    f"waits {pct(feed.measured_wait)} of each step for data (measured by gputop.torch) "
                    f"with num_workers={count}"
                )
            elif count == 0:
                load = f"loads data in its main process at {pct(feed.trainer.cpu_percent or 0.0)} CPU"
            else:
                load = f"has {workers_phrase(count)} at {pct_range(list(feed.worker_cpu))} CPU"
            evidence = (
                f"trainer PID {pid} {load}; GPU {index} util {pct(util)} over the last {thresholds.window_s:.0f} s; "
                f"{idle:.0f} of {ctx.cores} cores idle"
            )
            target = suggested_workers(ctx, count, idle)
            action = (
                f"DataLoader(num_workers={target}, pin_memory=True, persistent_workers=True, prefetch_factor=4): "
                f"workers decode and augment in parallel on the idle cores"
            )
            title = f"PID {pid} has too few DataLoader workers ({count}) for GPU {index}"
            findings.append(RULE.finding(Severity.WARN, ScopeKind.PID.of(pid), title, evidence, action, (index,)))
    return findings


RULE = Rule("few_workers", _evaluate)
"""Saturated input pipeline with few workers and idle cores."""
