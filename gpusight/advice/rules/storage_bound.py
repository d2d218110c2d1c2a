"""Storage-bound: high host iowait while GPUs with training processes are under-used."""

from __future__ import annotations

from gpusight.advice.context import Context, Finding
from gpusight.advice.rules.base import Rule, listing, pct
from gpusight.snapshot.model import ScopeKind, Severity


def _evaluate(ctx: Context) -> list[Finding]:
    thresholds = ctx.thresholds
    iowait = ctx.host_stat("iowait_percent")
    if iowait is None or iowait.mean < thresholds.iowait_percent:
        return []
    starved = []
    for index in sorted(ctx.devices):
        util = ctx.util(index)
        if ctx.feeds_on(index) and util is not None and util < thresholds.low_util_percent:
            starved.append((index, util))
    if not starved:
        return []
    gpus = listing([f"GPU {index} {pct(util)}" for index, util in starved])
    evidence = f"iowait {pct(iowait.mean)} of CPU time over the last {thresholds.window_s:.0f} s while GPU utilization is {gpus}"
    action = (
        "copy the dataset to local NVMe or RAM (/dev/shm) before training; pack small files into large "
        "shards (WebDataset, TFRecord, LMDB) for big sequential reads; raise prefetch_factor; "
        "check network-filesystem throughput"
    )
    title = "Data loading waits on storage (high iowait, GPUs under-used)"
    return [RULE.finding(Severity.WARN, ScopeKind.HOST.of(), title, evidence, action, tuple(index for index, _ in starved))]


RULE = Rule("storage_bound", "reads from storage hold back the GPUs (iowait)", _evaluate,
            needs=("utilization_gpu_percent",))
"""High iowait with under-used GPUs."""
