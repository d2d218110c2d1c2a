"""Conversion of snapshots to and from plain JSON-ready dictionaries, and the one validator of the snapshot JSON.

:func:`snapshot_from_dict` checks a dictionary against the schema derived from the model
(:mod:`gpusight.snapshot.schema`) while it builds the snapshot; replay, recordings and the tests all use it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any, TypeVar

from gpusight.snapshot.model import SCHEMA_VERSION, Snapshot
from gpusight.snapshot.schema import (
    Array,
    Choice,
    Nullable,
    Record,
    Scalar,
    Shape,
    record_shape,
)

_SHOWN_CHARACTERS = 40
"""How much of an offending number an error message quotes."""

_QUOTED_STRING_CHARACTERS = 32
"""Longest offending string an error message quotes; longer or unprintable ones are not quoted at all."""


_Built = TypeVar("_Built")

_Check = Callable[[Any], Any]

_VALIDATORS: dict[tuple[type, bool], _Check] = {}
"""Compiled validators by dataclass and ``complete`` (looked up by class: hashing a shape tree costs more than checking)."""


class SnapshotFormatError(ValueError):
    """A dictionary or JSON line that does not describe a snapshot."""


def snapshot_to_dict(snapshot: Snapshot) -> dict[str, Any]:
    """Return the snapshot as nested dicts and lists, ready for ``json.dumps``."""
    plain: dict[str, Any] = _plain(snapshot)
    return plain


def snapshot_to_json(snapshot: Snapshot, indent: int | None = None) -> str:
    """Return the snapshot as a JSON document (one line when ``indent`` is None)."""
    separators = (",", ":") if indent is None else None
    return json.dumps(snapshot_to_dict(snapshot), indent=indent, separators=separators)


def snapshot_from_dict(data: Any, *, complete: bool = False) -> Snapshot:
    """Build a snapshot from a dict made by :func:`snapshot_to_dict`, checking every value against the schema.

    Unknown keys are ignored (newer writers may add keys). Keys whose field has a default may be
    missing, unless ``complete`` is true: what gpusight writes always has every key, and the tests check
    that. A wrong shape raises :class:`SnapshotFormatError` naming the place, e.g.
    ``devices[0].lost must be true or false, not 'yes'``; a newer schema version is refused first.
    """
    if isinstance(data, dict):
        schema = data.get("schema")
        if isinstance(schema, (int, float)) and not isinstance(schema, bool) and schema > SCHEMA_VERSION:
            raise SnapshotFormatError(f"schema {schema} is newer than this gpusight understands ({SCHEMA_VERSION})")
    return record_from_dict(Snapshot, data, complete=complete)


def record_from_dict(cls: type[_Built], data: Any, *, complete: bool = False) -> _Built:
    """Build dataclass ``cls`` from ``data``, checked against the schema derived from ``cls`` (see :func:`snapshot_from_dict`)."""
    check = _VALIDATORS.get((cls, complete))
    if check is None:
        check = _VALIDATORS[cls, complete] = _checker(record_shape(cls), complete)
    try:
        record: _Built = check(data)
    except _Mismatch as exc:
        raise SnapshotFormatError(exc.describe(cls.__name__)) from None
    return record


class _Mismatch(Exception):
    """A value that does not fit its shape; the path to it is collected while the checkers unwind."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.steps: list[str] = []

    def at(self, step: str) -> _Mismatch:
        """Prefix the path with ``step`` (``".name"`` or ``"[index]"``)."""
        self.steps.append(step)
        return self

    def describe(self, root: str) -> str:
        """``path problem``, e.g. ``devices[0].lost must be true or false, not 'yes'``; ``root problem`` at the top."""
        where = "".join(reversed(self.steps)).lstrip(".") or root
        return f"{where} {self.problem}"


def _checker(shape: Shape, complete: bool) -> _Check:
    """A function that checks a JSON value against ``shape`` and returns the model's value for it."""
    if isinstance(shape, Nullable):
        return _nullable(_checker(shape.inner, complete))
    if isinstance(shape, Scalar):
        return _scalar(shape)
    if isinstance(shape, Choice):
        return _choice(shape)
    if isinstance(shape, Array):
        return _array(_checker(shape.item, complete), shape.length)
    return _record(shape, complete)


def _nullable(inner: _Check) -> _Check:
    def check(value: Any) -> Any:
        return None if value is None else inner(value)

    return check


def _scalar(shape: Scalar) -> _Check:
    kind, bounds = shape.kind, shape.bounds
    if kind is str:
        def check(value: Any) -> Any:
            if type(value) is str:
                return value
            raise _Mismatch(f"must be a string{_but(value)}")
    elif kind is bool:
        def check(value: Any) -> Any:
            if value is True or value is False:
                return value
            raise _Mismatch(f"must be true or false{_but(value)}")
    elif kind is float and bounds is None:
        def check(value: Any) -> Any:
            if type(value) is float and value - value == 0.0:  # finite
                return value
            return _number(value, float, None)
    elif kind is int and bounds is None:
        def check(value: Any) -> Any:
            return value if type(value) is int else _number(value, int, None)
    else:
        def check(value: Any) -> Any:
            return _number(value, kind, bounds)
    return check


def _number(value: Any, kind: type, bounds: tuple[float, float] | None) -> Any:
    """``value`` as ``kind`` (int or float); JSON's NaN and Infinity extensions and booleans are refused."""
    if type(value) not in (int, float) or value - value != 0:
        noun = "a whole number" if kind is int else "a finite number"
        raise _Mismatch(f"must be {noun}{_but(value)}")
    if bounds is not None and not bounds[0] <= value <= bounds[1]:
        raise _Mismatch(f"must be between {bounds[0]} and {bounds[1]}{_but(value)}")
    if kind is int and type(value) is float and not value.is_integer():
        raise _Mismatch(f"must be a whole number{_but(value)}")
    try:
        return kind(value)
    except OverflowError:
        raise _Mismatch(f"is too large to be a number{_but(value)}") from None


def _choice(shape: Choice) -> _Check:
    members = {member.value: member for member in shape.enum}
    allowed = ", ".join(repr(value) for value in members)

    def check(value: Any) -> Any:
        try:
            member = members.get(value)
        except TypeError:  # a list or an object
            member = None
        if member is None or isinstance(value, bool) is not isinstance(member.value, bool):  # true is not 1
            raise _Mismatch(f"must be one of {allowed}{_but(value)}")
        return member

    return check


def _array(item: _Check, length: int | None) -> _Check:
    def check(value: Any) -> Any:
        if type(value) is not list:
            raise _Mismatch(f"must be a list{_but(value)}")
        if length is not None and len(value) != length:
            raise _Mismatch(f"must be a list of {length} items, not {len(value)}")
        try:
            return tuple([item(element) for element in value])
        except _Mismatch as exc:
            raise exc.at(f"[{_first_failing(item, value)}]") from None

    return check


def _first_failing(item: _Check, values: list[Any]) -> int:
    """Index of the first element ``item`` refuses (only called once one did)."""
    for index, value in enumerate(values):
        try:
            item(value)
        except _Mismatch:
            return index
    return -1


_MISSING = object()


def _record(shape: Record, complete: bool) -> _Check:
    fields = [(f.name, "." + f.name, _checker(f.shape, complete), f.required or complete) for f in shape.fields]
    build = shape.cls

    def check(value: Any) -> Any:
        if type(value) is not dict:
            raise _Mismatch(f"must be a JSON object{_but(value)}")
        kwargs = {}
        for name, step, check_field, required in fields:
            given = value.get(name, _MISSING)
            if given is _MISSING:
                if required:
                    raise _Mismatch("is missing").at(step)
                continue
            try:
                kwargs[name] = check_field(given)
            except _Mismatch as exc:
                raise exc.at(step) from None
        return build(**kwargs)

    return check


def _but(value: Any) -> str:
    """``", not <value>"`` for an error message, short and printable; empty for a string not safe to quote."""
    if isinstance(value, dict):
        return ", not an object"
    if isinstance(value, list):
        return ", not a list"
    if value is None or isinstance(value, bool):
        return f", not {json.dumps(value)}"
    if isinstance(value, str):
        quotable = len(value) <= _QUOTED_STRING_CHARACTERS and value.isprintable()
        return f", not {value!r}" if quotable else ""
    text = repr(value)
    return f", not {text}" if len(text) <= _SHOWN_CHARACTERS else f", not {text[: _SHOWN_CHARACTERS - 3]}..."


_ATOMS = frozenset({int, float, str, bool, type(None)})
"""Types written as they are (exact types: a StringEnum member is a ``str`` subclass, also written as it is)."""

_FIELD_NAMES: dict[type, tuple[str, ...] | None] = {}
"""The field names of each type met by :func:`_plain` (None: not a dataclass), looked up once per type."""


def _plain(value: Any) -> Any:
    cls = type(value)
    if cls in _ATOMS:
        return value
    try:
        names = _FIELD_NAMES[cls]
    except KeyError:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(value)) \
            if dataclasses.is_dataclass(value) else None
    if names is not None:
        return {name: _plain(getattr(value, name)) for name in names}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value  # a StringEnum member stays a member: it is a str, and json.dumps writes its value
