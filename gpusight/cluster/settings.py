"""Defaults of ``gpusight --cluster``, in a module light enough for the command line to import at start-up."""

from __future__ import annotations

DEFAULT_TIMEOUT_SECONDS = 5.0
"""How long one request to Prometheus may take before it counts as too slow."""

DEFAULT_HISTORY_SECONDS = 300.0
"""How far back the charts and the fleet advice's range queries reach."""

DEFAULT_INTERVAL_SECONDS = 2.0
"""Seconds between two polls of the cluster view."""

MAX_POINTS = 120
"""Most points per series a range query returns."""

MAX_NODES = 500
"""Most nodes the cluster view shows: an answer naming more keeps the first by name and says what it cut, so a
fleet far larger than expected (or a misconfigured relabel) costs bounded memory (docs/cluster.md)."""

MAX_TARGETS = 2 * MAX_NODES
"""Most scrape targets (``up`` series) kept, for nodes scraped twice (dcgm-exporter and ``gpusight --serve``)."""

MAX_SERIES_BYTES = 1 << 20
"""Most bytes one series of an answer may take (labels and points); a longer one is malformed."""

MAX_WHOLE_ANSWER_BYTES = 64 << 20
"""Most bytes of an answer not in Prometheus's own JSON shape, which is read whole; a larger one is refused."""
