"""Communication-bound: every rank of a DDP job equally "busy", few SMs active, and heavy NVLink or PCIe traffic on every GPU.

NCCL kernels that move gradients count as busy in NVML utilization but keep few SMs active, so a
job that spends its steps in all-reduce reads high and equal utilization on every rank with low
GPM SM activity, while every GPU sends and receives alike (input copies only arrive). Where
``gpusight.torch`` measures the input wait, a rank waiting for data more than the 5 % the PyTorch
profiler's TensorBoard plugin flags is not purely communication-bound, so the rule stays silent.

Where ``gpusight.torch`` profiled a step of any rank (``step_comm_percent``), that measured share of
exposed communication replaces the guess: the job is communication-bound when it reaches
``comm_share_percent`` and outweighs the data wait, whatever the link counters say, and the advice
bounds what removing it gains.
"""

from __future__ import annotations

from gpusight.advice.context import Context, Finding
from gpusight.advice.jobs import Job
from gpusight.advice.rules.base import Rule, pct, pct_range
from gpusight.advice.speed import breakdown_text, gain_text, shares
from gpusight.snapshot.model import ScopeKind, Severity
from gpusight.units import fmt_rate

ACTION = (
    "cut communication per step: accumulate gradients over micro-batches under model.no_sync() so fewer "
    "all-reduces run, raise the per-GPU batch, tune DDP(bucket_cap_mb=...) so buckets overlap with backward; "
    "compress gradients with model.register_comm_hook(None, bf16_compress_hook) "
    "(torch.distributed.algorithms.ddp_comm_hooks.default_hooks); check the topology with nvidia-smi topo -m "
    "(pairs linked over PCIe or SYS instead of NVLink) and NCCL_DEBUG=INFO; confirm in the PyTorch profiler's "
    "TensorBoard plugin (distributed view: communication vs computation overlap)"
)
"""What a communication-bound job should change, measured or guessed."""


def _evaluate(ctx: Context) -> list[Finding]:
    thresholds = ctx.thresholds
    findings = []
    for job in ctx.jobs():
        if not all(ctx.trains(rank.process) for rank in job.ranks):
            continue
        if any(rank.process.step_comm_percent is not None for rank in job.ranks):
            measured = _measured(ctx, job)
            if measured is not None:
                findings.append(measured)
            continue
        if not job.one_rank_per_gpu():
            continue
        utils = [ctx.util(index) for index in job.devices]
        sm = [ctx.device_stat(index, "sm_active_percent") for index in job.devices]
        known_utils = [value for value in utils if value is not None]
        known_sm = [stat.mean for stat in sm if stat is not None]
        if len(known_utils) < len(utils) or len(known_sm) < len(sm):
            continue
        if min(known_utils) < thresholds.launch_util_percent or max(known_utils) - min(known_utils) > thresholds.comm_spread_percent:
            continue
        if max(known_sm) >= thresholds.launch_sm_active_percent:
            continue
        traffic = _traffic(ctx, job)
        if traffic is None:
            continue
        waits = [rank.process.input_wait_percent for rank in job.ranks if rank.process.input_wait_percent is not None]
        if waits and max(waits) >= thresholds.comm_input_wait_percent:
            continue
        evidence = (
            f"{len(job.ranks)} ranks at {pct_range(known_utils)} util but SMs active {pct_range(known_sm)} (GPM); "
            f"{traffic} per GPU over the last {thresholds.window_s:.0f} s ({job.describe()})"
        )
        if waits:
            evidence += f"; measured input wait at most {pct(max(waits))} (gpusight.torch)"
        title = f"Job {job.sample.id} spends its steps communicating (all ranks equal, few SMs busy)"
        findings.append(RULE.finding(Severity.WARN, ScopeKind.JOB.of(job.sample.id), title, evidence, ACTION, job.devices))
    return findings


def _measured(ctx: Context, job: Job) -> Finding | None:
    """The finding from the profiled breakdown: exposed communication at ``comm_share_percent`` or more of each
    step and more than the data wait; None otherwise (the measurement then rules the guess out too)."""
    speed = ctx.job_speed(job)
    parts = shares(speed)
    comm = parts.get("communication")
    if comm is None or comm < ctx.thresholds.comm_share_percent or comm < parts.get("data wait", 0.0):
        return None
    source = next(rank.process.breakdown_source for rank in job.ranks if rank.process.step_comm_percent is not None)
    profiled = sum(1 for rank in job.ranks if rank.process.step_comm_percent is not None)
    evidence = (
        f"exposed communication takes {pct(comm)} of each step (measured on {profiled} of {len(job.ranks)} ranks): "
        f"{gain_text(comm)}; {breakdown_text(speed, source)} ({job.describe()})"
    )
    title = f"Job {job.sample.id} spends {pct(comm)} of each step communicating (measured)"
    return RULE.finding(Severity.WARN, ScopeKind.JOB.of(job.sample.id), title, evidence, ACTION, job.devices)



def _traffic(ctx: Context, job: Job) -> str | None:
    """``"NVLink 60-65 GB/s sent and 60-66 GB/s received"`` when every GPU of the job moves that much each way
    over NVLink (``comm_nvlink_bytes_per_s``) or, failing that, PCIe (``comm_pcie_bytes_per_s``); else None."""
    thresholds = ctx.thresholds
    for link, floor in (("nvlink", thresholds.comm_nvlink_bytes_per_s), ("pcie", thresholds.comm_pcie_bytes_per_s)):
        sent = [ctx.device_stat(index, f"{link}_tx_bytes_per_s") for index in job.devices]
        received = [ctx.device_stat(index, f"{link}_rx_bytes_per_s") for index in job.devices]
        tx = [stat.mean for stat in sent if stat is not None]
        rx = [stat.mean for stat in received if stat is not None]
        if len(tx) == len(rx) == len(job.devices) and min(tx + rx) >= floor:
            name = "NVLink" if link == "nvlink" else "PCIe"
            return f"{name} {_rates(tx)} sent and {_rates(rx)} received"
    return None


def _rates(values: list[float]) -> str:
    """A range of byte rates, e.g. ``"60GB/s-65GB/s"``, or one rate when they print alike."""
    low, high = fmt_rate(min(values)), fmt_rate(max(values))
    return low if low == high else f"{low}-{high}"


RULE = Rule("comm_bound", "a DDP job spends its time communicating (all-reduce)", _evaluate)
"""A DDP job with equal, high utilization, low SM activity and heavy link traffic on every GPU."""
