"""OTLP protobuf bytes -> :class:`RecordedSpan`, read straight from the wire format.

The fast path of the protobuf reader (``serve`` and protobuf files): one pass over the bytes of an
``ExportTraceServiceRequest``, building only what the engine reads (no upb message, no wrapper
object per attribute, ids read as ints where they lie). It takes the usual forms only; anything
else (a bad or zero id, an unknown kind or status code, a field given twice that protobuf would
merge, a wrong wire type, bad UTF-8, a truncated field, deep nesting) makes :func:`wire_spans`
return None, and :mod:`.protobuf` parses the request with protobuf itself: the same spans, or the
error named. Unknown fields are skipped, as protobuf skips them.
"""

from __future__ import annotations

from struct import unpack_from
from sys import intern
from typing import Any, Final

from opentelemetry.trace import SpanKind

from .decode import _STATUS, REMOTE_PARENT, end_time
from .spanview import STATUS_UNSET, RecordedContext, RecordedEvent, RecordedResource, RecordedSpan, RecordedStatus

# Final: the compiled build holds these in C statics, not looked up in the module's dict per span
_KINDS: Final[dict[int, SpanKind]] = {0: SpanKind.INTERNAL, **{k.value + 1: k for k in SpanKind}}
_REMOTE: Final = REMOTE_PARENT
_UNSET: Final = STATUS_UNSET
_Context: Final = RecordedContext
_Span: Final = RecordedSpan
_KEYS: Final[dict[bytes, str]] = {}  # attribute keys as read, decoded once (and interned: the engine's names)
_MAX_KEYS: Final = 4096
_MAX_KEY_BYTES: Final = 128
_NEG: Final = 1 << 63
_MAX_DEPTH: Final = 16  # nested array / kvlist values; deeper ones are left to protobuf
_new_ids: Final[Any] = tuple.__new__  # RecordedContext(...) without its Python-level __new__

# what each field of a message is, by field number: read here (x: a field with another wire
# type is unusual), or checked as protobuf checks it and then passed over: v varint, 4 fixed32,
# b bytes, s string (UTF-8), k KeyValue, L Link, S InstrumentationScope, E EntityRef; - not defined
_SPAN_FIELDS: Final = "-xxsxxxxxxvxvLvxx"
_EVENT_FIELDS: Final = "-xxxv"
_KV_FIELDS: Final = "-xxv"  # key_strindex: not read (the reference reads the key)
_STATUS_FIELDS: Final = "--xx"  # 1 is reserved
_RESOURCE_FIELDS: Final = "-xvE"
_RESOURCE_SPANS_FIELDS: Final = "-xxs"
_SCOPE_SPANS_FIELDS: Final = "-Sxs"
_ONE: Final = "-x"  # ExportTraceServiceRequest, ArrayValue, KeyValueList
_LINK_FIELDS: Final = "-bbskv4"
_SCOPE_FIELDS: Final = "-sskv"
_ENTITY_REF_FIELDS: Final = "-ssss"
_WIRE = {"v": 0, "4": 5, "b": 2, "s": 2, "k": 2, "L": 2, "S": 2, "E": 2}
_CHECKED = {"L": _LINK_FIELDS, "S": _SCOPE_FIELDS, "E": _ENTITY_REF_FIELDS}


class Unusual(Exception):
    """A form this reader leaves to protobuf."""


def _varint(data: bytes, i: int) -> tuple[int, int]:
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


def _length(data: bytes, i: int, end: int) -> tuple[int, int]:
    """(start, stop) of a length-delimited field whose length is at ``i``, inside ``end``."""
    n, i = _varint(data, i)
    stop = i + n
    if stop > end:
        raise Unusual
    return i, stop


def _skip(data: bytes, i: int, tag: int, end: int, fields: str) -> int:
    """Past a field not read (``tag`` read): an undefined one by its wire type; a defined one
    checked as protobuf checks it when it parses the message (a wrong wire type is unusual)."""
    wire = tag & 7
    number = tag >> 3
    what = fields[number] if number < len(fields) else "-"
    if number == 0:
        raise Unusual  # protobuf refuses field 0
    if what == "-":
        if wire == 0:
            _, i = _varint(data, i)
        elif wire == 1:
            i += 8
        elif wire == 2:
            _, i = _length(data, i, end)
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
        _, i = _varint(data, i)
    elif wire == 5:
        i += 4
    else:
        a, i = _length(data, i, end)
        if what == "s":
            data[a:i].decode()
        elif what == "k":
            _key_value(data, a, i, {}, 0)
        elif what != "b":
            _check(data, a, i, _CHECKED[what])
    if i > end:
        raise Unusual
    return i


def _check(data: bytes, i: int, end: int, fields: str) -> None:
    """A message that is not read, checked field by field."""
    while i < end:
        tag, i = _tag(data, i)
        i = _skip(data, i, tag, end, fields)
    if i != end:
        raise Unusual


def _tag(data: bytes, i: int) -> tuple[int, int]:
    t = data[i]
    if t < 0x80:
        return t, i + 1
    return _varint(data, i)


def _fixed64(data: bytes, i: int, end: int) -> int:
    if i + 8 > end:
        raise Unusual
    # by hand: int.from_bytes is a method call that parses its arguments, ~10x the work
    return ((data[i + 4] | data[i + 5] << 8 | data[i + 6] << 16 | data[i + 7] << 24) << 32
            | data[i] | data[i + 1] << 8 | data[i + 2] << 16 | data[i + 3] << 24)


def _be64(data: bytes, i: int) -> int:
    """8 bytes at ``i`` (inside the message: checked by the caller), big-endian."""
    hi = data[i] << 24 | data[i + 1] << 16 | data[i + 2] << 8 | data[i + 3]
    lo = data[i + 4] << 24 | data[i + 5] << 16 | data[i + 6] << 8 | data[i + 7]
    return hi << 32 | lo  # past 62 bits the one shift and one or make a long: do it once


def _value(data: bytes, i: int, end: int, depth: int) -> Any:
    """An ``AnyValue`` as the Python value the SDK holds; None when no value is set."""
    v: Any = None
    fields = 0
    while i < end:
        tag, i = _tag(data, i)
        fields += 1
        if tag == 0x0A:
            a, i = _length(data, i, end)
            v = data[a:i].decode()
        elif tag == 0x18:
            n, i = _varint(data, i)
            v = n - (_NEG << 1) if n >= _NEG else n
        elif tag == 0x10:
            n, i = _varint(data, i)
            v = n != 0
        elif tag == 0x21:
            if i + 8 > end:
                raise Unusual
            v = unpack_from("<d", data, i)[0]
            i += 8
        elif tag == 0x2A or tag == 0x32:
            if depth >= _MAX_DEPTH:
                raise Unusual
            a, i = _length(data, i, end)
            v = _array(data, a, i, depth + 1) if tag == 0x2A else _kvlist(data, a, i, depth + 1)
        elif tag == 0x3A:
            a, i = _length(data, i, end)
            v = data[a:i]
        else:
            raise Unusual  # string_value_strindex, or a field AnyValue does not have
    if fields > 1 or i != end:  # a oneof set twice (protobuf keeps the last, merging messages)
        raise Unusual
    return v


def _array(data: bytes, i: int, end: int, depth: int) -> tuple[Any, ...]:
    out: list[Any] = []
    while i < end:
        tag, i = _tag(data, i)
        if tag != 0x0A:
            i = _skip(data, i, tag, end, _ONE)
            continue
        a, i = _length(data, i, end)
        out.append(_value(data, a, i, depth))
    if i != end:
        raise Unusual
    return tuple(out)


def _kvlist(data: bytes, i: int, end: int, depth: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    while i < end:
        tag, i = _tag(data, i)
        if tag != 0x0A:
            i = _skip(data, i, tag, end, _ONE)
            continue
        a, i = _length(data, i, end)
        _key_value(data, a, i, out, depth)
    if i != end:
        raise Unusual
    return out


def _key_value(data: bytes, i: int, end: int, out: dict[str, Any], depth: int) -> None:
    """One ``KeyValue`` into ``out`` (a later key replaces an earlier one, as the SDK's dict does)."""
    key = ""
    value: Any = None
    seen = False
    while i < end:
        tag, i = _tag(data, i)
        if tag == 0x0A:
            a, i = _length(data, i, end)
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
            a, i = _length(data, i, end)
            if i - a > 2 and data[a] == 0x0A:  # the usual value, a string: read inline
                n, b = _varint(data, a + 1)
                if b + n == i:
                    value = data[b:i].decode()
                    continue
            value = _value(data, a, i, depth)
        else:
            i = _skip(data, i, tag, end, _KV_FIELDS)
    if i != end:
        raise Unusual
    out[key] = value


def _event(data: bytes, i: int, end: int) -> RecordedEvent:
    name = ""
    when = 0
    attrs: dict[str, Any] = {}
    while i < end:
        tag, i = _tag(data, i)
        if tag == 0x1A:
            a, i = _length(data, i, end)
            _key_value(data, a, i, attrs, 0)
        elif tag == 0x09:
            when = _fixed64(data, i, end)
            i += 8
        elif tag == 0x12:
            a, i = _length(data, i, end)
            name = data[a:i].decode()
        else:
            i = _skip(data, i, tag, end, _EVENT_FIELDS)
    if i != end:
        raise Unusual
    return RecordedEvent(name, attrs, when)


def _status(data: bytes, i: int, end: int) -> RecordedStatus:
    code = 0
    message = ""
    while i < end:
        tag, i = _tag(data, i)
        if tag == 0x18:
            code, i = _varint(data, i)
        elif tag == 0x12:
            a, i = _length(data, i, end)
            message = data[a:i].decode()
        else:
            i = _skip(data, i, tag, end, _STATUS_FIELDS)  # Status: 2 and 3 (1 is reserved)
    status = _STATUS.get(code)
    if status is None or i != end:
        raise Unusual  # an unknown code: the reference names it
    return RecordedStatus(status.status_code, message) if message else status


def _span(data: bytes, i: int, end: int, resource: RecordedResource, parents: dict[int, RecordedContext],
          last: list[Any]) -> RecordedSpan:
    tid = sid = pid = tid_len = sid_len = pid_len = 0  # where the ids are, and their sizes
    name = ""
    kind = 0
    start = stop = flags = 0
    attrs: dict[str, Any] = {}
    events: list[RecordedEvent] = []
    status = _UNSET
    has_status = False
    while i < end:
        tag, i = _tag(data, i)
        if tag == 0x4A:  # attributes: by far the most fields
            a, i = _length(data, i, end)
            _key_value(data, a, i, attrs, 0)
        elif tag == 0x0A:
            tid, i = _length(data, i, end)
            tid_len = i - tid
        elif tag == 0x12:
            sid, i = _length(data, i, end)
            sid_len = i - sid
        elif tag == 0x22:
            pid, i = _length(data, i, end)
            pid_len = i - pid
        elif tag == 0x2A:
            a, i = _length(data, i, end)
            name = data[a:i].decode()
        elif tag == 0x30:
            kind, i = _varint(data, i)
        elif tag == 0x39:
            start = _fixed64(data, i, end)
            i += 8
        elif tag == 0x41:
            stop = _fixed64(data, i, end)
            i += 8
        elif tag == 0x5A:
            a, i = _length(data, i, end)
            events.append(_event(data, a, i))
        elif tag == 0x7A:
            if has_status:
                raise Unusual
            has_status = True
            a, i = _length(data, i, end)
            status = _status(data, a, i)
        elif tag == 0x85:  # flags: field 16, fixed32 (a two-byte tag)
            if i + 4 > end:
                raise Unusual
            flags = data[i] | data[i + 1] << 8 | data[i + 2] << 16 | data[i + 3] << 24
            i += 4
        else:
            i = _skip(data, i, tag, end, _SPAN_FIELDS)  # trace_state, links, dropped counts
    if i != end or tid_len != 16 or sid_len != 8 or (pid_len and pid_len != 8):
        raise Unusual
    raw = data[tid:tid + 16]
    if raw == last[0]:  # the spans of a trace come together: read its id once
        trace_id: int = last[1]
    else:
        trace_id = int.from_bytes(raw, "big")
        last[0] = raw
        last[1] = trace_id
    span_id = _be64(data, sid)
    if not trace_id or not span_id:
        raise Unusual
    k = _KINDS.get(kind)
    if k is None:
        raise Unusual
    parent: RecordedContext | None = None
    if pid_len:
        parent_id = _be64(data, pid)
        if flags & _REMOTE == _REMOTE:
            parent = _new_ids(_Context, (trace_id, parent_id, True))
        else:  # one context per parent within a request, as the other readers share them
            parent = parents.get(parent_id)
            if parent is None or parent[0] != trace_id:
                parent = parents[parent_id] = _new_ids(_Context, (trace_id, parent_id, False))
    return _Span(name, _new_ids(_Context, (trace_id, span_id, False)), parent, k, start, stop,
                        status, attrs, tuple(events) if events else (), resource)


def _resource_spans(data: bytes, i: int, end: int, out: list[RecordedSpan]) -> None:
    attrs: dict[str, Any] = {}
    scopes: list[tuple[int, int]] = []
    seen = False
    while i < end:  # the resource may come after its spans: read it first
        tag, i = _tag(data, i)
        if tag == 0x12:
            scopes.append(_length(data, i, end))
            i = scopes[-1][1]
        elif tag == 0x0A:
            if seen:
                raise Unusual
            seen = True
            a, i = _length(data, i, end)
            while a < i:
                t, a = _tag(data, a)
                # attributes; else the dropped count, entity_refs
                a = _attributes_at(data, a, i, attrs) if t == 0x0A else _skip(data, a, t, i, _RESOURCE_FIELDS)
            if a != i:
                raise Unusual
        else:
            i = _skip(data, i, tag, end, _RESOURCE_SPANS_FIELDS)  # schema_url
    if i != end:
        raise Unusual
    resource = RecordedResource(attrs)
    parents: dict[int, RecordedContext] = {}
    last: list[Any] = [b"", 0]  # the trace id read last: (bytes, int)
    append = out.append
    for a, stop in scopes:
        while a < stop:
            t, a = _tag(data, a)
            if t == 0x12:
                b, a = _length(data, a, stop)
                append(_span(data, b, a, resource, parents, last))
            else:
                a = _skip(data, a, t, stop, _SCOPE_SPANS_FIELDS)  # scope, schema_url
        if a != stop:
            raise Unusual


def _attributes_at(data: bytes, i: int, end: int, out: dict[str, Any]) -> int:
    a, stop = _length(data, i, end)
    _key_value(data, a, stop, out, 0)
    return stop


def wire_spans(data: bytes) -> list[RecordedSpan] | None:
    """The spans of one serialised ``ExportTraceServiceRequest``, sorted by end time; None when
    the request holds anything but the usual forms (then protobuf reads it)."""
    out: list[RecordedSpan] = []
    end = len(data)
    i = 0
    try:
        while i < end:
            tag, i = _tag(data, i)
            if tag == 0x0A:
                a, i = _length(data, i, end)
                _resource_spans(data, a, i, out)
            else:
                i = _skip(data, i, tag, end, _ONE)
        if i != end:
            raise Unusual
    except (Unusual, IndexError, ValueError, RecursionError):  # ValueError: bad UTF-8
        return None
    if len(out) > 1:
        out.sort(key=end_time)
    return out
