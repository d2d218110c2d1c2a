"""Mixed precision: a GPU with tensor cores (compute capability 7.0+) computing without them.

Two kinds of evidence, either enough: ``gpusight.torch`` reports autocast off in the trainer's forward
pass (no GPM needed), or GPM shows busy SMs with idle tensor cores. A trainer reporting autocast on
is never told to turn it on.
"""

from __future__ import annotations

from gpusight.advice.context import Context, Finding
from gpusight.advice.rules.base import Rule, listing, pct
from gpusight.snapshot.model import ScopeKind, Severity


def _evaluate(ctx: Context) -> list[Finding]:
    thresholds = ctx.thresholds
    findings = []
    for index, device in sorted(ctx.devices.items()):
        capability = device.compute_capability
        feeds = ctx.feeds_on(index)
        if capability is None or capability < (7, 0) or not feeds or any(feed.trainer.autocast for feed in feeds):
            continue
        util = ctx.util(index)
        if util is None or util <= thresholds.idle_util_percent:
            continue
        window = f"over the last {thresholds.window_s:.0f} s"
        parts = []
        off = [feed.trainer.pid for feed in feeds if feed.trainer.autocast is False]
        if off:
            parts.append(f"autocast off (gpusight.torch) in {listing([f'PID {pid}' for pid in off])} at {pct(util)} util {window}")
        sm_active = ctx.device_stat(index, "sm_active_percent")
        tensor = ctx.device_stat(index, "tensor_active_percent")
        gpm_idle = (
            device.tensor_active_percent is not None
            and sm_active is not None
            and tensor is not None
            and sm_active.mean >= thresholds.sm_busy_percent
            and tensor.mean <= thresholds.tensor_idle_percent
        )
        if gpm_idle and sm_active is not None and tensor is not None:
            parts.append(f"GPU {index} SMs active {pct(sm_active.mean)} but tensor cores {tensor.mean:.1f} % {window}")
        if not parts:
            continue
        evidence = "; ".join(parts) + f" (compute capability {capability[0]}.{capability[1]})"
        dtype = "torch.bfloat16" if capability >= (8, 0) else "torch.float16 with torch.amp.GradScaler"
        action = f"train with automatic mixed precision: torch.autocast('cuda', dtype={dtype})"
        if capability >= (8, 0):
            action += "; for code that must stay FP32, torch.backends.cuda.matmul.allow_tf32 = True also uses tensor cores"
        title = f"GPU {index} computes without its tensor cores: mixed precision would be faster"
        findings.append(RULE.finding(Severity.INFO, ScopeKind.GPU.of(index), title, evidence, action, (index,)))
    return findings


RULE = Rule("mixed_precision", "tensor cores idle: mixed precision (AMP/bf16) would use them", _evaluate,
            needs=("compute_capability", "utilization_gpu_percent"))
"""Autocast off (gpusight.torch) or busy SMs with idle tensor cores (GPM), on a GPU with tensor cores."""
