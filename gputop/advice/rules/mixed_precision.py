"""Mixed precision: busy SMs with idle tensor cores on a GPU that has them (GPM metrics, compute capability 7.0+)."""

from __future__ import annotations

from gputop.advice.context import Context, Finding
from gputop.advice.rules.base import Rule, pct
from gputop.collect.model import ScopeKind, Severity


def _evaluate(ctx: Context) -> list[Finding]:
    thresholds = ctx.thresholds
    findings = []
    for index, device in sorted(ctx.devices.items()):
        capability = device.compute_capability
        if capability is None or capability < (7, 0) or device.tensor_active_percent is None:
            continue
        sm_active = ctx.device_stat(index, "sm_active_percent")
        tensor = ctx.device_stat(index, "tensor_active_percent")
        if sm_active is None or tensor is None or sm_active.mean < thresholds.sm_busy_percent or tensor.mean > thresholds.tensor_idle_percent:
            continue
        evidence = (
            f"GPU {index} SMs active {pct(sm_active.mean)} but tensor cores {tensor.mean:.1f} % over the last "
            f"{thresholds.window_s:.0f} s (compute capability {capability[0]}.{capability[1]})"
        )
        dtype = "torch.bfloat16" if capability >= (8, 0) else "torch.float16 with torch.amp.GradScaler"
        action = f"train with automatic mixed precision: torch.autocast('cuda', dtype={dtype})"
        if capability >= (8, 0):
            action += "; for code that must stay FP32, torch.backends.cuda.matmul.allow_tf32 = True also uses tensor cores"
        title = f"GPU {index} computes without its tensor cores: mixed precision would be faster"
        findings.append(RULE.finding(Severity.INFO, ScopeKind.GPU.of(index), title, evidence, action, (index,)))
    return findings


RULE = Rule("mixed_precision", _evaluate)
"""Busy SMs, idle tensor cores (needs GPM)."""
