"""Launch-bound: NVML utilization high but GPM SM activity low, so kernels are too small to fill the GPU."""

from __future__ import annotations

from gputop.advice.context import Context, Finding
from gputop.advice.rules.base import Rule, pct
from gputop.collect.model import ScopeKind, Severity


def _evaluate(ctx: Context) -> list[Finding]:
    thresholds = ctx.thresholds
    findings = []
    for index in sorted(ctx.devices):
        util = ctx.util(index)
        if util is None or util < thresholds.launch_util_percent:
            continue
        sm_active = ctx.device_stat(index, "sm_active_percent")
        if sm_active is None or sm_active.mean >= thresholds.launch_sm_active_percent:
            continue
        evidence = (
            f"GPU {index} NVML util {pct(util)} (time with any kernel running) but SMs active only "
            f"{pct(sm_active.mean)} (GPM) over the last {thresholds.window_s:.0f} s"
        )
        action = (
            "kernels are too small to fill the GPU: raise the batch size; fuse small ops with torch.compile; "
            "capture the step in CUDA graphs (torch.compile(mode='reduce-overhead') or torch.cuda.graphs)"
        )
        title = f"GPU {index} looks busy but most SMs are idle (small kernels)"
        findings.append(RULE.finding(Severity.WARN, ScopeKind.GPU.of(index), title, evidence, action, (index,)))
    return findings


RULE = Rule("launch_bound", _evaluate)
"""High NVML utilization with low SM activity (needs GPM)."""
