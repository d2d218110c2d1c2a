"""What the meter runs a step under: the FLOP counter or the profiler, each an :class:`Instrument`."""

from __future__ import annotations

from typing import Any, Protocol


class Instrument(Protocol):
    """Something that watches one step: started when its batch arrives, stopped when the next is asked for."""

    def start(self) -> None:
        """Start watching the step that begins."""
        ...

    def stop(self) -> None:
        """Stop watching and keep the result."""
        ...

    def abandon(self) -> None:
        """Stop watching without keeping anything (the step did not end normally)."""
        ...


def exit_quietly(manager: Any) -> None:
    """Leave the context ``manager`` (entered by hand), ignoring any error: leaving it is all that matters."""
    try:
        manager.__exit__(None, None, None)
    except Exception:  # noqa: BLE001, S110 - an instrument's failure must never reach the training loop
        pass
