"""The tidy tables of ``gpusight --convert IN OUT.parquet``, derived from the snapshot dataclasses (no pyarrow here).

``OUT.parquet`` is a folder of three Parquet files, one tidy table each (see ``docs/recording.md``):

- ``gpus.parquet``: one row per GPU per snapshot;
- ``processes.parquet``: one row per process per snapshot (GPU processes and their DataLoader workers);
- ``advice.parquet``: one row per advice event (a piece of advice raised, or cleared).

Every row starts with the snapshot's ``timestamp`` (epoch seconds). The other columns of the GPU and process tables
are the scalar fields of :class:`DeviceSample` and :class:`ProcessSample` under their own names, so a field added to
the model becomes a column without a change here; units are in the names (``_bytes``, ``_percent``, ``_watts``,
``_celsius``, ``_mhz``, ``_bytes_per_s``, ``_seconds``). Nested records and lists (a GPU's health, throttle reasons)
stay in the JSON-lines format.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass

from gpusight.snapshot.model import Advice, DeviceSample, ProcessSample, Snapshot
from gpusight.snapshot.schema import Choice, Nullable, Scalar, Shape, record_shape

PARQUET_SUFFIX = ".parquet"
"""An OUT whose name ends so is written as a folder of Parquet tables."""

PARQUET_EXTRA = "pip install 'gpusight[parquet]'"
"""How to get pyarrow, which writing Parquet needs."""

GPUS, PROCESSES, ADVICE = "gpus", "processes", "advice"
"""The tables' names (each written as ``NAME.parquet`` in the folder)."""

TIMESTAMP = "timestamp"
"""The first column of every table: the snapshot's epoch seconds."""

ADVICE_COLUMNS: tuple[tuple[str, type], ...] = (
    (TIMESTAMP, float), ("advice_id", str), ("event", str), ("severity", str), ("scope", str), ("title", str),
    ("evidence", str), ("action", str),
)
"""The advice table: when, which advice (``rule:scope``), ``raised`` or ``cleared``, and its text at that moment."""


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a tidy table: a scalar field of a model dataclass."""

    name: str
    """The field (and column) name."""
    kind: type
    """``bool``, ``int``, ``float`` or ``str`` (an enum's value is written as text)."""
    choice: bool
    """True for an enum field (written as its member's value)."""


def record_columns(cls: type) -> tuple[Column, ...]:
    """The scalar and enum fields of dataclass ``cls``, in declaration order."""
    columns = []
    for f in record_shape(cls).fields:
        column = _column(f.name, f.shape.inner if isinstance(f.shape, Nullable) else f.shape)
        if column is not None:
            columns.append(column)
    return tuple(columns)


def _column(name: str, shape: Shape) -> Column | None:
    if isinstance(shape, Scalar):
        return Column(name, shape.kind, False)
    if isinstance(shape, Choice):
        return Column(name, str, True)
    return None


GPU_COLUMNS = record_columns(DeviceSample)
"""The GPU table's columns after ``timestamp``."""
PROCESS_COLUMNS = record_columns(ProcessSample)
"""The process table's columns after ``timestamp``."""


def row_values(record: object, columns: tuple[Column, ...]) -> Iterator[object]:
    """The values of ``record``'s ``columns`` (an enum as its value's text, a missing value as None)."""
    for column in columns:
        value = getattr(record, column.name)
        yield str(value.value) if column.choice and isinstance(value, enum.Enum) else value


class AdviceEvents:
    """Turns the advice standing in each snapshot into events: raised when it appears, cleared when it is gone."""

    def __init__(self) -> None:
        self._standing: dict[str, Advice] = {}

    def events(self, snapshot: Snapshot) -> list[tuple[object, ...]]:
        """The advice rows of ``snapshot`` (in :data:`ADVICE_COLUMNS` order): cleared ones first, then raised ones."""
        now = {a.id: a for a in snapshot.advice}
        rows: list[tuple[object, ...]] = [
            _advice_row(snapshot.timestamp, a, "cleared") for advice_id, a in self._standing.items() if advice_id not in now
        ]
        rows.extend(_advice_row(snapshot.timestamp, a, "raised") for advice_id, a in now.items()
                    if advice_id not in self._standing)
        self._standing = now
        return rows


def _advice_row(timestamp: float, advice: Advice, event: str) -> tuple[object, ...]:
    return (timestamp, advice.id, event, str(advice.severity.value), advice.scope, advice.title, advice.evidence,
            advice.action)
