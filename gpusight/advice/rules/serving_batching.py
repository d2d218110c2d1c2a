"""An inference server under load with few SMs active: its batches are too small to fill the GPU.

NVML utilization follows requests, but GPM SM activity shows how much of the GPU each step uses.
A server busy for most of the window (utilization at or above ``low_util_percent``) whose SMs are
active less than ``launch_sm_active_percent`` runs many small decode steps: larger batches raise
throughput at some cost in latency.
"""

from __future__ import annotations

from gpusight.advice.context import Context, Finding
from gpusight.advice.rules.base import Rule, pct
from gpusight.advice.servers import server_of
from gpusight.snapshot.model import ScopeKind, Severity, WorkloadKind


def _evaluate(ctx: Context) -> list[Finding]:
    thresholds = ctx.thresholds
    findings = []
    for index in sorted(ctx.devices):
        servers = [p for p in ctx.gpu_processes.get(index, []) if ctx.kind_of(p) == WorkloadKind.INFERENCE]
        if not servers or ctx.feeds_on(index):
            continue
        util = ctx.util(index)
        sm_active = ctx.device_stat(index, "sm_active_percent")
        if util is None or sm_active is None or util < thresholds.low_util_percent:
            continue
        if sm_active.mean >= thresholds.launch_sm_active_percent:
            continue
        server = server_of(servers[0])
        evidence = (
            f"GPU {index} util {pct(util)} serving requests (PID {servers[0].pid}) but SMs active only "
            f"{pct(sm_active.mean)} (GPM) over the last {thresholds.window_s:.0f} s"
        )
        action = (
            f"let {server.name} form larger batches: {server.batching}; more concurrent requests per replica "
            "(fewer replicas) do the same; check the latency target still holds"
        )
        title = f"GPU {index} serves in small batches: most SMs idle under load"
        findings.append(RULE.finding(Severity.INFO, ScopeKind.GPU.of(index), title, evidence, action, (index,)))
    return findings


RULE = Rule("serving_batching", "an inference server under load runs small batches", _evaluate,
            needs=("utilization_gpu_percent", "sm_active_percent"))
"""An inference server under load with low SM activity."""
