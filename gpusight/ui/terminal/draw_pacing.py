"""When the screen is redrawn: at most about once per refresh period, with the newest frame, whatever the poll rate.

Polls feed the chart grid (each column keeps the highest value of every poll in it) and the advice at the sampling
interval; the screen shows the newest frame once per refresh period, ``max(refresh, interval)``, so at an interval
of 2 s every poll is drawn. Textual-free, so the command line can read :data:`DEFAULT_REFRESH` without loading it.
"""

from __future__ import annotations

DEFAULT_REFRESH = 1.0
"""Seconds between two screen refreshes unless ``--refresh`` says otherwise (never shorter than the interval)."""

STEERED_FRAMES = 2
"""Frames drawn at once after a replay is steered: the poll in flight, then the one that carries the command."""


def refresh_period(refresh: float, interval: float) -> float:
    """Seconds between two redraws: the refresh setting, but never less than the sampling ``interval``."""
    return max(refresh, interval)


class DrawPacer:
    """Decides, for each new frame, whether to draw it now or hold it for a timer.

    When the refresh setting is no shorter than the interval, every frame is drawn at once. Otherwise a frame arriving
    at least a period (less half an interval, so that the poll due at the period's end is the one drawn, not an older
    one held by a timer a hair earlier) after the last draw is drawn at once; an earlier one is held, and the caller
    arms one timer for :meth:`delay` seconds, by when the poll that should have come did not.
    """

    def __init__(self, refresh: float = DEFAULT_REFRESH) -> None:
        self.refresh = refresh
        """The refresh setting in seconds (``--refresh``)."""
        self._last_draw = -float("inf")
        self._steered = 0

    def period(self, interval: float) -> float:
        """The refresh period at sampling ``interval``."""
        return refresh_period(self.refresh, interval)

    def due_now(self, now: float, interval: float) -> bool:
        """True when a frame arriving at ``now`` (monotonic seconds) should be drawn at once."""
        if self._steered:
            self._steered -= 1
            return True
        if self.refresh <= interval:  # every poll is drawn, an extra one (a replay's seek) too
            return True
        return now - self._last_draw >= self.refresh - interval / 2

    def delay(self, now: float, interval: float) -> float:
        """Seconds from ``now`` until a held frame is drawn though no newer poll came (the period plus half an
        interval after the last draw)."""
        return max(0.0, self._last_draw + self.period(interval) + interval / 2 - now)

    def drew(self, now: float) -> None:
        """Note a redraw at ``now``; the next period counts from it."""
        self._last_draw = now

    def steered(self) -> None:
        """A replay was steered (seek, step, pause, speed): draw the next frames at once."""
        self._steered = STEERED_FRAMES
