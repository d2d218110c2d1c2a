"""Turns compact records back into snapshots (the inverse of :mod:`gpusight.recordings.compact.encoder`).

Static dictionary entries are checked against the model's schema once, when they arrive, by the
same validator that reads JSON recordings; numbers are typed by their column. A record that does
not decode raises :class:`CodecError`, and the caller skips the rest of its block.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from gpusight.recordings.compact.codec import MAX_SHIFT, SECOND_ORDER, CodecError, decode_cell, decode_static, get_varint
from gpusight.recordings.compact.encoder import Cells
from gpusight.recordings.compact.layout import NumberColumn, Table, field_names
from gpusight.snapshot.model import ProcessRole, ProcessSample, Snapshot
from gpusight.snapshot.schema import MAX_TIMESTAMP, record_shape
from gpusight.snapshot.serialize import SnapshotFormatError, record_from_dict


class _Entry:
    """A static dictionary entry: the row's dataclass arguments with its static values set, its identity, and whether
    its rows are built (False: a process without a GPU context, when only GPU processes are asked for)."""

    __slots__ = ("args", "identity", "kept")

    def __init__(self, args: list[Any], identity: tuple[Any, ...], kept: bool) -> None:
        self.args = args
        self.identity = identity
        self.kept = kept


class _TableDecoder:
    def __init__(self, table: Table, gpu_processes_only: bool = False) -> None:
        self.table = table
        self.gpu_processes_only = gpu_processes_only and table.cls is ProcessSample
        """True when rows of processes without a GPU context are decoded (their numbers move on) but never built."""
        known = field_names(table.cls)
        self.static_kept = [name for name in table.static if name in known]
        vectors = {c.name for c in table.numbers if c.vector}
        self.required: dict[str, Any] = {  # placeholders for number fields, checked by type when decoded
            f.name: [] if f.name in vectors else 0
            for f in record_shape(table.cls).fields if f.required and f.name not in table.static
        }
        fields = dataclasses.fields(table.cls)
        self.position = {f.name: i for i, f in enumerate(fields)}
        """Each field's position among the dataclass's arguments."""
        self.defaults = [
            f.default if f.default is not dataclasses.MISSING
            else f.default_factory() if f.default_factory is not dataclasses.MISSING else None
            for f in fields
        ]
        self.number_slots = [(c, self.position[column.name]) for c, column in enumerate(table.numbers) if column.name in known]
        self.entries: list[_Entry] = []
        self.ids: list[int] = []
        self.cells: dict[tuple[Any, ...], Cells] = {}
        self.rows: list[tuple[_Entry, Cells | None]] = []

    def _entry(self, data: bytes) -> _Entry:
        values = decode_static(data)
        table = self.table
        if len(values) != len(table.static):
            raise CodecError(f"dictionary entry of {table.cls.__name__} has {len(values)} values, not {len(table.static)}")
        given = dict(self.required)
        given.update(zip(table.static, values, strict=True))
        try:
            record: Any = record_from_dict(table.cls, given)
        except SnapshotFormatError as exc:
            raise CodecError(str(exc)) from None
        args = list(self.defaults)
        for name in self.static_kept:
            args[self.position[name]] = getattr(record, name)
        identity = tuple([
            getattr(record, table.static[i]) if table.static[i] in self.position else repr(values[i]) for i in table.identity
        ])
        kept = not self.gpu_processes_only or record.role == ProcessRole.GPU
        return _Entry(args, identity, kept)

    def decode(self, data: bytes, pos: int) -> int:
        count, pos = get_varint(data, pos)
        if count:
            ids = []
            entries = self.entries
            for _ in range(count - 1):
                number, pos = get_varint(data, pos)
                if number == len(entries):
                    size, pos = get_varint(data, pos)
                    if pos + size > len(data):
                        raise CodecError("record cut short")
                    entries.append(self._entry(data[pos : pos + size]))
                    pos += size
                elif number > len(entries):
                    raise CodecError("reference to an unknown dictionary entry")
                ids.append(number)
            self.ids = ids
        numbers = self.table.numbers
        if not numbers:
            self.rows = [(self.entries[i], None) for i in self.ids]
            return pos
        width = len(numbers)
        rows: list[tuple[_Entry, Cells | None]] = []
        cells: list[Cells | None] = []  # None: a row never built, whose tokens are only stepped over
        for i in self.ids:
            entry = self.entries[i]
            cell = self.cells.get(entry.identity) if entry.kept else None
            if cell is None and entry.kept:
                cell = self.cells[entry.identity] = Cells(width)
            rows.append((entry, cell))
            cells.append(cell)
        self.rows = rows
        if not rows:
            return pos
        for c, column in enumerate(numbers):
            if column.vector:
                for cell in cells:
                    pos = _skip_vector(data, pos) if cell is None else _decode_vector(data, pos, cell, c, column)
                continue
            divisor, is_float, nullable = column.divisor, column.kind == "float", column.nullable
            header = data[pos]
            pos += 1
            second_order, shift = header & SECOND_ORDER, header & ~SECOND_ORDER
            if shift > MAX_SHIFT:
                raise CodecError("column shift out of range")
            for cell in cells:
                token = data[pos]
                if token < 0x80:
                    pos += 1
                else:
                    token, pos = get_varint(data, pos)
                if cell is None:
                    continue
                qs = cell.qs
                q1 = qs[c]
                if token:
                    if not token & 3 and q1 is not None:  # a change: the common case, inline
                        z = token >> 2
                        if second_order:
                            z -= 1
                            q2 = cell.q2s[c]
                            q = q1 + (0 if q2 is None else q1 - q2) + (((z >> 1) ^ -(z & 1)) << shift)
                        else:
                            q = q1 + (((z >> 1) ^ -(z & 1)) << shift)
                        qs[c] = q
                        cell.values[c] = q / divisor if is_float else q
                    else:
                        values = cell.values
                        slope = None
                        if second_order:
                            q2 = cell.q2s[c]
                            slope = 0 if q1 is None or q2 is None else q1 - q2
                        values[c], qs[c] = decode_cell(token, values[c], q1, divisor, is_float, shift, slope)
                        if values[c] is None and not nullable:
                            raise CodecError(f"{column.name} is missing")
                cell.q2s[c] = q1
        return pos

    def row_args(self) -> list[list[Any]]:
        """The arguments of each current row's dataclass, in field order."""
        slots = self.number_slots
        built = []
        for entry, cell in self.rows:
            if not entry.kept:
                continue
            args = entry.args.copy()
            if cell is not None:
                values = cell.values
                for c, position in slots:
                    args[position] = values[c]
            built.append(args)
        return built

    def build(self) -> list[Any]:
        """The current rows as dataclasses."""
        cls = self.table.cls
        return [cls(*args) for args in self.row_args()]


def _skip_vector(data: bytes, pos: int) -> int:
    """Step over a vector cell of a row that is never built."""
    size, pos = get_varint(data, pos)
    if size - 1 > len(data) - pos:
        raise CodecError("record cut short")
    for _ in range(size - 1):
        _, pos = get_varint(data, pos)
    return pos


def _decode_vector(data: bytes, pos: int, cell: Cells, c: int, column: NumberColumn) -> int:
    size, pos = get_varint(data, pos)
    if not size:
        if not column.nullable:
            raise CodecError(f"{column.name} is missing")
        cell.values[c], cell.qs[c] = None, None
        return pos
    if size - 1 > len(data) - pos:
        raise CodecError("record cut short")
    before = cell.values[c] or ()
    before_q = cell.qs[c] or ()
    values: list[Any] = []
    qs: list[int | None] = []
    is_float = column.kind == "float"
    for i in range(size - 1):
        token, pos = get_varint(data, pos)
        previous, previous_q = (before[i], before_q[i]) if i < len(before) else (None, None)
        if token:
            value, q = decode_cell(token, previous, previous_q, column.divisor, is_float)
            if value is None:
                raise CodecError(f"{column.name} has a missing item")
        else:
            value, q = previous, previous_q
            if value is None:
                raise CodecError(f"{column.name} has a missing item")
        values.append(value)
        qs.append(q)
    cell.values[c], cell.qs[c] = tuple(values), qs
    return pos


class SnapshotDecoder:
    """Decodes the records of one block in order.

    With ``gpu_processes_only``, each snapshot's ``processes`` holds only the processes with a GPU context (role
    ``gpu``): DataLoader workers are decoded, so the block's later records still decode, but never built.
    """

    def __init__(self, tables: Sequence[Table], gpu_processes_only: bool = False) -> None:
        self._tables = [_TableDecoder(t, gpu_processes_only) for t in tables]
        self._fields = [(t.table.field, t.table.arity) for t in self._tables]
        root = tables[0]
        if root.field or [c.name for c in root.numbers].count("timestamp") != 1:
            raise CodecError("layout has no snapshot timestamp")
        self._timestamp_column = [c.name for c in root.numbers].index("timestamp")

    def apply(self, record: bytes) -> None:
        """Take in the next record of the block without building its snapshot; raises :class:`CodecError`."""
        pos = 0
        try:
            for table in self._tables:
                pos = table.decode(record, pos)
        except IndexError:
            raise CodecError("record cut short") from None
        if pos != len(record):
            raise CodecError("record longer than its tables")

    def peek_timestamp(self, record: bytes) -> float | None:
        """The timestamp of ``record``, the next record of the block, without taking it in; None when not cheap to tell."""
        root = self._tables[0]
        count, pos = get_varint(record, 0)
        if not count:
            if len(root.rows) != 1 or root.rows[0][1] is None:
                return None
            cell = root.rows[0][1]
        else:  # the snapshot's static values changed: a known dictionary entry, or a new one (whose row is new)
            if count != 2:
                return None
            number, pos = get_varint(record, pos)
            known = root.entries[number] if number < len(root.entries) else None
            if known is None:
                size, pos = get_varint(record, pos)
                pos += size
            cell = (root.cells.get(known.identity) if known is not None else None) or Cells(len(root.table.numbers))
        for c, column in enumerate(root.table.numbers):
            if column.vector:
                return None
            header = record[pos]
            token, pos = get_varint(record, pos + 1)
            if c == self._timestamp_column:
                if not token:
                    value = cell.values[c]
                    return value if isinstance(value, float) else None
                q1, q2 = cell.qs[c], cell.q2s[c]
                slope = (0 if q1 is None or q2 is None else q1 - q2) if header & SECOND_ORDER else None
                decoded, _ = decode_cell(token, cell.values[c], q1, column.divisor, column.kind == "float",
                                         header & ~SECOND_ORDER, slope)
                return decoded if isinstance(decoded, float) else None
        return None

    def build(self) -> Snapshot:
        """The snapshot of the last record taken in; raises :class:`CodecError` when it is not a valid snapshot."""
        root_table = self._tables[0]
        root = root_table.row_args()
        if len(root) != 1:
            raise CodecError("snapshot row missing")
        args = root[0]
        position = root_table.position
        for table, (field, arity) in zip(self._tables[1:], self._fields[1:], strict=True):
            rows = table.build()
            if arity == "many":
                args[position[field]] = tuple(rows)
            elif len(rows) > 1 or (arity == "one" and not rows):
                raise CodecError(f"{field} has {len(rows)} rows")
            else:
                args[position[field]] = rows[0] if rows else None
        timestamp = args[position["timestamp"]]
        if type(timestamp) is not float or not 0.0 <= timestamp <= MAX_TIMESTAMP:
            raise CodecError(f"timestamp {timestamp!r} out of range")
        return Snapshot(*args)
