"""The advice engine: runs every rule on each snapshot and applies hysteresis, most severe advice first."""

from __future__ import annotations

from gputop.advice.config import Thresholds
from gputop.advice.context import Context, Finding
from gputop.advice.hysteresis import Hysteresis
from gputop.advice.rules import HEALTHY, RULES
from gputop.collect.history import History
from gputop.collect.model import Advice, Snapshot

SEVERITY_RANK = {"critical": 0, "warn": 1, "info": 2}
"""Sort rank of severities, most severe first."""


class AdviceEngine:
    """Callable ``engine(snapshot, history) -> tuple[Advice, ...]``, the sampler's advisor.

    Pure apart from hysteresis state: no I/O, and time comes only from ``snapshot.timestamp``,
    so replayed and simulated data behave like live data. ``history`` must already hold
    ``snapshot`` as its newest sample (the sampler appends before advising).
    """

    def __init__(self, thresholds: Thresholds | None = None) -> None:
        self.thresholds = thresholds if thresholds is not None else Thresholds()
        """Thresholds in force."""
        self._hysteresis = Hysteresis()

    def __call__(self, snapshot: Snapshot, history: History) -> tuple[Advice, ...]:
        """Advice for ``snapshot``: critical, then warn, then info; within a severity by scope."""
        ctx = Context(snapshot, history, self.thresholds, self._hysteresis.held_for)
        holding: dict[str, tuple[Finding, float]] = {}
        for rule in RULES:
            hold = rule.hold(self.thresholds)
            for finding in rule.evaluate(ctx):
                holding[finding.advice.id] = (finding, hold)
        shown = self._hysteresis.update(snapshot.timestamp, holding, self.thresholds.clear_s)
        concerned: set[int] = set()
        for finding in shown:
            if not finding.advice.id.startswith(HEALTHY + ":"):
                concerned.update(finding.devices)
        advice = [
            f.advice for f in shown if not (f.advice.id.startswith(HEALTHY + ":") and f.devices & concerned)
        ]
        advice.sort(key=_order)
        return tuple(advice)


def _order(advice: Advice) -> tuple[int, int, int, str, str]:
    """Sort key: severity, then host before GPUs before processes (numerically), then id."""
    scope = advice.scope
    for rank, prefix in enumerate(("host", "gpu", "pid")):
        if scope.startswith(prefix):
            number = scope[len(prefix) :]
            if not number:
                return (SEVERITY_RANK.get(advice.severity, 3), rank, -1, scope, advice.id)
            if number.isdigit():
                return (SEVERITY_RANK.get(advice.severity, 3), rank, int(number), scope, advice.id)
    return (SEVERITY_RANK.get(advice.severity, 3), 3, 0, scope, advice.id)
