"""A free MIG instance: no process runs on it, so it is spare capacity for another job."""

from __future__ import annotations

from gpusight.advice.context import Context, Finding
from gpusight.advice.rules.base import Rule, gib
from gpusight.advice.rules.mig_idle import mig_name
from gpusight.snapshot.model import ScopeKind, Severity
from gpusight.textsafe import safe_text


def _evaluate(ctx: Context) -> list[Finding]:
    thresholds = ctx.thresholds
    findings = []
    for (index, instance), mig in sorted(ctx.mig.items()):
        if ctx.mig_processes.get((index, instance)) or mig.error:
            continue
        used, total = mig.memory_used_bytes, mig.memory_total_bytes
        if used is not None and total and 100.0 * used / total > thresholds.free_memory_percent:
            continue
        name = mig_name(mig)
        memory = f"{gib(used)} of {gib(total)} used" if used is not None and total else "memory N/A"
        evidence = f"{name}: no processes, {memory}"
        uuid = safe_text(mig.uuid, 64)
        target = uuid if uuid else f"the MIG device's UUID (nvidia-smi -L lists it under GPU {index})"
        action = f"run a job on it: CUDA_VISIBLE_DEVICES={target} python train.py"
        findings.append(RULE.finding(Severity.INFO, ScopeKind.of_mig(index, instance), f"{name} is free", evidence,
                                     action))
    return findings


RULE = Rule("mig_free", "MIG instance free for work", _evaluate,
            needs=("mig_mode",), hold=lambda thresholds: thresholds.free_hold_s, instant=True)
"""An unused MIG instance offered for work."""
