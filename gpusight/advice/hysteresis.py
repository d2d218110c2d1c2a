"""Hysteresis: advice appears only after its condition has held for a while and clears only after it has been gone for a while."""

from __future__ import annotations

from dataclasses import dataclass

from gpusight.advice.context import Finding

MIN_TRUE_FRACTION = 0.5
"""Share of evaluations during the hold period on which the condition must have held."""


@dataclass(slots=True)
class _Track:
    """What is known about one advice id."""

    since: float
    last_true: float
    finding: Finding
    true_count: int = 1
    count: int = 1
    active: bool = False


def _common(track: _Track) -> bool:
    """True when the condition held on at least ``MIN_TRUE_FRACTION`` of the evaluations since it started."""
    return track.true_count >= MIN_TRUE_FRACTION * track.count


class Hysteresis:
    """Per advice id: when its condition started holding, when it last held, and whether it is shown.

    A condition *holds over a period* when, since it started, it was never false for ``clear``
    seconds in a row and was true on at least half of the evaluations (a pending condition that
    falls below half starts over). Advice appears once its
    condition has held for ``hold`` seconds and is true now; it then stays (showing the latest
    evidence) until the condition has been false for ``clear`` seconds in a row. Brief dips
    around a threshold therefore neither delay nor clear it.

    The hold keeps a live screen from flickering. A one-shot run (``--once``/``--json``/``--check`` with
    ``--duration``) shows one verdict, at the end of the window it sampled, so it judges that window as a whole:
    with ``whole_window`` a pending condition shows too, without waiting out a hold that may be longer than the run,
    when it holds over the period since it first held in the window: it was true on at least half of the evaluations
    since then (it never starts over, so a condition that comes and goes keeps its low share) and has not been false
    for ``clear`` seconds in a row. The rules average over windows that span the run's data
    (``gpusight.check.fit_thresholds``), so their last evaluation judges all of it.
    """

    def __init__(self, whole_window: bool = False) -> None:
        self.whole_window = whole_window
        """True: judge a one-shot run's window as a whole (pending conditions show without their hold)."""
        self._tracks: dict[str, _Track] = {}
        self._last_time: float | None = None

    def held_for(self, advice_id: str) -> float:
        """Seconds the condition of ``advice_id`` has been holding, as of the last update (0 when not)."""
        track = self._tracks.get(advice_id)
        return 0.0 if track is None or self._last_time is None else self._last_time - track.since

    def update(self, now: float, holding: dict[str, tuple[Finding, float]], clear: float) -> list[Finding]:
        """Record which conditions hold at ``now`` (id -> (finding, hold seconds)); return what to show.

        Time going backwards (a replay seeking back) forgets everything.
        """
        if self._last_time is not None and now < self._last_time:
            self._tracks.clear()
        self._last_time = now
        for advice_id, (finding, hold) in holding.items():
            track = self._tracks.get(advice_id)
            if track is None:
                track = self._tracks[advice_id] = _Track(since=now, last_true=now, finding=finding)
            else:
                track.last_true = now
                track.finding = finding
                track.true_count += 1
                track.count += 1
            if not track.active and now - track.since >= hold and _common(track):
                track.active = True
        shown = []
        for advice_id in list(self._tracks):
            track = self._tracks[advice_id]
            if advice_id not in holding:
                track.count += 1
                gone = now - track.last_true >= clear
                if self.whole_window and not track.active:
                    if gone:
                        continue  # kept, not shown: its share counts every poll of the window since it first held
                elif gone or (not track.active and not _common(track)):
                    del self._tracks[advice_id]
                    continue
            if track.active or (self.whole_window and _common(track)):
                shown.append(track.finding)
        return shown
