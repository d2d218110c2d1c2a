"""Multi-GPU imbalance: one GPU of a job much busier than its others (the ``nn.DataParallel`` pattern)."""

from __future__ import annotations

from gpusight.advice.context import Context, Finding
from gpusight.advice.rules.base import Rule, listing, pct
from gpusight.snapshot.model import Severity


def _evaluate(ctx: Context) -> list[Finding]:
    thresholds = ctx.thresholds
    findings = []
    for found in ctx.imbalances():
        busiest, peers, utils, job = found.busiest, found.peers, found.utils, found.job
        peer_text = listing([f"GPU {index} {pct(utils[index])}" for index in peers])
        evidence = (
            f"GPU {busiest} util {pct(utils[busiest])} vs {peer_text} over the last {thresholds.window_s:.0f} s "
            f"({job.describe()})"
        )
        if len({rank.process.pid for rank in job.ranks}) == 1:
            action = (
                f"PID {job.ranks[0].process.pid} drives every GPU itself, as nn.DataParallel does (it scatters inputs "
                "and gathers outputs on one GPU): switch to DistributedDataParallel, one process per GPU (torchrun)"
            )
        else:
            action = (
                "move work done only on the busiest rank (logging, evaluation, checkpointing, metrics) out of the "
                "step or spread it over the ranks; check uneven sharding: DistributedSampler, equal per-rank batch sizes"
            )
        title = f"GPU {busiest} does much more work than the other GPUs of job {job.sample.id}"
        findings.append(RULE.finding(Severity.WARN, job.scope, title, evidence, action, job.devices))
    return findings


RULE = Rule("imbalance", "the GPUs of one job are unevenly loaded", _evaluate, needs=("utilization_gpu_percent",))
"""Busiest GPU of a job well above the mean of its others."""
