"""Healthy: a GPU busy above the healthy threshold is said plainly, so silence is never ambiguous.

NVML utilization only says that some kernel ran; where GPM reports SM activity, a GPU whose SMs are
mostly idle (below ``launch_sm_active_percent``) is not called healthy however high its utilization. Where
its trainers report their MFU (or HFU, ``gpusight.torch``), it must reach the floor for the kind of model
(``healthy_mfu_token_percent`` for a token model, ``healthy_mfu_percent`` for any other), since a GPU busy
with slow compute is not fine either.

The engine drops this advice for any GPU that another piece of advice concerns, and it waits as
long as the slowest rule that could contradict it, so it does not flash up before a throttling
warning.
"""

from __future__ import annotations

from gpusight.advice.context import Context, Finding
from gpusight.advice.rules.base import Rule, gib, pct
from gpusight.advice.speed import utilization_floor
from gpusight.facts.speed import speed_of
from gpusight.snapshot.model import Advice, ScopeKind, Severity, WorkloadKind

TRAINING_ACTION = "nothing to change; keep watching after changes to the model, data or batch size"
"""What a busy training (or unknown) GPU needs."""
SERVING_ACTION = "nothing to change; the server keeps up with its load; keep watching when traffic or the model changes"
"""What a busy GPU that only serves inference needs."""


def _evaluate(ctx: Context) -> list[Finding]:
    thresholds = ctx.thresholds
    findings = []
    for index, device in sorted(ctx.devices.items()):
        util = ctx.util(index)
        if util is None or util < thresholds.healthy_util_percent or not ctx.gpu_processes.get(index):
            continue
        sm_active = ctx.device_stat(index, "sm_active_percent")
        if sm_active is not None and sm_active.mean < thresholds.launch_sm_active_percent:
            continue
        speed = speed_of(ctx.gpu_processes[index])
        floor, kind = utilization_floor(thresholds, speed.tokens_per_second is not None)
        utilization = speed.flops_utilization_percent
        if utilization is not None and utilization < floor:
            continue
        evidence = f"GPU {index} util {pct(util)} over the last {thresholds.window_s:.0f} s"
        if sm_active is not None:
            evidence += f", SMs active {pct(sm_active.mean)} (GPM)"
        if utilization is not None:
            evidence += f", {speed.utilization_name} {pct(utilization)} (at least {pct(floor)} for {kind})"
        if device.memory_used_bytes is not None and device.memory_total_bytes:
            evidence += f", memory {gib(device.memory_used_bytes)} of {gib(device.memory_total_bytes)}"
        serving = all(ctx.kind_of(process) == WorkloadKind.INFERENCE for process in ctx.gpu_processes[index])
        action = SERVING_ACTION if serving else TRAINING_ACTION
        findings.append(RULE.finding(Severity.INFO, ScopeKind.GPU.of(index), f"GPU {index} is busy and nothing looks wrong", evidence, action, (index,)))
    return findings


RULE = Rule("healthy", "busy, nothing looks wrong", _evaluate,
            needs=("utilization_gpu_percent",), hold=lambda thresholds: max(thresholds.hold_s, thresholds.throttle_hold_s))
"""A busy GPU with no other advice; it holds as long as the slowest rule that could contradict it."""


def is_all_clear(advice: Advice) -> bool:
    """True for this rule's "nothing looks wrong" advice, which asks for nothing to change."""
    return advice.id.partition(":")[0] == RULE.name
