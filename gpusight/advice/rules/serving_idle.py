"""An idle inference server holding most of a GPU's memory: by design (its KV cache), worth a note only after a long lull.

Inference servers reserve most of the GPU's memory at start for the KV cache and idle between
bursts of requests, so trainer advice ("kill it", out-of-memory risk) never applies to them. After
``serving_idle_hold_s`` of idling with at least ``serving_memory_percent`` of the memory held, the
rule says what the reservation costs and how to shrink it if others need the GPU.
"""

from __future__ import annotations

from gpusight.advice.context import Context, Finding
from gpusight.advice.rules.base import Rule, command_text, gib, minutes, pct
from gpusight.advice.servers import server_of
from gpusight.snapshot.model import ScopeKind, Severity, WorkloadKind


def _evaluate(ctx: Context) -> list[Finding]:
    thresholds = ctx.thresholds
    findings = []
    for index, device in sorted(ctx.devices.items()):
        util, total = ctx.util(index), device.memory_total_bytes
        if util is None or util > thresholds.idle_util_percent or not total:
            continue
        for process in ctx.gpu_processes.get(index, []):
            memory = process.gpu_memory_bytes
            if ctx.kind_of(process) != WorkloadKind.INFERENCE or memory is None:
                continue
            share = 100.0 * memory / total
            if share < thresholds.serving_memory_percent:
                continue
            server = server_of(process)
            scope = ScopeKind.PID.of(process.pid)
            idle_for = ctx.held_for(f"{RULE.name}:{scope}")
            command = command_text(process)
            evidence = (
                f"PID {process.pid} ({command}) holds {gib(memory)} ({pct(share)} of GPU {index}) at {pct(util)} util "
                f"for {minutes(idle_for)}; an inference server reserves it for its KV cache, so this is by design"
            )
            action = (
                f"nothing to do while GPU {index} is kept for serving; if others need it during lulls, {server.memory} "
                "or scale the server down (stop it, or scale to zero) until requests return"
            )
            title = f"Idle {server.name} (PID {process.pid}) keeps {gib(memory)} of GPU {index} for its KV cache"
            findings.append(RULE.finding(Severity.INFO, scope, title, evidence, action, (index,)))
    return findings


RULE = Rule("serving_idle", "an inference server idle while holding its memory", _evaluate,
            needs=("utilization_gpu_percent", "memory_total_bytes"), hold=lambda thresholds: thresholds.serving_idle_hold_s)
"""An inference server idle for a long time while holding most of its GPU's memory."""
