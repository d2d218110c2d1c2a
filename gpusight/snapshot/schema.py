"""The snapshot JSON schema, derived from the dataclasses in :mod:`gpusight.snapshot.model`.

The model stays the one declaration: :func:`record_shape` reads each dataclass's resolved type hints
(``typing.get_type_hints``) and its defaults into a small tree of shapes (:class:`Scalar`,
:class:`Choice`, :class:`Array`, :class:`Nullable`, :class:`Record`). The validator in
:mod:`gpusight.snapshot.serialize` is compiled from that tree, and :func:`json_schema` renders it as a
JSON Schema document for other tools.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from typing import Any, TypeAlias, Union

from gpusight.snapshot.model import SCHEMA_VERSION, Snapshot

MAX_TIMESTAMP = 253_402_300_799.0
"""Latest timestamp accepted (the last second of year 9999, as far as Python dates go)."""

FIELD_BOUNDS: dict[tuple[type, str], tuple[float, float]] = {
    (Snapshot, "timestamp"): (0.0, MAX_TIMESTAMP),
    (Snapshot, "schema"): (1, SCHEMA_VERSION),
}
"""Inclusive ranges for the few numbers whose type alone does not say enough, by (dataclass, field)."""

ALWAYS_REQUIRED: frozenset[tuple[type, str]] = frozenset({(Snapshot, "schema")})
"""Keys a reader cannot do without although the dataclass gives them a default (for building snapshots in code)."""

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
"""The JSON Schema version :func:`json_schema` follows."""


@dataclasses.dataclass(frozen=True, slots=True)
class Scalar:
    """A JSON boolean, number or string held as ``bool``, ``int``, ``float`` or ``str``."""

    kind: type
    """``bool``, ``int``, ``float`` or ``str``."""
    bounds: tuple[float, float] | None = None
    """Inclusive range of a number, if it has one beyond its type."""


@dataclasses.dataclass(frozen=True, slots=True)
class Choice:
    """One of the values of an :class:`enum.Enum`, written as the member's value."""

    enum: type[enum.Enum]
    """The enum whose member values are allowed."""


@dataclasses.dataclass(frozen=True, slots=True)
class Array:
    """A JSON list held as a tuple."""

    item: Shape
    """Shape of every element."""
    length: int | None = None
    """Exact number of elements (``tuple[int, int]``); None for any number (``tuple[int, ...]``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Nullable:
    """A value that may also be JSON ``null`` (``X | None``)."""

    inner: Shape
    """Shape of the value when it is not null."""


@dataclasses.dataclass(frozen=True, slots=True)
class Field:
    """One key of a JSON object: a dataclass field."""

    name: str
    """The key, equal to the field name."""
    shape: Shape
    """What its value must look like."""
    required: bool
    """True when a reader cannot do without the key: the field has no default, or is in :data:`ALWAYS_REQUIRED`."""


@dataclasses.dataclass(frozen=True, slots=True)
class Record:
    """A JSON object held as a dataclass."""

    cls: type
    """The dataclass."""
    fields: tuple[Field, ...]
    """Its fields in declaration order."""


Shape: TypeAlias = Scalar | Choice | Array | Nullable | Record
"""Any node of the schema tree."""

_SCALARS = (bool, int, float, str)


_RECORDS: dict[type, Record] = {}
"""Shapes already derived, by dataclass."""


def record_shape(cls: type) -> Record:
    """The schema of dataclass ``cls``, from its resolved type hints; raises TypeError for a type JSON cannot hold."""
    known = _RECORDS.get(cls)
    if known is None:
        known = _RECORDS[cls] = _derive_record(cls)
    return known


def _derive_record(cls: type) -> Record:
    hints = typing.get_type_hints(cls)
    fields = []
    for f in dataclasses.fields(cls):
        shape = _shape(hints[f.name], f"{cls.__name__}.{f.name}")
        bounds = FIELD_BOUNDS.get((cls, f.name))
        if bounds is not None:
            if not isinstance(shape, Scalar) or shape.kind not in (int, float):
                raise TypeError(f"{cls.__name__}.{f.name}: bounds need a number field")
            shape = Scalar(shape.kind, bounds)
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        required = not has_default or (cls, f.name) in ALWAYS_REQUIRED
        fields.append(Field(f.name, shape, required))
    return Record(cls, tuple(fields))


def _shape(annotation: Any, where: str) -> Shape:
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        others = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(others) != 1:
            raise TypeError(f"{where}: only 'X | None' unions can be written as JSON")
        return Nullable(_shape(others[0], where))
    if origin is tuple:
        args = typing.get_args(annotation)
        if len(args) == 2 and args[1] is Ellipsis:
            return Array(_shape(args[0], where))
        if args and all(a == args[0] for a in args):
            return Array(_shape(args[0], where), len(args))
        raise TypeError(f"{where}: only 'tuple[X, ...]' or tuples of one type can be written as JSON")
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return Choice(annotation)
    if annotation in _SCALARS:
        return Scalar(annotation)
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return record_shape(annotation)
    raise TypeError(f"{where}: {annotation!r} cannot be written as JSON")


def json_schema(cls: type = Snapshot) -> dict[str, Any]:
    """The schema of dataclass ``cls`` (a snapshot by default) as a JSON Schema (2020-12) document, for other tools.

    It describes what gpusight writes: every key is present. gpusight's own reader also accepts objects
    without the keys that have defaults, and ignores keys it does not know.
    """
    definitions: dict[str, Any] = {}
    root = _json_schema(record_shape(cls), definitions)
    return {
        "$schema": JSON_SCHEMA_DIALECT,
        "title": f"gpusight {cls.__name__} (schema {SCHEMA_VERSION})",
        **root,
        "$defs": definitions,
    }


def _json_schema(shape: Shape, definitions: dict[str, Any]) -> dict[str, Any]:
    if isinstance(shape, Scalar):
        document: dict[str, Any] = {"type": _JSON_TYPES[shape.kind]}
        if shape.bounds is not None:
            document["minimum"], document["maximum"] = shape.bounds
        return document
    if isinstance(shape, Choice):
        return {"enum": [member.value for member in shape.enum]}
    if isinstance(shape, Array):
        document = {"type": "array", "items": _json_schema(shape.item, definitions)}
        if shape.length is not None:
            document["minItems"] = document["maxItems"] = shape.length
        return document
    if isinstance(shape, Nullable):
        return {"anyOf": [_json_schema(shape.inner, definitions), {"type": "null"}]}
    name = shape.cls.__name__
    if name not in definitions:
        definitions[name] = {
            "type": "object",
            "description": (shape.cls.__doc__ or name).strip().splitlines()[0],
            "properties": {f.name: _json_schema(f.shape, definitions) for f in shape.fields},
            "required": [f.name for f in shape.fields],
        }
    return {"$ref": f"#/$defs/{name}"}


_JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string"}
