"""Idle GPU holding memory: a process keeps GPU memory while the GPU has done nothing for minutes."""

from __future__ import annotations

from gpusight.advice.context import Context, Finding
from gpusight.advice.rules.base import Rule, command_text, gib, minutes, pct
from gpusight.snapshot.model import ScopeKind, Severity, WorkloadKind
from gpusight.textsafe import safe_text


def _evaluate(ctx: Context) -> list[Finding]:
    thresholds = ctx.thresholds
    findings = []
    for index, process in ((i, p) for i in sorted(ctx.devices) for p in ctx.gpu_processes.get(i, [])):
        if ctx.kind_of(process) == WorkloadKind.INFERENCE:
            continue  # serving_idle speaks to servers: their memory is held by design
        util = ctx.util(index)
        memory = process.gpu_memory_bytes
        if util is None or memory is None or util > thresholds.idle_util_percent or memory < thresholds.idle_memory_bytes:
            continue
        if process.sm_percent is not None and process.sm_percent > thresholds.idle_util_percent:
            continue
        scope = ScopeKind.PID.of(process.pid)
        idle_for = ctx.held_for(f"{RULE.name}:{scope}")
        user = safe_text(process.user, 32) or "unknown user"
        command = command_text(process)
        evidence = (
            f"PID {process.pid} ({user}: {command}) holds {gib(memory)} on GPU {index} at {pct(util)} util "
            f"for {minutes(idle_for)}"
        )
        action = (
            f"if it is a forgotten notebook, debugger or finished job, stop it (kill {process.pid}) or free the "
            f"memory (del the model, torch.cuda.empty_cache()); until then GPU {index} is blocked for others"
        )
        title = f"PID {process.pid} holds {gib(memory)} on idle GPU {index}"
        findings.append(RULE.finding(Severity.WARN, scope, title, evidence, action, (index,)))
    return findings


RULE = Rule("idle_holding", "memory held on an idle GPU", _evaluate,
            needs=("utilization_gpu_percent",), hold=lambda thresholds: thresholds.idle_hold_s)
"""Memory held on an idle GPU for ``idle_hold_s``."""
