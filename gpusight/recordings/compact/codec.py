"""The byte-level coding of the compact format: varints, number cells and static dictionary entries.

A number cell is one unsigned varint ``u`` coded against the cell's previous value (see
``docs/recording.md``):

- ``u == 0``: unchanged (the same value, None included);
- ``u & 3 == 0``: the quantised value changed by ``unzigzag(u >> 2) << shift`` quanta;
- ``u == 1``: None;
- ``u & 3 == 2``: the quantised value is ``unzigzag(u >> 2) << shift`` (after None or an escape);
- ``u & 3 == 3``: an exact float whose IEEE-754 bits differ by ``unzigzag(u >> 2)`` from the previous
  value's bits (0 when that was not a float): any float, NaN and -0.0 included, that the quantum
  cannot hold.

``shift`` is given once per column and snapshot (the trailing zero bits every change in the column
shares, such as 12 for memory that moves in 4 KiB pages); it is 0 for the items of vector columns. A
column's header byte may also say the column is *second order* for this snapshot: its changes are
then coded as differences from each cell's previous change (smooth curves cost less), see
:func:`column_tokens`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import struct
from typing import Any

_DOUBLE = struct.Struct("<d")
_INT64 = struct.Struct("<q")
_MASK64 = (1 << 64) - 1


class CodecError(ValueError):
    """Bytes that do not decode (damage that passed the checksum, or a writer bug)."""


def zigzag(n: int) -> int:
    """Map a signed integer to an unsigned one, small magnitudes to small numbers."""
    return n << 1 if n >= 0 else ((-n) << 1) - 1


def unzigzag(u: int) -> int:
    """Inverse of :func:`zigzag`."""
    return u >> 1 if not u & 1 else -((u + 1) >> 1)


def put_varint(out: bytearray, u: int) -> None:
    """Append unsigned ``u`` as a little-endian base-128 varint."""
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)


MAX_VARINT_BYTES = 1024
"""Longest varint accepted (7168 bits: any integer a model field holds in practice; damage is cut short)."""

MAX_QUANTISED = 1 << 62
"""Quantised floats beyond this magnitude are stored as exact float escapes instead (a few bytes, not hundreds)."""


def get_varint(data: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it; raises :class:`CodecError` past the end."""
    try:
        byte = data[pos]
        if byte < 0x80:
            return byte, pos + 1
        result, shift = byte & 0x7F, 7
        end = pos + MAX_VARINT_BYTES
        pos += 1
        while pos < end:
            byte = data[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return result, pos
            shift += 7
    except IndexError:
        raise CodecError("record cut short") from None
    raise CodecError("varint too long")


def float_bits(value: float) -> int:
    """The IEEE-754 bits of ``value`` as a signed 64-bit integer."""
    bits: int = _INT64.unpack(_DOUBLE.pack(value))[0]
    return bits


def bits_float(bits: int) -> float:
    """The float with IEEE-754 bits ``bits`` (taken modulo 2**64)."""
    bits &= _MASK64
    value: float = _DOUBLE.unpack(_INT64.pack(bits - (1 << 64) if bits >> 63 else bits))[0]
    return value


def _same(value: Any, previous: Any) -> bool:
    """True when ``value`` decodes as ``previous`` unchanged (0.0 and -0.0 differ)."""
    if previous is None or value != previous:
        return False
    return bool(value) or math.copysign(1.0, value) == math.copysign(1.0, previous)


SAME, DELTA, NONE, ABSOLUTE, ESCAPE = -1, 0, 1, 2, 3
"""Cell tags: unchanged, a change in quanta, None, an absolute quantised value, an exact float."""


def quantise_cell(value: Any, previous: Any, previous_q: int | None, divisor: int,
                  is_float: bool) -> tuple[int, int, Any, int | None]:
    """(tag, payload, decoded value, quantised value) of ``value`` coded against the cell's previous state.

    The payload is the change or the absolute value in quanta, or the difference of the float bits. The
    decoded value is what a reader gets back (an int in a float column comes back as a float, as from
    JSON); it becomes the cell's previous value.
    """
    if value is None:
        return (SAME if previous is None else NONE), 0, None, None
    if _same(value, previous):
        return SAME, 0, previous, previous_q
    if not is_float and type(value) is int:
        q: int = value
        decoded: Any = value
    else:
        try:
            q = round(value * divisor)
        except (OverflowError, ValueError, TypeError):
            return _escape(value, previous)
        if abs(q) > MAX_QUANTISED:
            return _escape(value, previous)
        decoded = q / divisor
        if decoded != value or (q == 0 and math.copysign(1.0, value) < 0):
            return _escape(value, previous)
        if not is_float:
            decoded = q = int(value)
    if previous_q is None:
        return ABSOLUTE, q, decoded, q
    return DELTA, q - previous_q, decoded, q


def _escape(value: Any, previous: Any) -> tuple[int, int, Any, int | None]:
    exact = float(value)
    base = float_bits(previous) if type(previous) is float else 0
    return ESCAPE, float_bits(exact) - base, exact, None


def cell_token(tag: int, payload: int, shift: int, second_order: bool = False) -> int:
    """The varint of a quantised cell; changes and absolute values are divided by ``2**shift`` (exactly).

    In a second-order column a change is coded as its difference from the cell's previous change
    (plus one, so that no change of slope is not confused with no change)."""
    if tag == SAME:
        return 0
    if tag == NONE:
        return 1
    if tag == ESCAPE:
        return zigzag(payload) << 2 | 3
    if second_order and tag == DELTA:
        return (zigzag(payload >> shift) + 1) << 2
    return zigzag(payload >> shift) << 2 | tag


SECOND_ORDER = 0x80
"""Flag in a column's header byte: its changes are coded as changes of slope; the low bits are the shift."""


def column_tokens(tags: list[int], first: list[int], second: list[int]) -> tuple[int, list[int]]:
    """The header byte and cell tokens of a scalar column, first or second order, whichever is shorter.

    ``first`` holds each cell's payload (see :func:`quantise_cell`), ``second`` the same with each change
    minus the cell's previous change.
    """
    quantised = [i for i, tag in enumerate(tags) if tag == DELTA or tag == ABSOLUTE]
    shift = common_shift([first[i] for i in quantised])
    tokens = [cell_token(tag, payload, shift) for tag, payload in zip(tags, first, strict=True)]
    if not quantised or first == second:
        return shift, tokens
    shift2 = common_shift([second[i] for i in quantised])
    tokens2 = [cell_token(tag, payload, shift2, True) for tag, payload in zip(tags, second, strict=True)]
    if sum(t.bit_length() for t in tokens2) < sum(t.bit_length() for t in tokens):
        return SECOND_ORDER | shift2, tokens2
    return shift, tokens


MAX_SHIFT = 63
"""Largest shift a column header may give."""


def common_shift(payloads: list[int]) -> int:
    """The number of trailing zero bits all non-zero ``payloads`` share (e.g. 20 for changes in whole MiB)."""
    bits = 0
    for payload in payloads:
        bits |= payload
    if not bits:
        return 0
    return min(MAX_SHIFT, (bits & -bits).bit_length() - 1)


def encode_cell(value: Any, previous: Any, previous_q: int | None, divisor: int, is_float: bool) -> tuple[int, Any, int | None]:
    """(token, decoded value, quantised value) of one cell with no shift (the items of a vector column)."""
    tag, payload, decoded, q = quantise_cell(value, previous, previous_q, divisor, is_float)
    return cell_token(tag, payload, 0), decoded, q


def decode_cell(token: int, previous: Any, previous_q: int | None, divisor: int, is_float: bool,
                shift: int = 0, slope: int | None = None) -> tuple[Any, int | None]:
    """(value, quantised value) of cell ``token`` given the cell's previous state (see the module docstring).

    ``slope`` is given in a second-order column: the cell's previous change (0 when unknown)."""
    tag = token & 3
    if tag == 0:
        if previous_q is None:
            raise CodecError("change to a cell without a quantised value")
        if slope is None:
            q = previous_q + (unzigzag(token >> 2) << shift)
        else:
            q = previous_q + slope + (unzigzag((token >> 2) - 1) << shift)
    elif tag == 2:
        q = unzigzag(token >> 2) << shift
    elif tag == 1:
        return None, None
    else:
        base = float_bits(previous) if type(previous) is float else 0
        return bits_float(base + unzigzag(token >> 2)), None
    return (q / divisor if is_float else q), q


def encode_static(values: tuple[Any, ...]) -> bytes:
    """A static dictionary entry: the values as a JSON list (records as objects, any string exactly)."""
    return json.dumps(values, separators=(",", ":"), default=_record_as_dict).encode("ascii")


def _record_as_dict(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    raise TypeError(f"{type(value).__name__} cannot be recorded")


def decode_static(data: bytes) -> list[Any]:
    """The JSON list of a static dictionary entry (still to be checked against the schema)."""
    try:
        values = json.loads(data.decode("ascii"))
    except (ValueError, RecursionError) as exc:
        raise CodecError(f"dictionary entry not readable ({exc.__class__.__name__})") from None
    if not isinstance(values, list):
        raise CodecError("dictionary entry is not a list")
    return values
