"""Launch-bound or few SMs busy: NVML utilization high but GPM SM activity low on a training GPU."""

from __future__ import annotations

from gpusight.advice.context import Context, Finding
from gpusight.advice.rules.base import Rule, pct
from gpusight.snapshot.model import ScopeKind, Severity


def _evaluate(ctx: Context) -> list[Finding]:
    thresholds = ctx.thresholds
    findings = []
    for index in sorted(ctx.devices):
        util = ctx.util(index)
        if util is None or util < thresholds.launch_util_percent or not ctx.feeds_on(index):
            continue
        sm_active = ctx.device_stat(index, "sm_active_percent")
        if sm_active is None or sm_active.mean >= thresholds.launch_sm_active_percent:
            continue
        evidence = (
            f"GPU {index} NVML util {pct(util)} (time with any kernel running) but SMs active only "
            f"{pct(sm_active.mean)} (GPM) over the last {thresholds.window_s:.0f} s"
        )
        action = (
            "either the GPU is launch-bound (kernels too short, the CPU launching them is the limit) or its kernels "
            "occupy few SMs (small grids): raise the batch size; fuse small ops with torch.compile; capture the "
            "step in CUDA graphs (torch.compile(mode='reduce-overhead') or torch.cuda.graphs); "
            "nsys profile shows which kernels run with few blocks"
        )
        title = f"GPU {index} looks busy but most SMs are idle (launch-bound or few SMs busy)"
        findings.append(RULE.finding(Severity.WARN, ScopeKind.GPU.of(index), title, evidence, action, (index,)))
    return findings


RULE = Rule("launch_bound", "busy by NVML but few SMs active: launch-bound or small kernels", _evaluate,
            needs=("utilization_gpu_percent", "sm_active_percent"))
"""High NVML utilization with low SM activity (needs GPM)."""
