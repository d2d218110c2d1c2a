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
