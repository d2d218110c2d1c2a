"""Periodic stalls: a training GPU busy, then idle for seconds, at a regular period (a square wave of utilization).

The window mean of such a GPU can sit near 50 %, where no other rule fires, yet the job loses the
stalled share of its time. The evidence gives the period, the duty cycle (share stalled) and the
stall length, and compares what the DataLoader workers, the trainer and host iowait did during the
stalls with what they did between them; the action follows that cause.
"""

from __future__ import annotations

from gpusight.advice.context import Context, Finding
from gpusight.advice.feeds import cpu_saturated, cpu_text
from gpusight.advice.loader import SHARE_DATASET, free_cores_first, loader_settings, plan_workers
from gpusight.advice.rules.base import Rule, pct
from gpusight.advice.speed import gain_text
from gpusight.advice.stalls import Stalls, find_stalls, split_mean
from gpusight.snapshot.model import ScopeKind, Severity


def _evaluate(ctx: Context) -> list[Finding]:
    thresholds = ctx.thresholds
    findings = []
    count = ctx.samples_within(thresholds.stall_window_s)
    times = None
    for index in sorted(ctx.devices):
        feeds = ctx.feeds_on(index)
        if not feeds:
            continue
        times = times if times is not None else ctx.history.timestamps(count)
        utils = ctx.history.device(index, "utilization_gpu_percent", count)
        if len(utils) != len(times):
            continue
        stalls = find_stalls(times, utils, thresholds)
        if stalls is None:
            continue
        evidence = (
            f"GPU {index} stalls every {stalls.period_s:.1f} s for {stalls.stall_s:.1f} s ({stalls.count} stalls, "
            f"{pct(stalls.share_percent)} of the last {thresholds.stall_window_s:.0f} s stalled; "
            f"{pct(stalls.busy_util)} util between stalls): {gain_text(stalls.share_percent, 'the stalls')}"
        )
        parts, action = _cause(ctx, index, count, stalls)
        if parts:
            evidence += "; during stalls vs between: " + "; ".join(parts)
        title = f"GPU {index} stalls every {stalls.period_s:.0f} s ({pct(stalls.share_percent)} of the time idle)"
        findings.append(RULE.finding(Severity.WARN, ScopeKind.GPU.of(index), title, evidence, action, (index,)))
    return findings


def _cause(ctx: Context, index: int, count: int, stalls: Stalls) -> tuple[list[str], str]:
    """What the CPU side did during the stalls vs between them, and the action that fits."""
    thresholds = ctx.thresholds
    feeds = ctx.feeds_on(index)
    workers = sum(feed.worker_count or 0 for feed in feeds)
    no_workers = all(feed.worker_count == 0 for feed in feeds)
    loader, loader_between = split_mean(ctx.history.device(index, "dataloader_cpu_percent", count), stalls.stalled)
    trainer, trainer_between = split_mean(ctx.history.device(index, "trainer_cpu_percent", count), stalls.stalled)
    trainer_wait, _ = split_mean(ctx.history.device(index, "trainer_cpu_wait_percent", count), stalls.stalled)
    loader_wait, _ = split_mean(ctx.history.device(index, "dataloader_cpu_wait_percent", count), stalls.stalled)
    iowait, iowait_between = split_mean(ctx.history.host("iowait_percent", count), stalls.stalled)
    parts = []
    if loader is not None and loader_between is not None and workers:
        parts.append(f"DataLoader workers {pct(loader)} vs {pct(loader_between)} CPU in total ({workers} workers)")
    if trainer is not None and trainer_between is not None:
        parts.append(f"trainer {pct(trainer)} vs {pct(trainer_between)} CPU")
    if iowait is not None and iowait_between is not None:
        parts.append(f"host iowait {pct(iowait)} vs {pct(iowait_between)}")
    first_trainer = feeds[0].trainer
    periodic_work = (
        "look for work done every few steps on the main process (evaluation, checkpointing, logging or metrics on "
        "rank 0); make it asynchronous (torch.distributed.checkpoint.async_save, a logging thread) or less frequent"
    )
    if no_workers:
        if trainer is not None and cpu_saturated(trainer, trainer_wait, thresholds):
            if trainer < thresholds.cpu_saturated_percent:
                parts.append(f"during stalls the trainer runs at {cpu_text(trainer, trainer_wait, thresholds)}")
            return parts, (
                "the main process loads each batch itself (num_workers=0) while the GPU waits: "
                f"DataLoader(num_workers>=1, {', '.join(loader_settings(first_trainer, persistent=False))})"
            )
        return parts, periodic_work
    if loader is None or not workers:
        return parts, "compare one stall in torch.profiler (a schedule spanning it) with a busy step; " + periodic_work
    per_worker = loader / workers
    worker_wait = None if loader_wait is None else loader_wait / workers
    if cpu_saturated(per_worker, worker_wait, thresholds):
        plan = plan_workers(ctx, feeds[0])
        if plan.memory_note:
            parts.append(plan.memory_note)
        if per_worker < thresholds.cpu_saturated_percent:
            parts.append(f"during stalls each worker runs at {cpu_text(per_worker, worker_wait, thresholds)}")
        prefetch = ", ".join(loader_settings(first_trainer, pin=False, persistent=False))
        if worker_wait is not None and worker_wait >= thresholds.cpu_wait_percent:
            return parts, free_cores_first(worker_wait) + f"; then a deeper prefetch queue (DataLoader({prefetch}))"
        more = SHARE_DATASET if plan.memory_limited else f"num_workers={plan.target}"
        return parts, (
            "the workers run flat out during the stalls and cannot build batches ahead: more workers and a deeper "
            f"prefetch queue ({more}; DataLoader({prefetch})), or cheaper samples"
        )
    if per_worker < thresholds.worker_asleep_percent:
        if iowait is not None and iowait >= thresholds.iowait_percent and (iowait_between is None or iowait > iowait_between):
            return parts, (
                "the workers block on reads during the stalls (iowait up): copy the dataset to local NVMe or /dev/shm, "
                "pack small files into shards (WebDataset, LMDB), and check network-filesystem throughput"
            )
        if first_trainer.loader_persistent_workers is True:
            return parts, "the workers sleep during the stalls and persistent_workers=True is set: " + periodic_work
        return parts, (
            "the workers sleep during the stalls with no iowait: either they are restarted each epoch "
            "(DataLoader(persistent_workers=True) keeps them) or " + periodic_work
        )
    return parts, "compare one stall in torch.profiler (a schedule spanning it) with a busy step; " + periodic_work


RULE = Rule("periodic_stall", "the GPU stalls at a regular period", _evaluate, needs=("utilization_gpu_percent",))
"""Regular stalls of a training GPU in a longer window."""
