"""Memory headroom: a training GPU with low memory use and low utilization has room for a bigger batch."""

from __future__ import annotations

from gpusight.advice.context import Context, Finding
from gpusight.advice.rules.base import Rule, gib, pct
from gpusight.snapshot.model import ScopeKind, Severity


def _evaluate(ctx: Context) -> list[Finding]:
    thresholds = ctx.thresholds
    findings = []
    for index, device in sorted(ctx.devices.items()):
        util = ctx.util(index)
        total = device.memory_total_bytes
        if util is None or not total or not thresholds.idle_util_percent < util < thresholds.headroom_util_percent:
            continue
        used = ctx.device_stat(index, "memory_used_bytes")
        if used is None:
            continue
        share = 100.0 * used.maximum / total
        feeds = ctx.feeds_on(index)
        if share >= thresholds.headroom_memory_percent or not feeds or any(feed.starved for feed in feeds):
            continue
        factor = int(85.0 / max(share, 1.0))
        evidence = (
            f"GPU {index} uses {gib(used.maximum)} of {gib(total)} ({pct(share)}) at {pct(util)} util "
            f"over the last {thresholds.window_s:.0f} s (trainer PID {feeds[0].trainer.pid})"
        )
        grow = f"about {factor}x" if factor >= 2 else "somewhat"
        action = (
            f"raise the batch size ({grow} fits by memory) so each kernel does more work; scale the learning rate "
            "with it (linear scaling with warm-up; LARS/LAMB for very large batches) or keep the effective batch "
            "and use the memory for a larger model or longer sequences"
        )
        title = f"GPU {index} has memory to spare: a bigger batch would keep it busier"
        findings.append(RULE.finding(Severity.INFO, ScopeKind.GPU.of(index), title, evidence, action, (index,)))
    return findings


RULE = Rule("batch_headroom", "memory and compute to spare: a larger batch would use them", _evaluate,
            needs=("utilization_gpu_percent", "memory_used_bytes", "memory_total_bytes"))
"""Low memory use and low utilization on a training GPU."""
