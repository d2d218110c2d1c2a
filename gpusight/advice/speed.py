"""What the advice says about speed: the bound on what removing a measured share of each step gains, the MFU a
kind of model should reach, and a job's measured step-time breakdown in words.

Only a measured share bounds a gain. A loop that spends a share ``w`` of each step waiting (for data, for
exposed communication, in stalls) runs at most ``1/(1-w)`` times as many steps per second without the wait,
since the rest of the step is still there; where nothing measured the share, the advice says nothing about gain.
"""

from __future__ import annotations

from gpusight.advice.config import Thresholds
from gpusight.facts.speed import JobSpeed
from gpusight.snapshot.model import BreakdownSource

MAX_SHARE_PERCENT = 99.0
"""Shares above this are bounded as this: "over 100x" is as much as a bound can honestly say."""


def speedup_bound(share_percent: float) -> float:
    """The most a loop speeds up when a share ``share_percent`` (0-100) of each step is removed: ``1/(1-w)``."""
    share = min(max(share_percent, 0.0), MAX_SHARE_PERCENT) / 100.0
    return 1.0 / (1.0 - share)


def factor_text(factor: float) -> str:
    """``"1.6x"``; two decimals below 1.1x (``"1.05x"``) and ``"over 100x"`` at the cap."""
    if factor >= 1.0 / (1.0 - MAX_SHARE_PERCENT / 100.0) - 1e-9:
        return "over 100x"
    return f"{factor:.2f}x" if factor < 1.1 else f"{factor:.1f}x"


def gain_text(share_percent: float, without: str = "it") -> str:
    """``"up to 1.6x steps/s without it"`` for a measured share of 38 % of each step."""
    return f"up to {factor_text(speedup_bound(share_percent))} steps/s without {without}"


def utilization_floor(thresholds: Thresholds, counts_tokens: bool) -> tuple[float, str]:
    """The MFU/HFU a healthy job reaches, and the kind of model it is expected of: a token model (its trainer
    counts tokens) ``healthy_mfu_token_percent``, any other ``healthy_mfu_percent``."""
    if counts_tokens:
        return thresholds.healthy_mfu_token_percent, "a token model"
    return thresholds.healthy_mfu_percent, "a model without tokens"


def shares(speed: JobSpeed) -> dict[str, float]:
    """A job's averaged step-time breakdown by label (``"data wait"``, ``"communication"``, ...); empty when no
    rank profiled a step."""
    return dict(speed.breakdown or ())


def breakdown_text(speed: JobSpeed, source: BreakdownSource | None) -> str:
    """``"step time: data wait 5 %, compute 50 %, ... (torch.profiler, GPU activities, 4 ranks)"``; empty when
    no rank profiled a step."""
    if not speed.breakdown:
        return ""
    parts = ", ".join(f"{label} {percent:.0f} %" for label, percent in speed.breakdown)
    seen = "GPU activities" if source is BreakdownSource.DEVICE else "as the host sees it, no CUDA"
    return f"step time: {parts} (torch.profiler, {seen})"
