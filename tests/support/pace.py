"""Time away from the steps (evaluation, checkpoints) as long as the steps before it, for the framework jobs."""

from __future__ import annotations

import time


class Pace:
    """Each :meth:`away` sleeps as long as it has been since the previous one ended (at least ``least`` seconds), so
    the job spends about half its time away from its steps however fast the machine runs them."""

    def __init__(self, least: float = 0.05) -> None:
        self.least = least
        self.since = time.monotonic()

    def away(self) -> None:
        """Sleep for the time spent since the previous call returned."""
        time.sleep(max(self.least, time.monotonic() - self.since))
        self.since = time.monotonic()
