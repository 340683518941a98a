"""JSON records -> :class:`RecordedSpan`: OTLP/JSON requests and the SDK's ``to_json``.

Pure functions over values ``orjson``/``json`` returned; file handling is in :mod:`.readers`,
protobuf in :mod:`.protobuf`. A bad span raises :class:`Bad` naming the field; a bad span
inside a request is passed to ``reject`` and the rest of the request is kept.

Three ways, one result: ``_otlp_json_span`` reads any form and names what is wrong (the
reference); ``_otlp_json_spans`` reads the usual forms of parsed dicts inline and hands any
other span to the reference; ``typed_request`` (with msgspec) decodes a whole request straight
into structs, and gives it back to the dict path when anything in it is unusual.
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
from collections.abc import Callable
from operator import attrgetter
from typing import Any

from opentelemetry.trace import SpanKind, StatusCode

from .spanview import (
    EMPTY_RESOURCE,
    STATUS_ERROR,
    STATUS_OK,
    STATUS_UNSET,
    RecordedContext,
    RecordedEvent,
    RecordedResource,
    RecordedSpan,
    RecordedStatus,
)

try:  # orjson is ~3x faster on these documents; json is the fallback
    import orjson

    _loads: Callable[[bytes], Any] = orjson.loads
except ImportError:  # pragma: no cover - exercised only without orjson
    _loads = json.loads


class Bad(ValueError):
    """A record or span that cannot be read; the message names the field."""


# --- values ------------------------------------------------------------------------------------
_STATUS: dict[Any, RecordedStatus] = {}
for _code, _st in ((StatusCode.UNSET, STATUS_UNSET), (StatusCode.OK, STATUS_OK), (StatusCode.ERROR, STATUS_ERROR)):
    for _k in (_code.value, str(_code.value), _code.name, f"STATUS_CODE_{_code.name}"):
        _STATUS[_k] = _st
_STATUS_CODE = {k: v.status_code for k, v in _STATUS.items()}

_KIND: dict[Any, SpanKind] = {0: SpanKind.INTERNAL, "SPAN_KIND_UNSPECIFIED": SpanKind.INTERNAL}
for _sk in SpanKind:
    for _k in (_sk.value + 1, str(_sk.value + 1), f"SPAN_KIND_{_sk.name}"):
        _KIND[_k] = _sk
_SDK_KIND = {str(k): k for k in SpanKind}  # to_json writes "SpanKind.CLIENT"
_ENTRY_KINDS = (SpanKind.SERVER, SpanKind.CONSUMER)

_HAS_IS_REMOTE = 0x100  # SpanFlags in opentelemetry-proto
_IS_REMOTE = 0x200
REMOTE_PARENT = _HAS_IS_REMOTE | _IS_REMOTE  # flags of a span whose parent is known to be remote


def _hex_id(value: Any, hex_len: int, field: str, required: bool) -> int:
    """An id from OTLP/JSON (hex) or protobuf's JSON mapping (base64); 0 when absent."""
    if not value:
        if required:
            raise Bad(f"missing {field}")
        return 0
    try:
        if len(value) == hex_len:
            n = int(value, 16)
        else:
            raw = base64.b64decode(value, validate=True)
            if len(raw) * 2 != hex_len:
                raise ValueError
            n = int.from_bytes(raw, "big")
    except (ValueError, TypeError):
        raise Bad(f"{field} {str(value)[:40]!r} is neither {hex_len} hex digits nor base64 of {hex_len // 2} bytes") from None
    if required and n == 0:
        raise Bad(f"{field} is all zeros")
    return n


def _any_value(v: Any) -> Any:
    """An OTLP/JSON ``AnyValue`` as the Python value the SDK would hold."""
    if not v:
        return None
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        return int(v["intValue"])
    if "boolValue" in v:
        return v["boolValue"]
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "arrayValue" in v:
        return tuple(_any_value(x) for x in (v["arrayValue"] or {}).get("values") or ())
    if "kvlistValue" in v:
        return {kv["key"]: _any_value(kv.get("value")) for kv in (v["kvlistValue"] or {}).get("values") or ()}
    if "bytesValue" in v:
        return base64.b64decode(v["bytesValue"])
    raise Bad(f"unknown attribute value type {sorted(v)!r}")


def _attributes(kvs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not kvs:
        return out
    for kv in kvs:
        v = kv.get("value")
        s = v.get("stringValue") if v else None  # by far the most common: no call
        out[kv["key"]] = s if s is not None else _any_value(v)
    return out


# --- OTLP JSON ---------------------------------------------------------------------------------
def _status(st: dict[str, Any]) -> RecordedStatus:
    status = _STATUS.get(st.get("code", 0))
    if status is None:
        raise Bad(f"unknown status.code {st.get('code')!r}")
    msg = st.get("message")
    return RecordedStatus(status.status_code, msg) if msg else status


def _events(evs: Any) -> tuple[RecordedEvent, ...]:
    return tuple(RecordedEvent(e.get("name", ""), _attributes(e.get("attributes")), int(e.get("timeUnixNano") or 0))
                 for e in evs)


def _otlp_json_span(s: dict[str, Any], resource: RecordedResource) -> RecordedSpan:
    """One span, every form; the reference the fast path in :func:`_otlp_json_spans` must equal."""
    tid = s.get("traceId")
    sid = s.get("spanId")
    trace_id = int(tid, 16) if tid and len(tid) == 32 else _hex_id(tid, 32, "traceId", True)
    span_id = int(sid, 16) if sid and len(sid) == 16 else _hex_id(sid, 16, "spanId", True)
    if not trace_id or not span_id:
        raise Bad("traceId or spanId is all zeros")
    pid = s.get("parentSpanId")
    parent = None
    if pid:
        parent = RecordedContext(trace_id, int(pid, 16) if len(pid) == 16 else _hex_id(pid, 16, "parentSpanId", True),
                                 (s.get("flags") or 0) & REMOTE_PARENT == REMOTE_PARENT)
    st = s.get("status")
    status = _status(st) if st else STATUS_UNSET
    kind = _KIND.get(s.get("kind", 0))
    if kind is None:
        raise Bad(f"unknown kind {s.get('kind')!r}")
    evs = s.get("events")
    events = _events(evs) if evs else ()
    return RecordedSpan(s.get("name", ""), RecordedContext(trace_id, span_id), parent, kind,
                        int(s.get("startTimeUnixNano") or 0), int(s.get("endTimeUnixNano") or 0), status,
                        _attributes(s.get("attributes")), events, resource)


_SLOW = (ValueError, TypeError, KeyError, AttributeError)  # the fast path gives up; Bad is a ValueError


def _otlp_json_spans(spans: list[Any], resource: RecordedResource, out: list[RecordedSpan],
                     where: str, reject: Callable[[str], None]) -> None:
    """The spans of one ``scopeSpans``, appended to ``out``.

    The common form (hex ids, string values) is read inline; a span the fast path cannot take
    is read again by :func:`_otlp_json_span`, which gives the same span or the error to report.
    Spans of a trace share the parent context of their common parent.
    """
    parents: dict[Any, RecordedContext] = {}
    prev_tid: Any = None
    trace_id = 0
    append = out.append
    for k, s in enumerate(spans):
        try:
            tid = s["traceId"]
            if tid != prev_tid:
                trace_id = int(tid, 16) if len(tid) == 32 else _hex_id(tid, 32, "traceId", True)
                prev_tid = tid if trace_id else None
            sid = s["spanId"]
            span_id = int(sid, 16) if len(sid) == 16 else _hex_id(sid, 16, "spanId", True)
            if not trace_id or not span_id:
                raise Bad("zero id")
            pid = s.get("parentSpanId")
            parent = shared_parent(parents, pid, trace_id, s.get("flags") or 0, _parent_hex) if pid else None
            st = s.get("status")
            evs = s.get("events")
            at = s.get("attributes")
            append(RecordedSpan(
                s.get("name", ""), RecordedContext(trace_id, span_id), parent, _KIND[s.get("kind", 0)],
                int(s.get("startTimeUnixNano") or 0), int(s.get("endTimeUnixNano") or 0),
                _status(st) if st else STATUS_UNSET,
                # string values inline; _any_value takes any other (and raises what _attributes would)
                {kv["key"]: v["stringValue"] if "stringValue" in v else _any_value(v)
                 for kv in at for v in (kv["value"],)} if at else {},
                _events(evs) if evs else (), resource))
        except _SLOW:
            try:
                append(_otlp_json_span(s, resource))
            except (Bad, ValueError, TypeError, KeyError, AttributeError) as exc:
                reject(f"{where}[{k}]: {why(exc)}")


def shared_parent(parents: dict[Any, RecordedContext], key: Any, trace_id: int, flags: int,
                  span_id_of: Callable[[Any], int]) -> RecordedContext:
    """A span's parent context, one per parent within a request (``parents``, keyed by the parent id
    as read); ``span_id_of(key)`` turns the id into an int only when a context is made."""
    if flags & REMOTE_PARENT == REMOTE_PARENT:
        return RecordedContext(trace_id, span_id_of(key), True)
    parent = parents.get(key)
    if parent is None or parent[0] != trace_id:
        parent = parents[key] = RecordedContext(trace_id, span_id_of(key))
    return parent


def _parent_hex(pid: str) -> int:
    return int(pid, 16) if len(pid) == 16 else _hex_id(pid, 16, "", True)


def _otlp_json_request(doc: dict[str, Any], where: str, reject: Callable[[str], None]) -> list[RecordedSpan]:
    out: list[RecordedSpan] = []
    for i, rs in enumerate(doc.get("resourceSpans") or ()):
        try:
            res = rs.get("resource")
            resource = RecordedResource(_attributes(res.get("attributes"))) if res else EMPTY_RESOURCE
        except (Bad, ValueError, TypeError, KeyError, AttributeError) as exc:
            reject(f"{where}: resourceSpans[{i}].resource: {why(exc)}")
            continue
        for j, ss in enumerate(rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or ()):
            spans = ss.get("spans")
            if not spans:
                continue
            if isinstance(spans, list):
                _otlp_json_spans(spans, resource, out, f"{where}: resourceSpans[{i}].scopeSpans[{j}].spans", reject)
                continue
            for k, s in enumerate(spans):  # not a list: every item is rejected, one by one
                try:
                    out.append(_otlp_json_span(s, resource))
                except (Bad, ValueError, TypeError, KeyError, AttributeError) as exc:
                    reject(f"{where}: resourceSpans[{i}].scopeSpans[{j}].spans[{k}]: {why(exc)}")
    return out


# --- OTLP JSON, typed: decoded straight into structs by msgspec (when installed) ----------------
# Same spans as the dict path above for about a third less work: no dict per key/value pair or
# per value, fields skipped without being built. Only the usual forms are typed: a record with
# anything else (a null, an odd type, an unknown value kind, a bad id or number) makes
# ``typed_request`` return None, and the dict path reads it again: same spans, or the error named.
try:
    import msgspec  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - optional: the dict path reads everything
    msgspec = None  # type: ignore[assignment]

typed_request: Callable[[bytes], list[RecordedSpan] | None] | None = None
_RARE_VALUES = ("boolValue", "doubleValue", "arrayValue", "kvlistValue", "bytesValue")

if msgspec is not None:
    _UNSET: Any = msgspec.UNSET

    # gc=False: leaf structs of JSON values hold no cycles, and untracked ones are 5% cheaper here
    class _Value(msgspec.Struct, forbid_unknown_fields=True, gc=False):  # type: ignore[call-arg]
        # an unknown kind is refused (dict path); None: absent (a JSON null is refused)
        stringValue: str = None  # type: ignore[assignment]
        intValue: int | str = None  # type: ignore[assignment]
        boolValue: Any = _UNSET
        doubleValue: Any = _UNSET
        arrayValue: Any = _UNSET
        kvlistValue: Any = _UNSET
        bytesValue: Any = _UNSET

    class _KeyValue(msgspec.Struct, gc=False):  # type: ignore[call-arg]
        key: str
        value: _Value

    class _Status(msgspec.Struct, gc=False):  # type: ignore[call-arg]
        code: int | str = 0
        message: str = ""

    class _Event(msgspec.Struct):
        name: str = ""
        timeUnixNano: int | str = 0
        attributes: list[_KeyValue] = []

    class _Span(msgspec.Struct):
        traceId: str
        spanId: str
        parentSpanId: str = ""
        flags: int = 0
        name: str = ""
        kind: int | str = 0
        startTimeUnixNano: int | str = 0
        endTimeUnixNano: int | str = 0
        attributes: list[_KeyValue] = []
        events: list[_Event] = []
        status: _Status | None = None

    class _ScopeSpans(msgspec.Struct):
        spans: list[_Span] = []

    class _Resource(msgspec.Struct):
        attributes: list[_KeyValue] = []

    class _ResourceSpans(msgspec.Struct):
        resource: _Resource | None = None
        scopeSpans: list[_ScopeSpans] = []
        instrumentationLibrarySpans: list[_ScopeSpans] = []

    class _Request(msgspec.Struct):
        resourceSpans: list[_ResourceSpans]

    _decode_request = msgspec.json.Decoder(_Request).decode
    _new_ids = tuple.__new__  # RecordedContext(trace_id, span_id) without its Python-level __new__

    def _typed_value(v: Any) -> Any:
        """A value that is not a string, as :func:`_any_value` reads it."""
        if v.intValue is not None:
            return int(v.intValue)
        return _any_value({k: x for k in _RARE_VALUES if (x := getattr(v, k)) is not _UNSET})

    def _typed_attributes(kvs: list[Any]) -> dict[str, Any]:
        return {kv.key: v.stringValue if v.stringValue is not None else _typed_value(v)
                for kv in kvs for v in (kv.value,)}

    def _typed_status(st: Any) -> RecordedStatus:
        status = _STATUS[st.code]
        return RecordedStatus(status.status_code, st.message) if st.message else status

    def _typed_spans(spans: list[Any], resource: RecordedResource, out: list[RecordedSpan]) -> None:
        parents: dict[str, RecordedContext] = {}
        prev_tid = ""
        trace_id = 0
        append = out.append
        for s in spans:
            tid = s.traceId
            if tid != prev_tid:
                trace_id = int(tid, 16) if len(tid) == 32 else _hex_id(tid, 32, "traceId", True)
                prev_tid = tid
            sid = s.spanId
            span_id = int(sid, 16) if len(sid) == 16 else _hex_id(sid, 16, "spanId", True)
            if not trace_id or not span_id:
                raise Bad("zero id")
            pid = s.parentSpanId
            parent = shared_parent(parents, pid, trace_id, s.flags, _parent_hex) if pid else None
            st = s.status
            evs = s.events
            at = s.attributes
            append(RecordedSpan(
                s.name, _new_ids(RecordedContext, (trace_id, span_id, False)), parent, _KIND[s.kind],
                int(s.startTimeUnixNano or 0), int(s.endTimeUnixNano or 0),
                STATUS_UNSET if st is None else (_STATUS[st.code] if not st.message else _typed_status(st)),
                {kv.key: v.stringValue if v.stringValue is not None else _typed_value(v)
                 for kv in at for v in (kv.value,)} if at else {},
                tuple(RecordedEvent(e.name, _typed_attributes(e.attributes), int(e.timeUnixNano or 0))
                      for e in evs) if evs else (),
                resource))

    def _typed_request(data: bytes) -> list[RecordedSpan] | None:
        """The spans of one OTLP/JSON request in the usual forms; None: read it the dict way."""
        out: list[RecordedSpan] = []
        try:
            for rs in _decode_request(data).resourceSpans:
                res = rs.resource
                resource = EMPTY_RESOURCE if res is None else RecordedResource(_typed_attributes(res.attributes))
                for ss in rs.scopeSpans or rs.instrumentationLibrarySpans:
                    _typed_spans(ss.spans, resource, out)
        except (*_SLOW, msgspec.MsgspecError):
            return None
        return out

    typed_request = _typed_request


# --- SDK to_json -------------------------------------------------------------------------------
def _iso_ns(value: Any, field: str) -> int:
    if not value:
        return 0
    try:
        t = _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        raise Bad(f"{field} {str(value)[:40]!r} is not an ISO 8601 time") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    delta = t - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def _sdk_value(v: Any) -> Any:
    return tuple(v) if isinstance(v, list) else v  # the SDK holds sequences as tuples


def _sdk_attributes(attrs: Any) -> dict[str, Any]:
    if not attrs:
        return {}
    if not isinstance(attrs, dict):
        raise Bad("attributes is not an object")
    return {k: _sdk_value(v) for k, v in attrs.items()}


def _sdk_span(s: dict[str, Any]) -> RecordedSpan:
    c = s.get("context")
    if not isinstance(c, dict):
        raise Bad("missing context")
    ctx = RecordedContext(_sdk_id(c.get("trace_id"), "context.trace_id", True),
                          _sdk_id(c.get("span_id"), "context.span_id", True))
    kind = _SDK_KIND.get(s.get("kind") or "SpanKind.INTERNAL")
    if kind is None:
        raise Bad(f"unknown kind {s.get('kind')!r}")
    pid = s.get("parent_id")
    # to_json drops is_remote: a server or consumer span is taken as the entry of its service
    parent = RecordedContext(ctx.trace_id, _sdk_id(pid, "parent_id", True), kind in _ENTRY_KINDS) if pid else None
    st = s.get("status") or {}
    code = _STATUS_CODE.get(st.get("status_code", "UNSET"))
    if code is None:
        raise Bad(f"unknown status.status_code {st.get('status_code')!r}")
    desc = st.get("description")
    status = RecordedStatus(code, desc) if desc else _STATUS[code.name]
    res = s.get("resource")
    resource = RecordedResource(_sdk_attributes(res.get("attributes"))) if isinstance(res, dict) else EMPTY_RESOURCE
    events = tuple(RecordedEvent(e.get("name", ""), _sdk_attributes(e.get("attributes")),
                                 _iso_ns(e.get("timestamp"), "events.timestamp")) for e in s.get("events") or ())
    return RecordedSpan(s.get("name") or "", ctx, parent, kind, _iso_ns(s.get("start_time"), "start_time"),
                        _iso_ns(s.get("end_time"), "end_time"), status, _sdk_attributes(s.get("attributes")),
                        events, resource)


def _sdk_id(value: Any, field: str, required: bool) -> int:
    if not isinstance(value, str) or not value:
        raise Bad(f"missing {field}")
    try:
        n = int(value, 16)  # "0x…" is accepted by int(…, 16)
    except ValueError:
        raise Bad(f"{field} {value[:40]!r} is not hex") from None
    if required and n == 0:
        raise Bad(f"{field} is all zeros")
    return n


# --- one parsed JSON value, whatever it holds --------------------------------------------------
def spans_from_json(value: Any, where: str, reject: Callable[[str], None]) -> list[RecordedSpan]:
    if isinstance(value, list):
        out: list[RecordedSpan] = []
        for i, item in enumerate(value):
            out.extend(spans_from_json(item, f"{where}: item {i}", reject))
        return out
    if not isinstance(value, dict):
        raise Bad(f"expected a JSON object, got {type(value).__name__}")
    if "resourceSpans" in value:
        return _otlp_json_request(value, where, reject)
    if "context" in value and "name" in value:
        return [_sdk_span(value)]
    if "resource_spans" in value:
        raise Bad("snake_case OTLP JSON (resource_spans) is not supported: OTLP/JSON uses lowerCamelCase")
    if not value:  # {} is an empty request
        return []
    raise Bad(f"neither an OTLP ExportTraceServiceRequest nor an SDK span (keys: {', '.join(sorted(value)[:5])})")


def why(exc: BaseException) -> str:
    if isinstance(exc, Bad):
        return str(exc)
    if isinstance(exc, KeyError):
        return f"missing {exc}"
    return f"{type(exc).__name__}: {exc}"


def parse(data: bytes) -> Any:
    try:
        return _loads(data)
    except ValueError:
        return json.loads(data)  # orjson refuses what json takes (e.g. ints beyond 64 bits)


end_time: Callable[[RecordedSpan], int] = attrgetter("_end_time")  # sort key, without a Python call
