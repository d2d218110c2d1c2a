"""Free capacity: a GPU with no processes and nearly all its memory free."""

from __future__ import annotations

from gpusight.advice.context import Context, Finding
from gpusight.advice.rules.base import Rule, gib, pct
from gpusight.snapshot.model import ScopeKind, Severity


def _evaluate(ctx: Context) -> list[Finding]:
    thresholds = ctx.thresholds
    findings = []
    for index, device in sorted(ctx.devices.items()):
        if ctx.gpu_processes.get(index) or device.mig_mode:
            continue
        util = ctx.util(index)
        used, total = device.memory_used_bytes, device.memory_total_bytes
        if util is None or used is None or not total or util > thresholds.idle_util_percent:
            continue
        if 100.0 * used / total > thresholds.free_memory_percent:
            continue
        evidence = f"GPU {index}: no processes, {gib(used)} of {gib(total)} used, util {pct(util)} over the last {thresholds.window_s:.0f} s"
        action = f"run a job on it: CUDA_VISIBLE_DEVICES={index} python train.py"
        findings.append(RULE.finding(Severity.INFO, ScopeKind.GPU.of(index), f"GPU {index} is free", evidence, action, (index,)))
    return findings


RULE = Rule("free_capacity", "GPU free for work", _evaluate,
            needs=("utilization_gpu_percent", "memory_used_bytes", "memory_total_bytes"), hold=lambda thresholds: thresholds.free_hold_s)
"""An unused GPU offered for work."""
