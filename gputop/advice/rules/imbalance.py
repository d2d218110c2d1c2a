"""Multi-GPU imbalance: one GPU of a job much busier than its peers."""

from __future__ import annotations

from gputop.advice.context import Context, Finding
from gputop.advice.rules.base import Rule, listing, pct
from gputop.collect.model import Severity


def waiting_peers(ctx: Context) -> set[int]:
    """GPUs that idle because a busier GPU of their job (known from the process tree) holds them back."""
    return {index for found in ctx.imbalances() if not found.job.by_user_only for index in found.peers}


def _evaluate(ctx: Context) -> list[Finding]:
    thresholds = ctx.thresholds
    findings = []
    for found in ctx.imbalances():
        busiest, peers, utils = found.busiest, found.peers, found.utils
        peer_text = listing([f"GPU {index} {pct(utils[index])}" for index in peers])
        evidence = (
            f"GPU {busiest} util {pct(utils[busiest])} vs {peer_text} over the last {thresholds.window_s:.0f} s "
            f"({found.job.description})"
        )
        action = (
            "with nn.DataParallel, switch to DistributedDataParallel (DataParallel scatters and gathers on one GPU); "
            "otherwise look for a straggler or uneven sharding: DistributedSampler, equal per-rank batch sizes, "
            "length-bucketed sequences, and logging, evaluation or checkpointing done only on rank 0"
        )
        title = f"GPU {busiest} does much more work than the other GPUs of its job"
        findings.append(RULE.finding(Severity.WARN, found.job.scope, title, evidence, action, found.job.devices))
    return findings


RULE = Rule("imbalance", _evaluate)
"""Busiest GPU of a job well above the mean of its peers."""
