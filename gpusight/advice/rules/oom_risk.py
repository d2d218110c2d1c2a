"""Out-of-memory risk: GPU memory use near the total on a GPU with a trainer (inference servers hold memory by design;
a GPU in MIG mode is partitioned, so its total is no process's limit)."""

from __future__ import annotations

from gpusight.advice.context import Context, Finding
from gpusight.advice.rules.base import Rule, gib
from gpusight.snapshot.model import ScopeKind, Severity


def _evaluate(ctx: Context) -> list[Finding]:
    thresholds = ctx.thresholds
    findings = []
    for index, device in sorted(ctx.devices.items()):
        now, total = device.memory_used_bytes, device.memory_total_bytes
        if device.mig_mode:
            continue  # the parent's memory is its instances' partitions, full by design; no process sees it all
        if now is None or not total or 100.0 * now / total < thresholds.oom_memory_percent or not ctx.feeds_on(index):
            continue
        used = ctx.device_stat(index, "memory_used_bytes")
        if used is None or 100.0 * used.mean / total < thresholds.oom_memory_percent:
            continue
        share = 100.0 * used.mean / total
        evidence = f"GPU {index} memory {gib(used.mean)} of {gib(total)} ({share:.1f} %) over the last {thresholds.window_s:.0f} s"
        action = (
            "a longer sequence or a bigger batch can raise CUDA out-of-memory errors: use AMP (bf16/fp16 activations), "
            "gradient checkpointing (torch.utils.checkpoint), or a smaller batch with gradient accumulation; "
            "PyTorch's caching allocator keeps freed blocks, so compare with torch.cuda.max_memory_allocated()"
        )
        title = f"GPU {index} memory is nearly full (out-of-memory risk)"
        findings.append(RULE.finding(Severity.WARN, ScopeKind.GPU.of(index), title, evidence, action, (index,)))
    return findings


RULE = Rule("oom_risk", "GPU memory nearly full: out-of-memory risk", _evaluate,
            needs=("memory_used_bytes", "memory_total_bytes"))
"""GPU memory above the OOM threshold."""
