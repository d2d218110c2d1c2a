"""The advice rules, one module each (a new rule is a new module and its line in :data:`RULES`, which lists them in
evaluation order)."""

from __future__ import annotations

from gpusight.advice.rules import (
    batch_headroom,
    comm_bound,
    decoder_bound,
    few_workers,
    free_capacity,
    gpu_underused,
    health,
    healthy,
    idle_holding,
    imbalance,
    input_bound,
    launch_bound,
    low_mfu,
    mig_free,
    mig_idle,
    mixed_precision,
    oom_risk,
    pcie_h2d,
    periodic_stall,
    serving_batching,
    serving_idle,
    storage_bound,
    straggler,
    stuck,
    throttling,
)
from gpusight.advice.rules.base import Rule

RULES: tuple[Rule, ...] = (
    health.RULE,
    decoder_bound.RULE,
    input_bound.RULE,
    few_workers.RULE,
    storage_bound.RULE,
    gpu_underused.RULE,
    batch_headroom.RULE,
    oom_risk.RULE,
    mixed_precision.RULE,
    launch_bound.RULE,
    pcie_h2d.RULE,
    throttling.RULE,
    idle_holding.RULE,
    mig_idle.RULE,
    imbalance.RULE,
    straggler.RULE,
    periodic_stall.RULE,
    comm_bound.RULE,
    stuck.RULE,
    low_mfu.RULE,
    serving_idle.RULE,
    serving_batching.RULE,
    free_capacity.RULE,
    mig_free.RULE,
    healthy.RULE,
)
"""Every rule, in evaluation order."""

SUMMARIES: dict[str, str] = {rule.name: rule.summary for rule in RULES}
"""Each rule's name -> its summary: what its advice means, in words that do not change with the figures."""

HEALTHY = healthy.RULE.name
"""Name of the rule whose advice yields to any other advice on the same GPU."""
