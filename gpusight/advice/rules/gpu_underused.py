"""GPU under-used although neither the input pipeline nor storage is the bottleneck: the training code itself.

Only a wait measured inside the loop (``gpusight.torch``) rules the input out. From outside, workers
blocked on network reads (object stores, HTTP) use no CPU and cause no iowait, so they look the same
as workers with nothing to do; without the measurement the advice says so and asks for it first.
"""

from __future__ import annotations

from gpusight.advice.context import Context, Finding
from gpusight.advice.feeds import cpu_saturated, cpu_text
from gpusight.advice.rules.base import Rule, pct, pct_range, workers_phrase
from gpusight.advice.speed import gain_text
from gpusight.snapshot.model import ScopeKind, Severity

PROFILE_ACTION = (
    "profile a few steps with torch.profiler (or nsys profile -t cuda,nvtx) and look for host syncs "
    "(.item(), .cpu(), printing tensors), many tiny kernels and CPU work between steps"
)
"""What to do when the training code leaves the GPU waiting."""
MEASURE_FIRST = (
    "first measure the input wait: wrap the loader with gpusight.torch.watch(loader) (the WAIT % column; DataLoader "
    "workers blocked on network reads use no CPU and no iowait); if it is low, "
)
"""What comes first when nothing measured the input wait."""


def _evaluate(ctx: Context) -> list[Finding]:
    thresholds = ctx.thresholds
    iowait = ctx.host_stat("iowait_percent")
    if iowait is not None and iowait.mean >= thresholds.iowait_percent:
        return []
    findings = []
    for index in sorted(ctx.devices):
        util = ctx.util(index)
        if util is None or not thresholds.idle_util_percent < util < thresholds.low_util_percent:
            continue
        feeds = ctx.feeds_on(index)
        if not feeds or any(feed.starved or not feed.known for feed in feeds):
            continue
        feed = feeds[0]
        trainer_cpu, trainer_wait = feed.trainer.cpu_percent or 0.0, feed.trainer.cpu_wait_percent
        parts = [
            f"GPU {index} util {pct(util)} over the last {thresholds.window_s:.0f} s",
            f"trainer PID {feed.trainer.pid} at {cpu_text(trainer_cpu, trainer_wait, thresholds)}",
        ]
        if feed.worker_cpu:
            parts.append(f"its {workers_phrase(len(feed.worker_cpu))} at {pct_range(list(feed.worker_cpu))}")
        if iowait is not None:
            parts.append(f"iowait {pct(iowait.mean)}")
        measured = [feed.measured_wait for feed in feeds if feed.measured_wait is not None]
        idle = [feed.trainer.step_idle_percent for feed in feeds if feed.trainer.step_idle_percent is not None]
        if idle:
            parts.append(
                f"the step is idle {pct(max(idle))} of its time (torch.profiler: no kernel, copy or collective): "
                f"{gain_text(max(idle), 'the gaps')}"
            )
        action = PROFILE_ACTION
        if cpu_saturated(trainer_cpu, trainer_wait, thresholds):
            action += "; the trainer's main thread is CPU-bound: torch.compile or CUDA graphs cut Python and launch overhead"
        if measured:
            parts.append(f"it waits {pct(max(measured))} of each step for data (measured by gpusight.torch)")
            title = f"GPU {index} under-used, and not by the input pipeline: the training code leaves it waiting"
        else:
            action = MEASURE_FIRST + action
            title = (f"GPU {index} under-used, its input pipeline not CPU-bound: the training code, or reads that "
                     "block, leave it waiting")
        findings.append(RULE.finding(Severity.WARN, ScopeKind.GPU.of(index), title, "; ".join(parts), action, (index,)))
    return findings


RULE = Rule("gpu_underused", "GPU under-used by its trainer", _evaluate, needs=("utilization_gpu_percent",))
"""GPU and data pipeline both far from busy with a running trainer."""
