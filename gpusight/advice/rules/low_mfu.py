"""Low MFU (or HFU): a training job that waits on little yet reaches a small share of its GPUs' peak FLOP/s.

The share comes from the ranks' own figures (``gpusight.torch``: FLOPs per step times steps per second, over
the peak of the GPU for the math mode in use), summed over the job (:func:`~gpusight.facts.speed.job_speed`),
and is named by how the FLOPs were known: counted as they ran (recomputation included) is HFU, given or
estimated is MFU. With its data wait and exposed communication minor (``minor_share_percent``), the time goes
to the compute itself, so the actions are compute actions, those with evidence first.
"""

from __future__ import annotations

from gpusight.advice.context import Context, Finding
from gpusight.advice.jobs import Job
from gpusight.advice.rules.base import Rule, gib, listing, pct
from gpusight.advice.rules.throttling import ACTIONS, SEVERE
from gpusight.advice.speed import shares, utilization_floor
from gpusight.facts.peak_flops import peak_for
from gpusight.facts.speed import JobSpeed
from gpusight.snapshot.model import MathMode, ScopeKind, Severity
from gpusight.textsafe import safe_text

NAME_LENGTH = 40
"""Longest GPU name quoted in advice."""
COMPILE = "torch.compile(model) to fuse element-wise ops and cut launch gaps (mode='reduce-overhead' adds CUDA graphs)"
"""The torch.compile action."""
FUSED = "a fused optimizer: torch.optim.AdamW(..., fused=True) (or foreach=True) runs one kernel per step, not one per tensor"
"""The fused-optimizer action (no reading tells it; it comes last)."""


def _evaluate(ctx: Context) -> list[Finding]:
    findings = []
    for job in ctx.jobs():
        if not all(ctx.trains(rank.process) for rank in job.ranks):
            continue
        speed = ctx.job_speed(job)
        utilization = speed.flops_utilization_percent
        if utilization is None or speed.achieved_tflops is None or speed.peak_tflops is None:
            continue
        floor, kind = utilization_floor(ctx.thresholds, speed.tokens_per_second is not None)
        if utilization >= floor:
            continue
        waits = _waits(ctx, job, speed)
        if waits is None:
            continue
        name, figure = speed.utilization_name, _figure(utilization, floor)
        evidence = (
            f"{name} {figure} ({speed.achieved_tflops:.1f} of {speed.peak_tflops:.1f} TFLOP/s peak, "
            f"gpusight.torch), below the {pct(floor)} expected of {kind}; {_throughput(speed)}{waits} ({job.describe()})"
        )
        actions = _actions(ctx, job, speed)
        title = f"Job {job.sample.id} reaches {figure} {name}: its compute is slow, not its input"
        findings.append(RULE.finding(Severity.WARN, ScopeKind.JOB.of(job.sample.id), title, evidence, "; ".join(actions), job.devices))
    return findings


def _figure(utilization: float, floor: float) -> str:
    """``"4 %"``, or ``"29.7 %"`` where whole percents would read as the floor itself."""
    return f"{utilization:.1f} %" if round(utilization) >= floor else pct(utilization)


def _waits(ctx: Context, job: Job, speed: JobSpeed) -> str | None:
    """The measured data wait and communication in words, or None when either is not minor."""
    minor = ctx.thresholds.minor_share_percent
    parts = shares(speed)
    data = parts.get("data wait")
    if data is None:
        known = [rank.process.input_wait_percent for rank in job.ranks if rank.process.input_wait_percent is not None]
        data = max(known) if known else None
    comm = parts.get("communication")
    if (data is not None and data >= minor) or (comm is not None and comm >= minor):
        return None
    said = []
    if data is not None:
        said.append(f"data wait {pct(data)}")
    if comm is not None:
        said.append(f"exposed communication {pct(comm)}")
    return f"; {' and '.join(said)} of each step" if said else ""


def _throughput(speed: JobSpeed) -> str:
    """``"2400 tokens/s, 12.5 steps/s"`` from what the job reports."""
    parts = []
    if speed.tokens_per_second is not None:
        parts.append(f"{speed.tokens_per_second:.0f} tokens/s")
    elif speed.samples_per_second is not None:
        parts.append(f"{speed.samples_per_second:.0f} samples/s")
    if speed.steps_per_second is not None:
        parts.append(f"{speed.steps_per_second:.2g} steps/s")
    return ", ".join(parts) if parts else "throughput unknown"


def _actions(ctx: Context, job: Job, speed: JobSpeed) -> list[str]:
    """The compute actions, those the readings point at first: cooling for thermally throttled GPUs, bf16 for FP32/TF32 math, torch.compile for idle
    gaps or idle SMs, a bigger batch where memory allows, SDPA for a token model; then the rest."""
    ranked: list[str] = []
    throttled = [
        f"GPU {index} ({listing(reasons)})"
        for index in job.devices
        if (reasons := [reason for reason in ACTIONS if reason in SEVERE and reason in ctx.devices[index].throttle_reasons])
    ]
    if throttled:
        ranked.append(
            f"fix the clocks first: {listing(throttled)} throttled, so every kernel runs slower than the peak assumes "
            "(the throttling advice says what to check)"
        )
    precision = _precision(ctx, job)
    if precision:
        ranked.append(precision)
    idle = shares(speed).get("idle")
    sm = [stat.mean for stat in (ctx.device_stat(index, "sm_active_percent") for index in job.devices) if stat]
    gaps = []
    if idle is not None and idle >= ctx.thresholds.minor_share_percent:
        gaps.append(f"the step is idle {pct(idle)} of its time")
    if sm and max(sm) < ctx.thresholds.launch_sm_active_percent:
        gaps.append(f"SMs active at most {pct(max(sm))} (GPM)")
    if gaps:
        ranked.append(f"{COMPILE}: {' and '.join(gaps)}")
    batch = _batch(ctx, job)
    if batch:
        ranked.append(batch)
    if speed.tokens_per_second is not None:
        ranked.append(
            "attention through torch.nn.functional.scaled_dot_product_attention (FlashAttention kernels) instead of "
            f"explicit softmax(QK^T)V: the job counts tokens ({speed.tokens_per_second:.0f}/s), so it is a sequence model"
        )
    if not gaps:
        ranked.append(COMPILE)
    ranked.append(FUSED)
    return ranked


def _precision(ctx: Context, job: Job) -> str | None:
    """bf16 autocast for ranks whose matmuls run in FP32 or TF32, with the peaks that bound the gain."""
    for rank in job.ranks:
        mode = rank.process.math_mode
        if mode not in (MathMode.FP32, MathMode.TF32):
            continue
        device_name = ctx.devices[rank.device].name
        bf16 = peak_for(device_name, MathMode.BF16).tflops
        text = f"train in bf16: torch.autocast('cuda', dtype=torch.bfloat16); the matmuls run in {mode.value}"
        if bf16 is not None and rank.process.peak_tflops:
            name = safe_text(device_name, NAME_LENGTH)
            text += f", whose peak on {name} is {rank.process.peak_tflops:.0f} TFLOP/s against {bf16:.0f} in bf16"
        return text
    return None


def _batch(ctx: Context, job: Job) -> str | None:
    """A larger batch, when every rank's peak CUDA memory is below ``headroom_memory_percent`` of its GPU's."""
    worst: tuple[float, int, int] | None = None
    for rank in job.ranks:
        peak = rank.process.cuda_peak_bytes or rank.process.cuda_reserved_bytes
        total = ctx.devices[rank.device].memory_total_bytes
        if peak is None or not total:
            return None
        share = 100.0 * peak / total
        if worst is None or share > worst[0]:
            worst = (share, peak, total)
    if worst is None or worst[0] >= ctx.thresholds.headroom_memory_percent:
        return None
    share, peak, total = worst
    return (
        f"a larger batch: peak CUDA memory {gib(peak)} of {gib(total)} ({pct(share)}) leaves room, and bigger "
        "matmuls run closer to the peak (scale the learning rate with it)"
    )


RULE = Rule("low_mfu", "a job reaches a small share of its GPUs' peak FLOP/s (MFU/HFU)", _evaluate)
"""MFU/HFU below the healthy floor for the kind of model, with minor data wait and communication."""
