"""Tests that show local times (the header clock, history axes) run in UTC, so their screens match on any machine.

Import :func:`utc` into a test module to run every test of that module in UTC: it is an autouse fixture.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Set ``TZ=UTC`` for the test (``time.tzset`` makes local time follow it), and the machine's zone back after."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()
