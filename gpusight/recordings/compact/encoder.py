"""Turns snapshots into compact records: static values once per block, then numbers as changes.

A record is the tables of :func:`gpusight.recordings.compact.layout.model_layout` in order. Each table
starts with its row list: ``0`` when the rows are the same dictionary entries as in the previous
snapshot, else the row count plus one followed by one entry number per row (a number one past the
last known entry is followed by that new entry: a varint length and its JSON). Then come the number
columns, one after another: a scalar column is its shift byte and one cell (see
:mod:`gpusight.recordings.compact.codec`) per row; a vector column has per row a varint (0 for None, else its length plus one) and then one cell per item.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gpusight.recordings.compact.codec import DELTA, column_tokens, encode_cell, encode_static, put_varint, quantise_cell
from gpusight.recordings.compact.layout import Table
from gpusight.snapshot.model import Snapshot


class Cells:
    """A row's previous number values, as a reader decoded them, and their quantised integers."""

    __slots__ = ("q2s", "qs", "values")

    def __init__(self, width: int) -> None:
        self.values: list[Any] = [None] * width
        """Previous value per number column (a tuple or None for a vector column)."""
        self.qs: list[Any] = [None] * width
        """Quantised previous value per column (for a vector column, a list with one per item), None if none."""
        self.q2s: list[int | None] = [None] * width
        """Quantised value before the previous one, per scalar column (for second-order changes)."""


def static_getter(names: Sequence[str]) -> Callable[[Any], tuple[Any, ...]]:
    """A function returning the named attributes of an object as a tuple."""
    names = tuple(names)

    def get(row: Any) -> tuple[Any, ...]:
        return tuple([getattr(row, name) for name in names])

    return get


def table_rows(table: Table, snapshot: Snapshot) -> Sequence[Any]:
    """The rows of ``table`` in ``snapshot``."""
    if not table.field:
        return (snapshot,)
    value = getattr(snapshot, table.field)
    if table.arity == "many":
        rows: Sequence[Any] = value
        return rows
    return () if value is None else (value,)


class _TableEncoder:
    """One table's dictionary and previous rows within a block."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.static = static_getter(table.static)
        self.entries: dict[tuple[Any, ...], int] = {}
        self.previous: list[int] | None = None
        self.cells: dict[tuple[Any, ...], Cells] = {}
        self.whole_identity = len(table.identity) == len(table.static)

    def encode(self, out: bytearray, rows: Sequence[Any]) -> None:
        table, entries = self.table, self.entries
        numbers = table.numbers
        ids: list[int] = []
        fresh: dict[int, bytes] = {}
        keys: list[tuple[Any, ...]] = []
        for row in rows:
            values = self.static(row)
            number = entries.get(values)
            if number is None:
                number = entries[values] = len(entries)
                fresh[number] = encode_static(values)
            ids.append(number)
            if numbers:
                keys.append(values if self.whole_identity else tuple([values[i] for i in table.identity]))
        if ids == self.previous:
            out.append(0)
        else:
            put_varint(out, len(ids) + 1)
            for number in ids:
                put_varint(out, number)
                entry = fresh.pop(number, None)
                if entry is not None:
                    put_varint(out, len(entry))
                    out += entry
            self.previous = ids
        if not numbers or not rows:
            return
        width = len(numbers)
        cells = [self.cells.get(key) or self.cells.setdefault(key, Cells(width)) for key in keys]
        for c, column in enumerate(numbers):
            name, divisor, is_float = column.name, column.divisor, column.kind == "float"
            if column.vector:
                for row, cell in zip(rows, cells, strict=True):
                    _encode_vector(out, getattr(row, name), cell, c, divisor, is_float)
                continue
            tags: list[int] = []
            first: list[int] = []
            second: list[int] = []
            for row, cell in zip(rows, cells, strict=True):
                q1, q2 = cell.qs[c], cell.q2s[c]
                tag, payload, cell.values[c], cell.qs[c] = quantise_cell(getattr(row, name), cell.values[c], q1, divisor, is_float)
                cell.q2s[c] = q1
                tags.append(tag)
                first.append(payload)
                second.append(payload - (q1 - q2) if tag == DELTA and q1 is not None and q2 is not None else payload)
            header, tokens = column_tokens(tags, first, second)
            out.append(header)
            for token in tokens:
                if token < 0x80:
                    out.append(token)
                else:
                    put_varint(out, token)


def _encode_vector(out: bytearray, items: Any, cell: Cells, c: int, divisor: int, is_float: bool) -> None:
    if items is None:
        out.append(0)
        cell.values[c], cell.qs[c] = None, None
        return
    put_varint(out, len(items) + 1)
    before = cell.values[c] or ()
    before_q = cell.qs[c] or ()
    decoded: list[Any] = []
    qs: list[int | None] = []
    for i, value in enumerate(items):
        previous, previous_q = (before[i], before_q[i]) if i < len(before) else (None, None)
        token, now, q = encode_cell(value, previous, previous_q, divisor, is_float)
        put_varint(out, token)
        decoded.append(now)
        qs.append(q)
    cell.values[c], cell.qs[c] = tuple(decoded), qs


class SnapshotEncoder:
    """Codes snapshots as records against the ones before them in the same block."""

    def __init__(self, tables: Sequence[Table]) -> None:
        self.tables = tuple(tables)
        """The layout."""
        self._encoders = [_TableEncoder(t) for t in self.tables]

    def restart(self) -> None:
        """Forget everything: the next record is a keyframe (the start of a block)."""
        self._encoders = [_TableEncoder(t) for t in self.tables]

    def encode(self, snapshot: Snapshot) -> bytes:
        """The record of ``snapshot``."""
        out = bytearray()
        for encoder in self._encoders:
            encoder.encode(out, table_rows(encoder.table, snapshot))
        return bytes(out)
