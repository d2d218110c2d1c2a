"""Heavy host-to-device PCIe traffic while the GPU waits: copies are on the critical path."""

from __future__ import annotations

from gpusight.advice.context import Context, Finding
from gpusight.advice.rules.base import Rule, pct
from gpusight.advice.speed import gain_text
from gpusight.snapshot.model import ScopeKind, Severity
from gpusight.units import fmt_rate


def _evaluate(ctx: Context) -> list[Finding]:
    thresholds = ctx.thresholds
    findings = []
    for index in sorted(ctx.devices):
        util = ctx.util(index)
        feeds = ctx.feeds_on(index)
        if util is None or util >= thresholds.low_util_percent or not feeds or any(feed.starved for feed in feeds):
            continue
        received = ctx.device_stat(index, "pcie_rx_bytes_per_s")
        if received is None or received.mean < thresholds.pcie_h2d_bytes_per_s:
            continue
        evidence = (
            f"GPU {index} receives {fmt_rate(received.mean)} from the host over PCIe while its util is {pct(util)} "
            f"(means over the last {thresholds.window_s:.0f} s)"
        )
        copies = [feed.trainer.step_copy_percent for feed in feeds if feed.trainer.step_copy_percent is not None]
        if copies:
            evidence += (
                f"; copies not overlapped take {pct(max(copies))} of each step (torch.profiler): "
                f"{gain_text(max(copies), 'them')}"
            )
        pinned = all(feed.trainer.loader_pin_memory for feed in feeds)
        pin = "with pinned batches (pin_memory=True is set), use" if pinned else "DataLoader(pin_memory=True) and"
        action = (
            f"overlap copies with compute: {pin} tensor.to('cuda', non_blocking=True); "
            "prefetch the next batch on a side CUDA stream; send compact data (uint8 images) and convert on the "
            "GPU; keep a dataset that fits in GPU memory there across epochs"
        )
        title = f"GPU {index} waits on host-to-device copies over PCIe"
        findings.append(RULE.finding(Severity.WARN, ScopeKind.GPU.of(index), title, evidence, action, (index,)))
    return findings


RULE = Rule("pcie_h2d", "heavy host-to-GPU copies while the GPU is under-used", _evaluate,
            needs=("utilization_gpu_percent", "pcie_rx_bytes_per_s"))
"""Heavy PCIe RX with low utilization."""
