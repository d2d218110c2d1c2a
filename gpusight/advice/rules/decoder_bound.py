"""Decoder-bound input: the video decoders (NVDEC, used by DALI, nvJPEG on some GPUs, torchvision's GPU decode) are at
their limit while the SMs idle and the training loop waits for data.

The input-bound rule would blame the CPU workers; here the data is decoded on the GPU, and the decoders, not the
workers or the SMs, set the pace. Silent where NVML gives no decoder figure, and where nothing measured the loop's
wait (``gpusight.torch``): a busy decoder alone may just be a decoding job doing its work.
"""

from __future__ import annotations

from gpusight.advice.context import Context, Finding
from gpusight.advice.rules.base import Rule, pct
from gpusight.advice.speed import gain_text
from gpusight.snapshot.model import ScopeKind, Severity

ACTION = (
    "the decoders set the pace: spread decoding over more of them (DALI's mixed decoder or nvJPEG with several "
    "hardware decoders, one pipeline per decoder), decode part of the data on CPU workers (DALI's cpu decoder, "
    "DataLoader workers), or decode less: lower the resolution, or store pre-decoded or pre-resized shards"
)
"""What to do when the decoders hold the input pipeline back."""


def _evaluate(ctx: Context) -> list[Finding]:
    thresholds = ctx.thresholds
    findings = []
    for index, device in sorted(ctx.devices.items()):
        decoder = device.decoder_percent
        if decoder is None or device.mig_mode or decoder < thresholds.decoder_busy_percent:
            continue
        idle = _idle_sms(ctx, index)
        if idle is None:
            continue
        waits = [p for p in ctx.gpu_processes.get(index, []) if p.input_wait_percent is not None
                 and p.input_wait_percent >= thresholds.input_wait_percent and ctx.trains(p)]
        if not waits:
            continue
        trainer = max(waits, key=lambda p: (p.input_wait_percent or 0.0, -p.pid))
        wait = trainer.input_wait_percent or 0.0
        evidence = (
            f"GPU {index}'s video decoder {pct(decoder)} busy while {idle}; its trainer (PID {trainer.pid}) waits "
            f"{pct(wait)} of each step for data (measured by gpusight.torch): {gain_text(wait)}"
        )
        title = f"GPU {index} waits for its video decoder (NVDEC at {pct(decoder)})"
        findings.append(RULE.finding(Severity.WARN, ScopeKind.GPU.of(index), title, evidence, ACTION, (index,)))
    return findings


def _idle_sms(ctx: Context, index: int) -> str | None:
    """How idle the SMs of GPU ``index`` are over the window, in words (SM activity where GPM gives it, else
    utilization); None when they are busy or unknown."""
    thresholds = ctx.thresholds
    window = f"over the last {thresholds.window_s:.0f} s"
    sm_active = ctx.device_stat(index, "sm_active_percent")
    if sm_active is not None:
        return f"SMs active {pct(sm_active.mean)} (GPM) {window}" if sm_active.mean < thresholds.sm_busy_percent else None
    util = ctx.util(index)
    if util is None or util >= thresholds.low_util_percent:
        return None
    return f"GPU util {pct(util)} {window}"


RULE = Rule("decoder_bound", "the input pipeline waits on the video decoder", _evaluate,
            needs=("decoder_percent", ("sm_active_percent", "utilization_gpu_percent")))
"""Decoder at its limit, SMs idle and the loop waiting for data."""
