"""The advice engine: runs every rule on each snapshot and applies hysteresis, most severe advice first."""

from __future__ import annotations

from gpusight.advice.config import Thresholds
from gpusight.advice.context import Context, Finding
from gpusight.advice.hysteresis import MIN_TRUE_FRACTION, Hysteresis
from gpusight.advice.rules import HEALTHY, RULES
from gpusight.advice.rules.healthy import is_all_clear
from gpusight.advice.signals import Signal, speaks_to_all
from gpusight.advice.verdict import consistent
from gpusight.sampling.history import History
from gpusight.snapshot.model import Advice, ScopeKind, Severity, Snapshot

SEVERITY_RANK: dict[Severity, int] = {severity: rank for rank, severity in enumerate(Severity)}
"""Sort rank of severities, most severe first."""

SCOPE_RANK: dict[ScopeKind, int] = {kind: rank for rank, kind in enumerate(ScopeKind)}
"""Sort rank of scope kinds within a severity: host, then jobs, then GPUs, then processes."""


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
        self._window_start: float | None = None

    def judge_window(self) -> None:
        """Judge the window sampled as a whole at its end instead of holding each condition as a live screen does
        (see :class:`~gpusight.advice.hysteresis.Hysteresis`): for one-shot runs, before their first poll.

        A rule that reads a window of history judges the run by its last evaluation. An instant rule (one that reads
        the newest snapshot only, such as an idle GPU holding memory) must have held over ``MIN_TRUE_FRACTION`` of
        the window sampled so far, or its own hold if that is shorter: a GPU idle on the last poll alone is a blip,
        not the run's verdict."""
        self._hysteresis = Hysteresis(whole_window=True)
        self._window_start = None

    def __call__(self, snapshot: Snapshot, history: History) -> tuple[Advice, ...]:
        """Advice for ``snapshot``: critical, then warn, then info; within a severity by scope. A rule's findings
        about a GPU lacking a signal the rule needs (``Rule.needs``) are dropped.

        One verdict per GPU (:func:`~gpusight.advice.verdict.consistent`) is enforced on the findings
        before hysteresis, so a contradicted finding never builds up its hold, and again on what is
        shown, since advice that stays up through a brief dip could otherwise meet a newer contradiction.
        """
        ctx = Context(snapshot, history, self.thresholds, self._hysteresis.held_for)
        if self._window_start is None or snapshot.timestamp < self._window_start:
            self._window_start = snapshot.timestamp
        sampled = snapshot.timestamp - self._window_start
        found: list[tuple[Finding, float, float]] = []
        lacking: dict[tuple[int, tuple[Signal, ...]], bool] = {}
        for rule in RULES:
            hold = rule.hold(self.thresholds)
            least = min(hold, MIN_TRUE_FRACTION * sampled) if rule.instant else 0.0
            found.extend((finding, hold, least) for finding in rule.evaluate(ctx)
                         if speaks_to_all(ctx, finding, rule.needs, lacking))
        kept = {id(finding) for finding in consistent([finding for finding, _, _ in found])}
        holding = {finding.advice.id: (finding, hold) for finding, hold, _ in found if id(finding) in kept}
        held_at_least = {finding.advice.id: seconds for finding, _, seconds in found if seconds}
        shown = consistent(self._hysteresis.update(snapshot.timestamp, holding, self.thresholds.clear_s,
                                                   held_at_least))
        concerned: set[int] = set()
        for finding in shown:
            if not finding.advice.id.startswith(HEALTHY + ":"):
                concerned.update(finding.devices)
        advice = [
            finding.advice
            for finding in shown
            if not (finding.advice.id.startswith(HEALTHY + ":") and finding.devices & concerned)
        ]
        advice.sort(key=_order)
        return tuple(advice)


def _order(advice: Advice) -> tuple[int, bool, int, int, str, str]:
    """Sort key: severity, the all-clear "healthy" advice after the rest of its severity (so the advice that asks
    for something is in view first), then host before jobs, GPUs and processes (numerically), then id."""
    severity, all_clear = SEVERITY_RANK[advice.severity], is_all_clear(advice)
    parsed = ScopeKind.parse(advice.scope)
    if parsed is None:
        return (severity, all_clear, len(SCOPE_RANK), 0, advice.scope, advice.id)
    kind, number = parsed
    return (severity, all_clear, SCOPE_RANK[kind], -1 if number is None else number, advice.scope, advice.id)
