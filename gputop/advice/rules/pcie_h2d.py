"""Heavy host-to-device PCIe traffic while the GPU waits: copies are on the critical path."""

from __future__ import annotations

from gputop.advice.context import Context, Finding
from gputop.advice.rules.base import Rule, pct
from gputop.advice.rules.feeds import feeds_on
from gputop.units import fmt_rate


def _evaluate(ctx: Context) -> list[Finding]:
    t = ctx.t
    out = []
    for index in sorted(ctx.devices):
        util = ctx.util(index)
        if util is None or util >= t.low_util_percent or any(f.starved for f in feeds_on(ctx, index)):
            continue
        rx = ctx.device_stat(index, "pcie_rx_bytes_per_s")
        if rx is None or rx.mean < t.pcie_h2d_bytes_per_s:
            continue
        evidence = (
            f"GPU {index} receives {fmt_rate(rx.mean)} from the host over PCIe while its util is {pct(util)} "
            f"(means over the last {t.window_s:.0f} s)"
        )
        action = (
            "overlap copies with compute: DataLoader(pin_memory=True) and tensor.to('cuda', non_blocking=True); "
            "prefetch the next batch on a side CUDA stream; send compact data (uint8 images) and convert on the "
            "GPU; keep a dataset that fits in GPU memory there across epochs"
        )
        title = f"GPU {index} waits on host-to-device copies over PCIe"
        out.append(RULE.finding("warn", f"gpu{index}", title, evidence, action, (index,)))
    return out


RULE = Rule("pcie_h2d", _evaluate)
"""Heavy PCIe RX with low utilization."""
