"""Input-pipeline bound: the GPU is under-used while its trainer waits for batches (measured, or CPU-saturated workers).

On a GPU in MIG mode the advice is scoped to the instance the trainer runs on (``mig0.3``), judged by the
instance's own SM activity (GPM) or, where that is N/A, by a wait measured in the loop only."""

from __future__ import annotations

from dataclasses import dataclass

from gpusight.advice.context import Context, Finding
from gpusight.advice.feeds import Feed, oversubscribed_wait, workers_wait_text
from gpusight.advice.loader import SHARE_DATASET, free_cores_first, has_room_for_workers, loader_settings, plan_workers
from gpusight.advice.rules.base import Rule, pct, pct_range, workers_phrase
from gpusight.advice.rules.mig_idle import mig_name
from gpusight.advice.speed import gain_text
from gpusight.snapshot.model import ScopeKind, Severity


def _evaluate(ctx: Context) -> list[Finding]:
    thresholds = ctx.thresholds
    findings = []
    for index in sorted(ctx.devices):
        if ctx.devices[index].mig_mode:
            findings += _on_instances(ctx, index)
            continue
        util = ctx.util(index)
        if util is None or util >= thresholds.low_util_percent:
            continue
        starved = (feed for feed in ctx.feeds_on(index) if feed.starved and not has_room_for_workers(ctx, feed))
        feed = next(starved, None)
        if feed is not None:
            where = Where(f"GPU {index}", ScopeKind.GPU.of(index), f"GPU {index} util {pct(util)} over the last "
                          f"{thresholds.window_s:.0f} s")
            findings.append(_finding(ctx, index, where, feed))
    return findings


@dataclass(frozen=True, slots=True)
class Where:
    """What a starved trainer runs on: a whole GPU or a MIG instance."""

    name: str
    """``"GPU 0"`` or ``"MIG 0.3 (3g.40gb)"``."""
    scope: str
    """The advice scope: ``"gpu0"`` or ``"mig0.3"``."""
    activity: str
    """How busy it is, e.g. ``"GPU 0 util 23 % over the last 30 s"``."""


def _on_instances(ctx: Context, index: int) -> list[Finding]:
    """Starved trainers on the MIG instances of GPU ``index``, one finding per instance. An instance whose SMs
    are busy (GPM) is not input-bound; where its activity is N/A only a wait measured in the loop counts."""
    thresholds = ctx.thresholds
    findings = []
    done: set[int] = set()
    for feed in ctx.feeds_on(index):
        instance = feed.trainer.gpu_instance_id
        if instance is None or instance in done or not feed.starved or has_room_for_workers(ctx, feed):
            continue
        mig = ctx.mig.get((index, instance))
        if mig is None:
            continue
        active = mig.sm_active_percent
        if active is not None and active >= thresholds.low_util_percent:
            continue
        if active is None and feed.measured_wait is None:
            continue
        name = mig_name(mig)
        activity = f"{name} SMs active {pct(active)} (GPM)" if active is not None else f"{name} activity N/A"
        done.add(instance)
        findings.append(_finding(ctx, index, Where(name, ScopeKind.of_mig(index, instance), activity), feed))
    return findings


def _finding(ctx: Context, index: int, where: Where, feed: Feed) -> Finding:
    """The advice for a starved trainer on GPU ``index`` (or one of its MIG instances, ``where``); its title and
    action depend on whether loading is CPU-bound."""
    thresholds = ctx.thresholds
    pid = feed.trainer.pid
    if feed.worker_cpu:
        workers = (
            f"its {workers_phrase(len(feed.worker_cpu))} run at {pct_range(list(feed.worker_cpu))} CPU"
            + workers_wait_text(feed, thresholds)
        )
    else:
        workers = f"num_workers={feed.worker_count if feed.worker_count is not None else 'unknown'}"
    if feed.measured_wait is not None:
        evidence = (
            f"{where.name}'s trainer (PID {pid}) waits {pct(feed.measured_wait)} of each step for data "
            f"(measured by gpusight.torch): {gain_text(feed.measured_wait)}; {where.activity}; {workers}"
        )
    else:
        evidence = f"{where.activity} while {workers} (trainer PID {pid})"
    if ctx.cores:
        evidence += f" on {ctx.cores} cores"
    settings = ", ".join(loader_settings(feed.trainer))
    if not feed.cpu_bound:
        title = f"{where.name} waits for its input pipeline (workers not CPU-bound: reads, locks or prefetch)"
        action = (
            "the workers are not short of CPU, so more of them will not help by itself: check storage reads "
            "(iowait, network-filesystem throughput) and look for a lock or one shared file handle in "
            "Dataset.__getitem__"
        )
        return RULE.finding(Severity.WARN, where.scope, title, evidence, _with(action, settings), (index,))
    plan = plan_workers(ctx, feed)
    if plan.memory_note:
        evidence += "; " + plan.memory_note
    idle = ctx.idle_cores()
    wait = oversubscribed_wait(feed, thresholds)
    if plan.memory_limited:
        more = SHARE_DATASET
    elif wait is not None:
        more = free_cores_first(wait)
    elif idle is not None and idle >= 1.0 and ctx.cores:
        capped = ", capped by host memory" if plan.capped else ""
        more = (
            f"raise DataLoader num_workers from {plan.current} toward {plan.target} "
            f"({ctx.cores} cores, {ctx.cores - idle:.0f} busy{capped})"
        )
    else:
        more = "no idle cores for more workers, so make each sample cheaper"
    action = _with(more, settings) + (
        "; move augmentation to the GPU (DALI, torchvision.transforms.v2 on CUDA tensors) or precompute it offline; "
        "store data pre-decoded"
    )
    title = f"{where.name} waits for its input pipeline (CPU-bound data loading)"
    return RULE.finding(Severity.WARN, where.scope, title, evidence, action, (index,))


def _with(action: str, settings: str) -> str:
    """``action`` followed by the loader settings still worth setting, if any."""
    return f"{action}; DataLoader({settings})" if settings else action


RULE = Rule("input_bound", "the GPU waits on its input pipeline", _evaluate,
            needs=(("utilization_gpu_percent", "sm_active_percent", "mig_mode"),))
"""GPU under-used while its trainer waits for input."""
