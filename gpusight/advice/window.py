"""Window judging: a one-shot run's advice judges the whole window it sampled, at its end, without live holds.

Hysteresis (:mod:`gpusight.advice.hysteresis`) keeps a live screen from flickering: advice appears only after its
condition held ``hold`` seconds. A one-shot run (``--once``/``--json``/``--check`` with ``--duration``) shows one
verdict at the end of its window, so nothing can flicker and a hold longer than the window would hide what it
sampled (a 22 s run never shows advice that needs 15 s on top of the three stalls its evidence takes).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpusight.advice.context import Finding
from gpusight.advice.hysteresis import MIN_TRUE_FRACTION


@dataclass(slots=True)
class _Track:
    """Evaluations of one advice id since its condition first held."""

    since: float
    last_true: float
    finding: Finding
    true_count: int = 1
    count: int = 1


class WindowJudge:
    """Per advice id: since when its condition holds, and on what share of the evaluations since then.

    The same interface as :class:`~gpusight.advice.hysteresis.Hysteresis`, judged by the same share rule without
    the hold: a condition stands while it held on at least ``MIN_TRUE_FRACTION`` of the evaluations since it first
    held and has not been false for ``clear`` seconds in a row (one that falls below the share starts over). The rules average over windows that span the data
    (``gpusight.check.fit_thresholds``), so their last evaluation judges the sampled window as a whole; the share
    rule keeps a condition that came and went in the window from standing at its end.
    """

    def __init__(self) -> None:
        self._tracks: dict[str, _Track] = {}
        self._last_time: float | None = None

    def held_for(self, advice_id: str) -> float:
        """Seconds the condition of ``advice_id`` has been holding, as of the last update (0 when not)."""
        track = self._tracks.get(advice_id)
        return 0.0 if track is None or self._last_time is None else self._last_time - track.since

    def update(self, now: float, holding: dict[str, tuple[Finding, float]], clear: float) -> list[Finding]:
        """Record which conditions hold at ``now`` (id -> (finding, hold seconds, not used)); return what stands.

        Time going backwards (a replay seeking back) forgets everything.
        """
        if self._last_time is not None and now < self._last_time:
            self._tracks.clear()
        self._last_time = now
        for advice_id, (finding, _hold) in holding.items():
            track = self._tracks.get(advice_id)
            if track is None:
                self._tracks[advice_id] = _Track(since=now, last_true=now, finding=finding)
            else:
                track.last_true, track.finding = now, finding
                track.true_count += 1
                track.count += 1
        for advice_id in list(self._tracks):
            track = self._tracks[advice_id]
            if advice_id not in holding:
                track.count += 1
                if track.true_count < MIN_TRUE_FRACTION * track.count or now - track.last_true >= clear:
                    del self._tracks[advice_id]  # a condition that fell below half, or is gone, starts over
        return [track.finding for track in self._tracks.values()]
