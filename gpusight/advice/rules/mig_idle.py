"""An idle MIG instance holding memory: processes keep memory on a MIG device whose SMs have done nothing for minutes.

The instance's own activity comes from GPM's MIG sampling (Hopper and later). Where it is N/A (older GPUs, GPM not
read) the rule stays silent rather than guess: the parent GPU's utilization is no one instance's figure.
"""

from __future__ import annotations

from gpusight.advice.context import Context, Finding
from gpusight.advice.rules.base import Rule, gib, listing, minutes, pct
from gpusight.snapshot.model import MigDeviceSample, ScopeKind, Severity, WorkloadKind
from gpusight.textsafe import safe_text


def mig_name(mig: MigDeviceSample) -> str:
    """``"MIG 0.3 (3g.40gb)"``: parent GPU, GPU instance id and profile, for titles and evidence."""
    profile = safe_text(mig.profile, 24)
    return f"MIG {mig.device_index}.{mig.gpu_instance_id}" + (f" ({profile})" if profile else "")


def _evaluate(ctx: Context) -> list[Finding]:
    thresholds = ctx.thresholds
    findings = []
    for (index, instance), mig in sorted(ctx.mig.items()):
        processes = [p for p in ctx.mig_processes.get((index, instance), [])
                     if ctx.kind_of(p) != WorkloadKind.INFERENCE]
        active = mig.sm_active_percent
        if not processes or active is None or active > thresholds.idle_util_percent:
            continue
        held = [p for p in processes if p.gpu_memory_bytes is not None]
        memory = sum(p.gpu_memory_bytes or 0 for p in held)
        if memory < thresholds.idle_memory_bytes:
            continue
        if any(p.sm_percent is not None and p.sm_percent > thresholds.idle_util_percent for p in processes):
            continue
        scope = ScopeKind.of_mig(index, instance)
        idle_for = ctx.held_for(f"{RULE.name}:{scope}")
        pids = listing([f"PID {p.pid} ({safe_text(p.user, 32) or 'unknown user'})" for p in held])
        name = mig_name(mig)
        evidence = (
            f"{pids} hold{'s' if len(held) == 1 else ''} {gib(memory)} on {name} while its SMs are {pct(active)} "
            f"active (GPM) for {minutes(idle_for)}"
        )
        action = (
            f"if it is a forgotten notebook or a finished job, stop it ({'; '.join(f'kill {p.pid}' for p in held)}) "
            f"or free the memory; until then {name} is blocked for others"
        )
        title = f"{name} is idle but holds {gib(memory)}"
        findings.append(RULE.finding(Severity.WARN, scope, title, evidence, action, (index,)))
    return findings


RULE = Rule("mig_idle_holding", "memory held on an idle MIG instance", _evaluate, needs=("mig_mode",),
            hold=lambda thresholds: thresholds.idle_hold_s, instant=True)
"""Memory held on an idle MIG instance for ``idle_hold_s``."""
