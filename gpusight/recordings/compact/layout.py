"""The tables and columns of the compact format, derived from the snapshot dataclasses.

Nothing here lists the model's fields one by one: every field of every dataclass becomes a column,
so a field added to the model is recorded without a change here. What this module does say is how
a field is stored best:

- a *number* column (an ``int`` or ``float`` field, ``None`` allowed) holds a quantised integer per
  row, coded as a change from the row's previous value; ``PRECISION`` gives the quantum of the float
  fields whose source has a known precision (a value that does not fit is stored exactly anyway);
- a *vector* column (a tuple of numbers, such as the per-core CPU busy) holds one such cell per item;
- everything else is *static*: strings, enums, flags, nested records and the numbers in
  ``STATIC_NUMBERS`` (identifiers that do not move). A row's static values are written once per
  block as a dictionary entry and referenced by number afterwards.

The layout is written into each segment's header, so a reader decodes a file by the file's own
layout, not by the model it was built with.
"""

from __future__ import annotations

import dataclasses
import json
import zlib
from dataclasses import dataclass
from typing import Any

from gpusight.snapshot.model import (
    ContainerSample,
    DeviceSample,
    HostSample,
    JobSample,
    MigDeviceSample,
    ProcessSample,
    Snapshot,
)
from gpusight.snapshot.schema import Array, Nullable, Record, Scalar, Shape, record_shape

PRECISION: dict[tuple[type, str], int] = {
    (Snapshot, "timestamp"): 1000,
    (DeviceSample, "utilization_gpu_percent"): 1,
    (DeviceSample, "utilization_memory_percent"): 1,
    (DeviceSample, "power_watts"): 1000,
    (DeviceSample, "power_limit_watts"): 1000,
    (DeviceSample, "temperature_celsius"): 1,
    (DeviceSample, "fan_percent"): 1,
    (DeviceSample, "energy_joules"): 1000,
    (DeviceSample, "pcie_tx_bytes_per_s"): 1,
    (DeviceSample, "pcie_rx_bytes_per_s"): 1,
    (DeviceSample, "nvlink_tx_bytes_per_s"): 1,
    (DeviceSample, "nvlink_rx_bytes_per_s"): 1,
    (DeviceSample, "sm_active_percent"): 100,
    (DeviceSample, "sm_occupancy_percent"): 100,
    (DeviceSample, "tensor_active_percent"): 100,
    (DeviceSample, "dram_active_percent"): 100,
    (DeviceSample, "encoder_percent"): 1,
    (DeviceSample, "decoder_percent"): 1,
    (DeviceSample, "jpeg_percent"): 1,
    (DeviceSample, "ofa_percent"): 1,
    (MigDeviceSample, "sm_active_percent"): 100,
    (MigDeviceSample, "sm_occupancy_percent"): 100,
    (MigDeviceSample, "tensor_active_percent"): 100,
    (MigDeviceSample, "dram_active_percent"): 100,
    (ProcessSample, "encoder_percent"): 1,
    (ProcessSample, "decoder_percent"): 1,
    (ProcessSample, "sm_percent"): 1,
    (ProcessSample, "gpu_memory_percent"): 1,
    (ProcessSample, "cpu_percent"): 10,
    (ProcessSample, "cpu_wait_percent"): 10,
    (ProcessSample, "input_wait_percent"): 10,
    (HostSample, "cpu_percent_per_core"): 10,
    (HostSample, "iowait_percent"): 10,
    (HostSample, "load_average"): 2048,
}
"""Quantum of float fields as a divisor: a value ``v`` is stored as the integer ``q`` with ``q / divisor == v``.

1000 is NVML's milliwatts and millijoules; 1 is NVML's whole percents and degrees and whole bytes per
second (NVML's KB/s times 1024); 10 is psutil's percent to 0.1; 2048 is the kernel's fixed-point load
average (``os.getloadavg`` gives multiples of 1/2048). Float fields not listed get
``DEFAULT_PRECISION``. A value that does not fit (e.g. a rate computed from counters) is stored as an
exact float escape, so precision is never lost, only bytes."""

DEFAULT_PRECISION = 100
"""Quantum divisor of float fields not in ``PRECISION`` (two decimals, as the demo and most rates round)."""

STATIC_NUMBERS: frozenset[tuple[type, str]] = frozenset({
    (Snapshot, "schema"),
    (DeviceSample, "index"),
    (DeviceSample, "minor_number"),
    (DeviceSample, "cuda_index"),
    (DeviceSample, "memory_total_bytes"),
    (DeviceSample, "compute_capability"),
    (MigDeviceSample, "device_index"),
    (MigDeviceSample, "mig_index"),
    (MigDeviceSample, "gpu_instance_id"),
    (MigDeviceSample, "compute_instance_id"),
    (MigDeviceSample, "cuda_index"),
    (MigDeviceSample, "sm_count"),
    (MigDeviceSample, "memory_total_bytes"),
    (ProcessSample, "pid"),
    (ProcessSample, "device_index"),
    (ProcessSample, "trainer_pid"),
    (ProcessSample, "ppid"),
    (ProcessSample, "create_time"),
    (ProcessSample, "job"),
    (ProcessSample, "rank"),
    (ProcessSample, "gpu_instance_id"),
    (ProcessSample, "compute_instance_id"),
    (JobSample, "id"),
    (JobSample, "world_size"),
    (JobSample, "launcher_pid"),
    (ContainerSample, "pid_in_container"),
})
"""Number fields that identify a row or never move: stored with the static values, not as columns."""

IDENTITY: dict[type, tuple[str, ...]] = {
    DeviceSample: ("index",),
    MigDeviceSample: ("device_index", "mig_index"),
    ProcessSample: ("pid", "role", "device_index", "create_time"),
    JobSample: ("id",),
}
"""Fields that say a row is the same thing as in the previous snapshot, so its numbers are coded as changes.

Other tables use all their static fields. Identity only affects size: any choice decodes exactly."""

NUMBER_KINDS = ("int", "float")
"""How a number column's values are typed: ``int`` columns hold integers, ``float`` columns floats."""


@dataclass(frozen=True, slots=True)
class NumberColumn:
    """A number field stored as a quantised cell per row (or, for a vector, per item)."""

    name: str
    """The field."""
    kind: str
    """``"int"`` or ``"float"``."""
    divisor: int
    """The quantum as a divisor (1 for ints)."""
    vector: bool
    """True for a tuple of numbers (its length, None allowed, is stored per row)."""
    nullable: bool
    """True when the field may be None."""


@dataclass(frozen=True, slots=True)
class Table:
    """The rows of one snapshot field (the snapshot itself, ``host``, ``devices``, ...)."""

    field: str
    """The snapshot field ("" for the snapshot's own scalar fields)."""
    cls: type
    """The dataclass of its rows."""
    arity: str
    """``"one"`` (always one row), ``"optional"`` (0 or 1 row: None or a record) or ``"many"`` (a tuple)."""
    static: tuple[str, ...]
    """Static fields, in order."""
    numbers: tuple[NumberColumn, ...]
    """Number and vector columns, in order."""
    identity: tuple[int, ...]
    """Positions in ``static`` of the fields that identify a row."""

    def describe(self) -> dict[str, Any]:
        """This table as written in a segment header."""
        return {
            "field": self.field, "class": self.cls.__name__, "arity": self.arity, "static": list(self.static),
            "identity": [self.static[i] for i in self.identity],
            "numbers": [[c.name, c.kind, c.divisor, c.vector, c.nullable] for c in self.numbers],
        }


class LayoutError(ValueError):
    """A segment header's layout that this gpusight cannot decode."""


def model_layout() -> tuple[Table, ...]:
    """The tables for snapshots of this gpusight's model: the snapshot's own fields first, then one per record field."""
    root = record_shape(Snapshot)
    tables = [_table("", Snapshot, "one", [f for f in root.fields if _child(f.shape) is None])]
    for f in root.fields:
        child = _child(f.shape)
        if child is not None:
            arity, record = child
            tables.append(_table(f.name, record.cls, arity, list(record.fields)))
    return tuple(tables)


def layout_from_header(described: Any) -> tuple[Table, ...]:
    """The tables a segment header describes, checked against this model's classes; raises :class:`LayoutError`."""
    model = {t.field: t for t in model_layout()}
    if not isinstance(described, list):
        raise LayoutError("layout is not a list")
    tables = []
    for entry in described:
        try:
            known = model[entry["field"]]
            static = tuple(str(name) for name in entry["static"])
            identity = tuple(static.index(name) for name in entry["identity"])
            numbers = tuple(
                NumberColumn(str(name), kind, int(divisor), bool(vector), bool(nullable))
                for name, kind, divisor, vector, nullable in entry["numbers"]
            )
            arity = entry["arity"]
        except (KeyError, TypeError, ValueError) as exc:
            raise LayoutError(f"layout entry not understood ({exc})") from None
        if arity != known.arity or any(c.kind not in NUMBER_KINDS or c.divisor < 1 for c in numbers):
            raise LayoutError(f"layout of {entry['field'] or 'snapshot'} not understood")
        tables.append(Table(known.field, known.cls, arity, static, numbers, identity))
    if [t.field for t in tables] != [t.field for t in model.values()][: len(tables)] or not tables:
        raise LayoutError("layout tables not understood")
    return tuple(tables)


def _child(shape: Shape) -> tuple[str, Record] | None:
    """(arity, record) when a snapshot field holds records; None for a scalar field."""
    if isinstance(shape, Record):
        return "one", shape
    if isinstance(shape, Nullable) and isinstance(shape.inner, Record):
        return "optional", shape.inner
    if isinstance(shape, Array) and isinstance(shape.item, Record):
        return "many", shape.item
    return None


def _table(name: str, cls: type, arity: str, fields: list[Any]) -> Table:
    static: list[str] = []
    numbers: list[NumberColumn] = []
    for f in fields:
        column = None if (cls, f.name) in STATIC_NUMBERS else _number_column(cls, f.name, f.shape)
        if column is None:
            static.append(f.name)
        else:
            numbers.append(column)
    wanted = IDENTITY.get(cls)
    identity = tuple(range(len(static))) if wanted is None else tuple(static.index(n) for n in wanted)
    assert {f.name for f in fields} == set(static) | {c.name for c in numbers}  # every field is stored
    return Table(name, cls, arity, tuple(static), tuple(numbers), identity)


def _number_column(cls: type, name: str, shape: Shape) -> NumberColumn | None:
    nullable = isinstance(shape, Nullable)
    inner = shape.inner if isinstance(shape, Nullable) else shape
    vector = isinstance(inner, Array)
    item = inner.item if isinstance(inner, Array) else inner
    if not isinstance(item, Scalar) or item.kind not in (int, float):
        return None
    kind = "int" if item.kind is int else "float"
    divisor = 1 if kind == "int" else PRECISION.get((cls, name), DEFAULT_PRECISION)
    return NumberColumn(name, kind, divisor, vector, nullable)


def layout_crc(tables: tuple[Table, ...]) -> int:
    """A checksum of a layout, written in each block so a block is only decoded with the layout it was written in."""
    return zlib.crc32(json.dumps([t.describe() for t in tables], sort_keys=True).encode("ascii"))


def field_names(cls: type) -> frozenset[str]:
    """Names of the fields of dataclass ``cls``."""
    return frozenset(f.name for f in dataclasses.fields(cls))
