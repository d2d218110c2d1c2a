"""Launch-bound: NVML utilization high but GPM SM activity low, so kernels are too small to fill the GPU."""

from __future__ import annotations

from gputop.advice.context import Context, Finding
from gputop.advice.rules.base import Rule, pct


def _evaluate(ctx: Context) -> list[Finding]:
    t = ctx.t
    out = []
    for index in sorted(ctx.devices):
        util = ctx.util(index)
        if util is None or util < t.launch_util_percent:
            continue
        sm = ctx.device_stat(index, "sm_active_percent")
        if sm is None or sm.mean >= t.launch_sm_active_percent:
            continue
        evidence = (
            f"GPU {index} NVML util {pct(util)} (time with any kernel running) but SMs active only "
            f"{pct(sm.mean)} (GPM) over the last {t.window_s:.0f} s"
        )
        action = (
            "kernels are too small to fill the GPU: raise the batch size; fuse small ops with torch.compile; "
            "capture the step in CUDA graphs (torch.compile(mode='reduce-overhead') or torch.cuda.graphs)"
        )
        title = f"GPU {index} looks busy but most SMs are idle (small kernels)"
        out.append(RULE.finding("warn", f"gpu{index}", title, evidence, action, (index,)))
    return out


RULE = Rule("launch_bound", _evaluate)
"""High NVML utilization with low SM activity (needs GPM)."""
