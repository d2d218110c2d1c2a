"""The text exposition of one scrape, written by ``prometheus_client`` one family at a time.

Most of a scrape's CPU goes into ``generate_latest`` writing each sample (about 9 us a sample, most of it checking
and escaping label names). Between two scrapes many families do not change at all: every process's identity
(``gpusight_process_info``, the series with the most labels), worker counts, static clocks, lost flags. The library
writes each family here on its own; a family equal to the one of the previous scrape (same samples, labels and
values) is served from the text written then. The bytes are exactly what ``generate_latest`` writes for the
whole registry, which concatenates the families in the same way.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from prometheus_client import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The Prometheus text format, as ``prometheus_client.exposition.CONTENT_TYPE_PLAIN_0_0_4`` names it."""


class _One(Collector):
    """A collector of one family, for ``generate_latest``."""

    def __init__(self, family: Metric) -> None:
        self._family = family

    def collect(self) -> Iterable[Metric]:
        """The family."""
        return [self._family]


class Exposition:
    """Writes ``collector``'s families in the text format, rewriting only those that changed since the last call."""

    def __init__(self, collector: Collector) -> None:
        self._collector = collector
        self._lock = threading.Lock()
        self._last: dict[str, tuple[Metric, bytes]] = {}

    def render(self) -> bytes:
        """The body of one scrape."""
        with self._lock:  # two scrapes at once would only write the same families twice
            parts, written = [], {}
            for family in self._collector.collect():
                previous = self._last.get(family.name)
                text = previous[1] if previous is not None and previous[0] == family else generate_latest(_One(family))
                written[family.name] = (family, text)
                parts.append(text)
            self._last = written
        return b"".join(parts)
