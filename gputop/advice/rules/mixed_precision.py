"""Mixed precision: busy SMs with idle tensor cores on a GPU that has them (GPM metrics, compute capability 7.0+)."""

from __future__ import annotations

from gputop.advice.context import Context, Finding
from gputop.advice.rules.base import Rule, pct


def _evaluate(ctx: Context) -> list[Finding]:
    t = ctx.t
    out = []
    for index, device in sorted(ctx.devices.items()):
        cc = device.compute_capability
        if cc is None or cc < (7, 0) or device.tensor_active_percent is None:
            continue
        sm = ctx.device_stat(index, "sm_active_percent")
        tensor = ctx.device_stat(index, "tensor_active_percent")
        if sm is None or tensor is None or sm.mean < t.sm_busy_percent or tensor.mean > t.tensor_idle_percent:
            continue
        evidence = (
            f"GPU {index} SMs active {pct(sm.mean)} but tensor cores {tensor.mean:.1f} % over the last "
            f"{t.window_s:.0f} s (compute capability {cc[0]}.{cc[1]})"
        )
        dtype = "torch.bfloat16" if cc >= (8, 0) else "torch.float16 with torch.amp.GradScaler"
        action = f"train with automatic mixed precision: torch.autocast('cuda', dtype={dtype})"
        if cc >= (8, 0):
            action += "; for code that must stay FP32, torch.backends.cuda.matmul.allow_tf32 = True also uses tensor cores"
        title = f"GPU {index} computes without its tensor cores: mixed precision would be faster"
        out.append(RULE.finding("info", f"gpu{index}", title, evidence, action, (index,)))
    return out


RULE = Rule("mixed_precision", _evaluate)
"""Busy SMs, idle tensor cores (needs GPM)."""
