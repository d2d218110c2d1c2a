"""Snapshots for the compact-format tests: every field of every dataclass set, from the schema, with moving values."""

from __future__ import annotations

import dataclasses
from typing import Any

from gpusight.snapshot.model import Snapshot
from gpusight.snapshot.schema import Array, Choice, Nullable, Record, Scalar, Shape, record_shape

HOSTILE = ["plain", "tab\tnew\nline\x1b[31m", "lone \udc80 surrogate \ud800", "", "é中\u202e\x00", "\\\"quote\""]
"""Strings a process name or command line can hold."""

AWKWARD_FLOATS = [0.1 + 0.2, 1e-300, -0.0, 123456789.123456789, 2.5, 1e300, 50.0, 0.3]
"""Floats that no quantum holds, and some that one does."""


def value_for(shape: Shape, seed: int) -> Any:
    """A non-default value of ``shape`` that changes with ``seed``."""
    if isinstance(shape, Nullable):
        return None if seed % 5 == 4 else value_for(shape.inner, seed)
    if isinstance(shape, Scalar):
        if shape.kind is bool:
            return seed % 2 == 0
        if shape.kind is int:
            if shape.bounds is not None:
                low, high = int(shape.bounds[0]), int(shape.bounds[1])
                return low + seed % (high - low + 1)
            return 1 + (seed * 7919) % 100_003
        if shape.kind is float:
            if shape.bounds is not None:
                return 1_750_000_000.0 + seed * 0.731
            return AWKWARD_FLOATS[seed % len(AWKWARD_FLOATS)] + (seed % 3) * 0.5
        return HOSTILE[seed % len(HOSTILE)] + str(seed % 3)
    if isinstance(shape, Choice):
        members = list(shape.enum)
        return members[(seed + 1) % len(members)]
    if isinstance(shape, Array):
        count = shape.length if shape.length is not None else 1 + seed % 3
        return tuple(value_for(shape.item, seed + i) for i in range(count))
    assert isinstance(shape, Record)
    return record_for(shape.cls, seed)


def record_for(cls: type, seed: int) -> Any:
    """An instance of dataclass ``cls`` with every field set (None for some nullable ones, by seed)."""
    fields = record_shape(cls).fields
    return cls(**{f.name: value_for(f.shape, seed + i) for i, f in enumerate(fields)})


def every_field_snapshots(count: int) -> list[Snapshot]:
    """Snapshots with every field of every dataclass set, values and rows moving from one to the next."""
    snapshots = []
    for n in range(count):
        snapshot = record_for(Snapshot, n)
        snapshot = dataclasses.replace(snapshot, timestamp=1_750_000_000.0 + n * 0.5)
        snapshots.append(snapshot)
    return snapshots
