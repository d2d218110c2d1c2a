"""``gpusight --cluster URL --json``: a :class:`ClusterFrame` as JSON with stable keys (docs/cluster.md lists them).

Keys are the dataclass fields' names; an unknown value is ``null``. Two fields change shape:
``node_advice`` is a list of advice objects each with a ``host`` key, and each history's ``series`` is a list
of ``{"host", "gpu", "values"}`` objects.
"""

from __future__ import annotations

import dataclasses
import json
from enum import Enum
from typing import Any

from gpusight.cluster.frame import ClusterFrame, ClusterHistory
from gpusight.snapshot.model import Advice

CLUSTER_SCHEMA = "gpusight-cluster/1"
"""The ``schema`` key of the document; the number grows when a key changes meaning or goes away."""


def _plain(item: Any) -> Any:
    """A dataclass (or tuple of them) as JSON-ready dicts and lists; enums become their string values."""
    if dataclasses.is_dataclass(item) and not isinstance(item, type):
        return {f.name: _plain(getattr(item, f.name)) for f in dataclasses.fields(item)}
    if isinstance(item, (tuple, list)):
        return [_plain(value) for value in item]
    if isinstance(item, str):
        return str(item)
    if isinstance(item, Enum):
        return item.name.lower()  # a health finding's level: "drain", "warn", "notice", "ok"
    return item


def _history(history: ClusterHistory) -> dict[str, Any]:
    return {
        "metric": history.metric, "start": history.start, "step": history.step,
        "series": [{"host": host, "gpu": gpu, "values": list(values)}
                   for (host, gpu), values in sorted(history.series.items())],
    }


def _advice(advice: Advice, host: str | None = None) -> dict[str, Any]:
    document: dict[str, Any] = {} if host is None else {"host": host}
    document.update(_plain(advice))
    return document


def frame_to_dict(frame: ClusterFrame) -> dict[str, Any]:
    """The frame as a JSON-ready dict, ``schema`` first."""
    document: dict[str, Any] = {"schema": CLUSTER_SCHEMA}
    for f in dataclasses.fields(frame):
        value = getattr(frame, f.name)
        if f.name == "history":
            document[f.name] = [_history(history) for history in value]
        elif f.name == "node_advice":
            document[f.name] = [_advice(advice, host) for host, advice in value]
        else:
            document[f.name] = _plain(value)
    return document


def frame_to_json(frame: ClusterFrame, indent: int | None = 2) -> str:
    """The frame as JSON text."""
    return json.dumps(frame_to_dict(frame), indent=indent, allow_nan=False)
