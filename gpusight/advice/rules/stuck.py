"""A stuck job: every GPU of a training job reads busy while nothing happens on it.

Typically a collective waits for a rank that died or diverged (an exception on one rank, a rank taking
another branch). The waiting ranks spin in one NCCL kernel, which NVML counts as 100 % utilization, but
that kernel keeps about one SM busy, draws near-idle power and moves nothing over PCIe or NVLink, and
the training loop makes no steps. Such a job is neither healthy nor launch-bound; it burns GPU-hours
until NCCL's timeout (if one is set) ends it.
"""

from __future__ import annotations

from gpusight.advice.context import Context, Finding
from gpusight.advice.jobs import Job
from gpusight.advice.rules.base import Rule, listing, pct_range
from gpusight.snapshot.model import ScopeKind, Severity
from gpusight.units import fmt_rate

LINKS = ("pcie_rx_bytes_per_s", "pcie_tx_bytes_per_s", "nvlink_rx_bytes_per_s", "nvlink_tx_bytes_per_s")
"""The traffic counters that must all be quiet (where known)."""
PIDS_SHOWN = 8
"""Most PIDs named in the action."""


def _evaluate(ctx: Context) -> list[Finding]:
    findings = []
    for job in ctx.jobs():
        if not all(ctx.trains(rank.process) for rank in job.ranks):
            continue
        evidence = _evidence(ctx, job)
        if evidence is None:
            continue
        pids = sorted({rank.process.pid for rank in job.ranks})
        shown = " ".join(str(pid) for pid in pids[:PIDS_SHOWN]) + (" ..." if len(pids) > PIDS_SHOWN else "")
        action = (
            "a collective probably waits for a rank that died or diverged: dump every rank's Python stack with "
            f"py-spy dump --pid PID (PIDs {shown}; on other nodes too) and look for the one not in the same call; "
            "make a hang an error: TORCH_NCCL_ASYNC_ERROR_HANDLING=1 and a process-group timeout "
            "(init_process_group(timeout=datetime.timedelta(minutes=10))); rerun with NCCL_DEBUG=INFO to see the "
            "last collective each rank entered"
        )
        title = f"Job {job.sample.id} looks stuck: its GPUs read busy but draw idle power and make no progress"
        findings.append(RULE.finding(Severity.CRITICAL, ScopeKind.JOB.of(job.sample.id), title, evidence, action, job.devices))
    return findings


def _evidence(ctx: Context, job: Job) -> str | None:
    """The evidence that every GPU of ``job`` is busy doing nothing, or None when any reading says otherwise
    (or utilization or power is unknown). A job of one process needs its hook to report no steps: alone, a
    GPU kept at 100 % by tiny kernels on data already in its memory can read the same."""
    thresholds = ctx.thresholds
    utils, powers, shares, sm_active, traffic = [], [], [], [], []
    for index in job.devices:
        util = ctx.util(index)
        power = ctx.device_stat(index, "power_watts")
        limit = ctx.devices[index].power_limit_watts
        if util is None or util < thresholds.stuck_util_percent or power is None or not limit:
            return None
        share = 100.0 * power.mean / limit
        if share > thresholds.stuck_power_percent:
            return None
        sm = ctx.device_stat(index, "sm_active_percent")
        if sm is not None and sm.mean > thresholds.stuck_sm_active_percent:
            return None
        for metric in LINKS:
            moved = ctx.device_stat(index, metric)
            if moved is not None:
                if moved.mean > thresholds.stuck_traffic_bytes_per_s:
                    return None
                traffic.append(moved.mean)
        utils.append(util)
        powers.append(power.mean)
        shares.append(share)
        if sm is not None:
            sm_active.append(sm.mean)
    steps = [rank.process.steps_per_second for rank in job.ranks if rank.process.steps_per_second is not None]
    ranks = len({rank.process.pid for rank in job.ranks})
    if any(rate > 0.0 for rate in steps) or (ranks == 1 and not steps):
        return None
    parts = [
        f"{ranks} {'rank' if ranks == 1 else 'ranks'} at {pct_range(utils)} util",
        f"power {_watts(powers)} ({pct_range(shares)} of the limit, near idle)",
    ]
    if sm_active:
        parts.append(f"SMs active {pct_range(sm_active)} (GPM)")
    if traffic:
        parts.append(f"PCIe/NVLink traffic at most {fmt_rate(max(traffic))} each way")
    if steps:
        parts.append("0 steps/s (gpusight.torch)")
    return f"{listing(parts)} over the last {thresholds.window_s:.0f} s ({job.describe()})"


def _watts(values: list[float]) -> str:
    """A range of power draws, e.g. ``"71-75 W"``, or one when they round alike."""
    low, high = round(min(values)), round(max(values))
    return f"{low} W" if low == high else f"{low}-{high} W"


RULE = Rule("stuck", "the job looks stuck: busy GPUs at idle power, no progress", _evaluate,
            needs=("utilization_gpu_percent", "power_watts", "power_limit_watts"))
"""Every GPU of a training job at ~100 % utilization with idle power, ~1 % SM activity, no traffic and no steps."""
