"""Conversion of snapshots to and from plain JSON-ready dictionaries (the JSON contract)."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from gputop.collect.model import (
    SCHEMA_VERSION,
    Advice,
    DeviceSample,
    DriverInfo,
    ErrorNote,
    GpuProcessType,
    HostSample,
    ProcessRole,
    ProcessSample,
    Severity,
    Snapshot,
    SourceKind,
    StringEnum,
)

MAX_TIMESTAMP = 253_402_300_799.0
"""Latest timestamp accepted when reading (the last second of year 9999, as far as Python dates go)."""

ENUM_FIELD_TYPES: dict[str, type[StringEnum]] = {
    enum.__name__: enum for enum in (SourceKind, ProcessRole, GpuProcessType, Severity)
}
"""The enums that snapshot fields are typed with, by the name their annotations use."""


class SnapshotFormatError(ValueError):
    """A dictionary or JSON line that does not describe a snapshot."""


def snapshot_to_dict(snapshot: Snapshot) -> dict[str, Any]:
    """Return the snapshot as nested dicts and lists, ready for ``json.dumps``."""
    return _plain(snapshot)


def snapshot_to_json(snapshot: Snapshot, indent: int | None = None) -> str:
    """Return the snapshot as a JSON document (one line when ``indent`` is None)."""
    separators = (",", ":") if indent is None else None
    return json.dumps(snapshot_to_dict(snapshot), indent=indent, separators=separators)


def snapshot_from_dict(data: Any) -> Snapshot:
    """Build a snapshot from a dict made by :func:`snapshot_to_dict`.

    Unknown keys are ignored (newer writers may add keys); a wrong shape raises
    :class:`SnapshotFormatError`.
    """
    if not isinstance(data, dict):
        raise SnapshotFormatError("a snapshot must be a JSON object")
    schema = data.get("schema")
    if not isinstance(schema, int) or isinstance(schema, bool):
        raise SnapshotFormatError("missing or non-integer 'schema'")
    if schema > SCHEMA_VERSION:
        raise SnapshotFormatError(f"schema {schema} is newer than this gputop understands ({SCHEMA_VERSION})")
    try:
        driver = data.get("driver")
        return Snapshot(
            timestamp=_timestamp(data["timestamp"]),
            source=_coerce("SourceKind", data["source"], "source"),
            host=_build(HostSample, data.get("host") or {}),
            driver=None if driver is None else _build(DriverInfo, driver),
            devices=tuple(_build(DeviceSample, d) for d in _list(data, "devices")),
            processes=tuple(_build(ProcessSample, p) for p in _list(data, "processes")),
            advice=tuple(_build(Advice, a) for a in _list(data, "advice")),
            errors=tuple(_build(ErrorNote, e) for e in _list(data, "errors")),
            label=_coerce("str | None", data.get("label"), "label"),
            schema=schema,
        )
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise SnapshotFormatError(f"malformed snapshot: {exc}") from exc


def _list(data: dict[str, Any], key: str) -> list[Any]:
    value = data.get(key) or []
    if not isinstance(value, list):
        raise SnapshotFormatError(f"'{key}' must be a list")
    return value


def _build(cls: type, data: Any) -> Any:
    """Create dataclass ``cls`` from ``data``, checking each value against its declared type."""
    if not isinstance(data, dict):
        raise SnapshotFormatError(f"{cls.__name__} must be a JSON object")
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in data:
            kwargs[f.name] = _coerce(f.type, data[f.name], f"{cls.__name__}.{f.name}")
    return cls(**kwargs)


def _coerce(annotation: Any, value: Any, where: str) -> Any:
    """Check ``value`` against a field annotation (a string, as the model uses postponed annotations)."""
    annotation = str(annotation)
    optional = "None" in annotation
    if value is None:
        if optional:
            return None
        raise SnapshotFormatError(f"{where} must not be null")
    base = annotation.replace(" | None", "")
    if base.startswith("tuple[str"):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise SnapshotFormatError(f"{where} must be a list of strings")
        return tuple(value)
    if base.startswith("tuple["):
        if not isinstance(value, list) or not all(_is_number(v) for v in value):
            raise SnapshotFormatError(f"{where} must be a list of numbers")
        kind = int if base.startswith("tuple[int") else float
        return tuple(kind(v) for v in value)
    if base == "bool":
        if not isinstance(value, bool):
            raise SnapshotFormatError(f"{where} must be true or false")
        return value
    if base in ("int", "float"):
        if not _is_number(value):
            raise SnapshotFormatError(f"{where} must be a number")
        return int(value) if base == "int" else float(value)
    if base == "str":
        if not isinstance(value, str):
            raise SnapshotFormatError(f"{where} must be a string")
        return value
    enum = ENUM_FIELD_TYPES.get(base)
    if enum is not None:
        return _member(enum, value, where)
    raise SnapshotFormatError(f"{where}: unsupported field type {annotation}")


def _member(enum: type[StringEnum], value: Any, where: str) -> StringEnum:
    """The member of ``enum`` whose value is the string ``value``.

    Anything else is an error that lists the known values and quotes a short, printable bad one.
    """
    if isinstance(value, str):
        for member in enum:
            if member.value == value:
                return member
    allowed = ", ".join(repr(member.value) for member in enum)
    quoted = isinstance(value, str) and len(value) <= 32 and value.isprintable()
    raise SnapshotFormatError(f"{where} must be one of {allowed}" + (f", not {value!r}" if quoted else ""))


def _timestamp(value: Any) -> float:
    """A snapshot's epoch seconds, between 1970 and :data:`MAX_TIMESTAMP`."""
    if not _is_number(value) or not 0 <= value <= MAX_TIMESTAMP:
        raise SnapshotFormatError("'timestamp' must be epoch seconds between 1970 and 9999")
    return float(value)


def _is_number(value: Any) -> bool:
    """A JSON number that is finite (JSON's NaN and Infinity extensions are refused)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value
