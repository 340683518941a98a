"""The protobuf wire format as OTLP uses it: varints, lengths, tags, fields passed over as protobuf
checks them, and ``AnyValue``/``KeyValue`` read into the values the SDK holds.

The layer under :mod:`.wire` (the messages of a request). Positions are ints into one ``bytes``;
each reader takes ``(data, start, end)`` and raises :class:`Unusual` for anything it leaves to
protobuf (a wrong wire type, a field given twice that protobuf would merge, a truncated field,
bad UTF-8 is a ``ValueError``, past the end an ``IndexError``).
"""

from __future__ import annotations

from struct import unpack_from
from sys import intern
from typing import Any, Final

# attribute keys as read, decoded once and interned (the engine's names); first come, first
# kept: past _MAX_KEYS the others are decoded each time
_KEYS: Final[dict[bytes, str]] = {}
_MAX_KEYS: Final = 4096
_MAX_KEY_BYTES: Final = 128
_NEG: Final = 1 << 63
_MAX_DEPTH: Final = 16  # nested array / kvlist values; deeper ones are left to protobuf

# what each field of a message is, by field number: read by the caller (x: a field with another
# wire type is unusual), or checked as protobuf checks it and then passed over: v varint,
# 4 fixed32, b bytes, s string (UTF-8), k KeyValue, L Link, S InstrumentationScope, E EntityRef;
# - not defined (skipped by its wire type)
KV_FIELDS: Final = "-xxv"  # key_strindex: not read (the reference reads the key)
ONE_FIELD: Final = "-x"  # ExportTraceServiceRequest, ArrayValue, KeyValueList
_LINK_FIELDS: Final = "-bbskv4"
_SCOPE_FIELDS: Final = "-sskv"
_ENTITY_REF_FIELDS: Final = "-ssss"
_WIRE: Final = {"v": 0, "4": 5, "b": 2, "s": 2, "k": 2, "L": 2, "S": 2, "E": 2}
_CHECKED: Final = {"L": _LINK_FIELDS, "S": _SCOPE_FIELDS, "E": _ENTITY_REF_FIELDS}


class Unusual(Exception):
    """A form this reader leaves to protobuf."""


def varint(data: bytes, i: int) -> tuple[int, int]:
    """(value, next position); :class:`IndexError` past the end of ``data``."""
    b = data[i]
    if b < 0x80:
        return b, i + 1
    n = b & 0x7F
    shift = 7
    i += 1
    while True:
        b = data[i]
        i += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            if n >> 64:
                raise Unusual  # past 64 bits
            return n, i
        shift += 7
        if shift > 63:
            raise Unusual


def length(data: bytes, i: int, end: int) -> tuple[int, int]:
    """(start, stop) of a length-delimited field whose length is at ``i``, inside ``end``; protobuf
    reads a length in at most 5 bytes (it refuses the message else)."""
    n, j = varint(data, i)
    stop = j + n
    if stop > end or j - i > 5:
        raise Unusual
    return j, stop


def skip(data: bytes, i: int, tag: int, end: int, fields: str) -> int:
    """Past a field not read (``tag`` read): an undefined one by its wire type; a defined one
    checked as protobuf checks it when it parses the message (a wrong wire type is unusual)."""
    wire = tag & 7
    number = tag >> 3
    what = fields[number] if number < len(fields) else "-"
    if number == 0:
        raise Unusual  # protobuf refuses field 0
    if what == "-":
        if wire == 0:
            _, i = varint(data, i)
        elif wire == 1:
            i += 8
        elif wire == 2:
            _, i = length(data, i, end)
        elif wire == 5:
            i += 4
        else:
            raise Unusual  # groups
        if i > end:
            raise Unusual
        return i
    if what == "x" or _WIRE[what] != wire:
        raise Unusual
    if wire == 0:
        _, i = varint(data, i)
    elif wire == 5:
        i += 4
    else:
        a, i = length(data, i, end)
        if what == "s":
            data[a:i].decode()
        elif what == "k":
            key_value(data, a, i, {}, 0)
        elif what != "b":
            _check(data, a, i, _CHECKED[what])
    if i > end:
        raise Unusual
    return i


def _check(data: bytes, i: int, end: int, fields: str) -> None:
    """A message that is not read, checked field by field."""
    while i < end:
        tag, i = read_tag(data, i)
        i = skip(data, i, tag, end, fields)
    if i != end:
        raise Unusual


def read_tag(data: bytes, i: int) -> tuple[int, int]:
    """A field's tag, as protobuf reads one: at most 5 bytes and 32 bits (it refuses the message else)."""
    t = data[i]
    if t < 0x80:
        return t, i + 1
    tag, j = varint(data, i)
    if j - i > 5 or tag > 0xFFFFFFFF:
        raise Unusual
    return tag, j


def fixed64(data: bytes, i: int, end: int) -> int:
    if i + 8 > end:
        raise Unusual
    # by hand: int.from_bytes is a method call that parses its arguments, ~10x the work
    return ((data[i + 4] | data[i + 5] << 8 | data[i + 6] << 16 | data[i + 7] << 24) << 32
            | data[i] | data[i + 1] << 8 | data[i + 2] << 16 | data[i + 3] << 24)


def be64(data: bytes, i: int) -> int:
    """8 bytes at ``i`` (inside the message: checked by the caller), big-endian."""
    hi = data[i] << 24 | data[i + 1] << 16 | data[i + 2] << 8 | data[i + 3]
    lo = data[i + 4] << 24 | data[i + 5] << 16 | data[i + 6] << 8 | data[i + 7]
    return hi << 32 | lo  # past 62 bits the one shift and one or make a long: do it once


def _value(data: bytes, i: int, end: int, depth: int) -> Any:
    """An ``AnyValue`` as the Python value the SDK holds; None when no value is set."""
    v: Any = None
    fields = 0
    while i < end:
        tag, i = read_tag(data, i)
        fields += 1
        if tag == 0x0A:
            a, i = length(data, i, end)
            v = data[a:i].decode()
        elif tag == 0x18:
            n, i = varint(data, i)
            v = n - (_NEG << 1) if n >= _NEG else n
        elif tag == 0x10:
            n, i = varint(data, i)
            v = n != 0
        elif tag == 0x21:
            if i + 8 > end:
                raise Unusual
            v = unpack_from("<d", data, i)[0]
            i += 8
        elif tag == 0x2A or tag == 0x32:
            if depth >= _MAX_DEPTH:
                raise Unusual
            a, i = length(data, i, end)
            v = _array(data, a, i, depth + 1) if tag == 0x2A else _kvlist(data, a, i, depth + 1)
        elif tag == 0x3A:
            a, i = length(data, i, end)
            v = data[a:i]
        else:
            raise Unusual  # string_value_strindex, or a field AnyValue does not have
    if fields > 1 or i != end:  # a oneof set twice (protobuf keeps the last, merging messages)
        raise Unusual
    return v


def _array(data: bytes, i: int, end: int, depth: int) -> tuple[Any, ...]:
    out: list[Any] = []
    while i < end:
        tag, i = read_tag(data, i)
        if tag != 0x0A:
            i = skip(data, i, tag, end, ONE_FIELD)
            continue
        a, i = length(data, i, end)
        out.append(_value(data, a, i, depth))
    if i != end:
        raise Unusual
    return tuple(out)


def _kvlist(data: bytes, i: int, end: int, depth: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    while i < end:
        tag, i = read_tag(data, i)
        if tag != 0x0A:
            i = skip(data, i, tag, end, ONE_FIELD)
            continue
        a, i = length(data, i, end)
        key_value(data, a, i, out, depth)
    if i != end:
        raise Unusual
    return out


def key_value(data: bytes, i: int, end: int, out: dict[str, Any], depth: int) -> None:
    """One ``KeyValue`` into ``out`` (a later key replaces an earlier one, as the SDK's dict does)."""
    key = ""
    value: Any = None
    seen = False
    while i < end:
        tag, i = read_tag(data, i)
        if tag == 0x0A:
            a, i = length(data, i, end)
            raw = data[a:i]
            got = _KEYS.get(raw)
            if got is None:
                key = raw.decode()
                if len(_KEYS) < _MAX_KEYS and i - a <= _MAX_KEY_BYTES:
                    key = _KEYS[raw] = intern(key)
            else:
                key = got
        elif tag == 0x12:
            if seen:
                raise Unusual  # protobuf merges a message given twice
            seen = True
            a, i = length(data, i, end)
            if i - a > 2 and data[a] == 0x0A:  # the usual value, a string: read inline
                n, b = varint(data, a + 1)
                if b + n == i and b - a <= 6:  # a length of at most 5 bytes, as above
                    value = data[b:i].decode()
                    continue
            value = _value(data, a, i, depth)
        else:
            i = skip(data, i, tag, end, KV_FIELDS)
    if i != end:
        raise Unusual
    out[key] = value
