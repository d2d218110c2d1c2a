"""Which GPUs a rule may speak about: those that have every signal the rule needs (``Rule.needs``).

A backend that cannot read a signal (amdgpu has no GPM, NVLink or throttle reasons) leaves it None on its GPUs; a
rule needing it then stays silent about them, never guessing from the other signals.
"""

from __future__ import annotations

from gpusight.advice.context import Context, Finding
from gpusight.sampling.history import DEVICE_METRICS
from gpusight.snapshot.model import DeviceSample

Signal = str | tuple[str, ...]
"""A DeviceSample field a rule needs, or a tuple of fields any one of which will do."""


def has_signal(ctx: Context, index: int, device: DeviceSample, field: str) -> bool:
    """Whether GPU ``index`` has ``field``: now (a value, not None nor an empty tuple such as no throttle reasons), or
    (for a metric with history) anywhere in the window, so that one missed read does not silence a rule that judges
    the window."""
    if getattr(device, field) not in (None, ()):
        return True
    return field in DEVICE_METRICS and ctx.device_stat(index, field) is not None


def lacks(ctx: Context, index: int, needs: tuple[Signal, ...]) -> bool:
    """Whether GPU ``index`` of the snapshot lacks a signal of ``needs`` (a GPU not in it lacks nothing known)."""
    device = ctx.devices.get(index)
    if device is None:
        return False
    return not all(any(has_signal(ctx, index, device, field) for field in _choices(need)) for need in needs)


def speaks_to_all(ctx: Context, finding: Finding, needs: tuple[Signal, ...],
                  lacking: dict[tuple[int, tuple[Signal, ...]], bool] | None = None) -> bool:
    """Whether every GPU ``finding`` is about has the signals its rule ``needs``; ``lacking`` remembers, over one
    evaluation, what :func:`lacks` answered for a GPU and needs (several findings and rules ask the same)."""
    if not needs:
        return True
    memo = {} if lacking is None else lacking
    for index in finding.devices:
        key = (index, needs)
        answer = memo.get(key)
        if answer is None:
            answer = memo[key] = lacks(ctx, index, needs)
        if answer:
            return False
    return True


def _choices(need: Signal) -> tuple[str, ...]:
    return (need,) if isinstance(need, str) else need
