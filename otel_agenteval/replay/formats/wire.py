"""OTLP protobuf bytes -> :class:`RecordedSpan`, read straight from the wire format.

The fast path of the protobuf reader (``serve`` and protobuf files): one pass over the bytes of an
``ExportTraceServiceRequest``, building only what the engine reads (no upb message, no wrapper
object per attribute, ids read as ints where they lie). It takes the usual forms only; anything
else (a bad or zero id, an unknown kind or status code, a field given twice that protobuf would
merge, a wrong wire type, bad UTF-8, a truncated field, deep nesting) makes :func:`wire_spans`
return None, and :mod:`.protobuf` parses the request with protobuf itself: the same spans, or the
error named. Unknown fields are skipped, as protobuf skips them. The wire format itself (varints,
fields, attribute values) is :mod:`.wire_format`.
"""


from typing import Any, Final

from opentelemetry.trace import SpanKind

from ..spanview import (
    STATUS_UNSET,
    RecordedContext,
    RecordedEvent,
    RecordedResource,
    RecordedScope,
    RecordedSpan,
    RecordedStatus,
)
from .values import _KIND, _STATUS, REMOTE_PARENT, end_time
from .wire_format import ONE_FIELD, Unusual, be64, fixed64, key_value, length, read_tag, skip, varint

# Final: the compiled build holds these in C statics, not looked up in the module's dict per span
_KINDS: Final[dict[Any, SpanKind]] = _KIND  # by OTLP number (and the JSON readers' names)
_REMOTE: Final = REMOTE_PARENT
_UNSET: Final = STATUS_UNSET
_Context: Final = RecordedContext
_Span: Final = RecordedSpan
_new_ids: Final[Any] = tuple.__new__  # RecordedContext(...) without its Python-level __new__

# the fields of each message (see wire_format): x read here, the others checked and passed over
_SPAN_FIELDS: Final = "-xxsxxxxxxvxvLvxx"
_EVENT_FIELDS: Final = "-xxxv"
_STATUS_FIELDS: Final = "--xx"  # 1 is reserved
_RESOURCE_FIELDS: Final = "-xvE"
_RESOURCE_SPANS_FIELDS: Final = "-xxs"
_SCOPE_SPANS_FIELDS: Final = "-Sxs"


def _event(data: bytes, i: int, end: int) -> RecordedEvent:
    name = ""
    when = 0
    attrs: dict[str, Any] = {}
    while i < end:
        tag, i = read_tag(data, i)
        if tag == 0x1A:
            a, i = length(data, i, end)
            key_value(data, a, i, attrs, 0)
        elif tag == 0x09:
            when = fixed64(data, i, end)
            i += 8
        elif tag == 0x12:
            a, i = length(data, i, end)
            name = data[a:i].decode()
        else:
            i = skip(data, i, tag, end, _EVENT_FIELDS)
    if i != end:
        raise Unusual
    return RecordedEvent(name, attrs, when)


def _status(data: bytes, i: int, end: int) -> RecordedStatus:
    code = 0
    message = ""
    while i < end:
        tag, i = read_tag(data, i)
        if tag == 0x18:
            code, i = varint(data, i)
        elif tag == 0x12:
            a, i = length(data, i, end)
            message = data[a:i].decode()
        else:
            i = skip(data, i, tag, end, _STATUS_FIELDS)  # Status: 2 and 3 (1 is reserved)
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
        tag, i = read_tag(data, i)
        if tag == 0x4A:  # attributes: by far the most fields
            a, i = length(data, i, end)
            key_value(data, a, i, attrs, 0)
        elif tag == 0x0A:
            tid, i = length(data, i, end)
            tid_len = i - tid
        elif tag == 0x12:
            sid, i = length(data, i, end)
            sid_len = i - sid
        elif tag == 0x22:
            pid, i = length(data, i, end)
            pid_len = i - pid
        elif tag == 0x2A:
            a, i = length(data, i, end)
            name = data[a:i].decode()
        elif tag == 0x30:
            kind, i = varint(data, i)
        elif tag == 0x39:
            start = fixed64(data, i, end)
            i += 8
        elif tag == 0x41:
            stop = fixed64(data, i, end)
            i += 8
        elif tag == 0x5A:
            a, i = length(data, i, end)
            events.append(_event(data, a, i))
        elif tag == 0x7A:
            if has_status:
                raise Unusual
            has_status = True
            a, i = length(data, i, end)
            status = _status(data, a, i)
        elif tag == 0x85:  # flags: field 16, fixed32 (a two-byte tag)
            if i + 4 > end:
                raise Unusual
            flags = data[i] | data[i + 1] << 8 | data[i + 2] << 16 | data[i + 3] << 24
            i += 4
        else:
            i = skip(data, i, tag, end, _SPAN_FIELDS)  # trace_state, links, dropped counts
    if i != end or tid_len != 16 or sid_len != 8 or (pid_len and pid_len != 8):
        raise Unusual
    raw = data[tid:tid + 16]
    if raw == last[0]:  # the spans of a trace come together: read its id once
        trace_id: int = last[1]
    else:
        trace_id = int.from_bytes(raw, "big")
        last[0] = raw
        last[1] = trace_id
    span_id = be64(data, sid)
    if not trace_id or not span_id:
        raise Unusual
    k = _KINDS.get(kind)
    if k is None:
        raise Unusual
    parent: RecordedContext | None = None
    if pid_len:
        parent_id = be64(data, pid)
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
        tag, i = read_tag(data, i)
        if tag == 0x12:
            scopes.append(length(data, i, end))
            i = scopes[-1][1]
        elif tag == 0x0A:
            if seen:
                raise Unusual
            seen = True
            a, i = length(data, i, end)
            while a < i:
                t, a = read_tag(data, a)
                # attributes; else the dropped count, entity_refs
                a = _attributes_at(data, a, i, attrs) if t == 0x0A else skip(data, a, t, i, _RESOURCE_FIELDS)
            if a != i:
                raise Unusual
        else:
            i = skip(data, i, tag, end, _RESOURCE_SPANS_FIELDS)  # schema_url
    if i != end:
        raise Unusual
    resource = RecordedResource(attrs)
    parents: dict[int, RecordedContext] = {}
    last: list[Any] = [b"", 0]  # the trace id read last: (bytes, int)
    append = out.append
    for a, stop in scopes:
        first = len(out)
        scope: RecordedScope | None = None
        while a < stop:
            t, a = read_tag(data, a)
            if t == 0x12:
                b, a = length(data, a, stop)
                append(_span(data, b, a, resource, parents, last))
            elif t == 0x0A:
                b = a
                a = skip(data, a, t, stop, _SCOPE_SPANS_FIELDS)  # checked as protobuf checks it, then read
                c, e = length(data, b, a)
                scope = _scope(data, c, e)
            else:
                a = skip(data, a, t, stop, _SCOPE_SPANS_FIELDS)  # schema_url
        if a != stop:
            raise Unusual
        if scope is not None:
            for k in range(first, len(out)):
                out[k]._instrumentation_scope = scope


def _scope(data: bytes, i: int, end: int) -> RecordedScope | None:
    """An ``InstrumentationScope``: its name and version (None when it has no name)."""
    fields: dict[int, str] = {}
    while i < end:
        t, i = read_tag(data, i)
        if t == 0x0A or t == 0x12:
            a, i = length(data, i, end)
            fields[t] = data[a:i].decode()
        else:
            i = skip(data, i, t, end, ONE_FIELD)  # attributes, dropped count (checked by the caller)
    name = fields.get(0x0A)
    return RecordedScope(name, fields.get(0x12, "")) if name else None


def _attributes_at(data: bytes, i: int, end: int, out: dict[str, Any]) -> int:
    a, stop = length(data, i, end)
    key_value(data, a, stop, out, 0)
    return stop


def wire_spans(data: bytes) -> list[RecordedSpan] | None:
    """The spans of one serialised ``ExportTraceServiceRequest``, sorted by end time; None when
    the request holds anything but the usual forms (then protobuf reads it)."""
    out: list[RecordedSpan] = []
    end = len(data)
    i = 0
    try:
        while i < end:
            tag, i = read_tag(data, i)
            if tag == 0x0A:
                a, i = length(data, i, end)
                _resource_spans(data, a, i, out)
            else:
                i = skip(data, i, tag, end, ONE_FIELD)
        if i != end:
            raise Unusual
    except (Unusual, IndexError, ValueError, RecursionError):  # ValueError: bad UTF-8
        return None
    if len(out) > 1:
        out.sort(key=end_time)
    return out
