"""OTLP/JSON requests (parsed dicts) -> :class:`RecordedSpan`, the reference reader.

``_otlp_json_span`` reads any form and names what is wrong; ``_otlp_json_spans`` reads the usual
forms of a ``scopeSpans`` inline and hands any other span to the reference. A bad span is passed
to ``reject`` and the rest of the request is kept. The typed fast path is :mod:`.typed_json`.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from ..spanview import (
    EMPTY_RESOURCE,
    STATUS_UNSET,
    RecordedContext,
    RecordedEvent,
    RecordedResource,
    RecordedScope,
    RecordedSpan,
    RecordedStatus,
)
from .values import _KIND, _SLOW, _STATUS, REMOTE_PARENT, Bad, shared_parent, why


def _hex_id(value: Any, hex_len: int, field: str, required: bool) -> int:
    """An id from OTLP/JSON (hex) or protobuf's JSON mapping (base64); 0 when absent. Hex means hex
    digits only: ``int(…, 16)`` would also take ``-``, ``+``, ``0x``, ``_`` and spaces."""
    if not value:
        if required:
            raise Bad(f"missing {field}")
        return 0
    try:
        if len(value) == hex_len:
            raw = bytes.fromhex(value)  # which skips spaces between bytes: the length check catches them
            if len(raw) * 2 != hex_len:
                raise ValueError
            n = int.from_bytes(raw, "big")
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


MAX_VALUE_DEPTH = 64  # arrays and kvlists inside one attribute value (the SDK makes none nested)


def _any_value(v: Any, depth: int = 0) -> Any:
    """An OTLP/JSON ``AnyValue`` as the Python value the SDK would hold."""
    if depth > MAX_VALUE_DEPTH:
        raise Bad(f"attribute value nested too deep: more than {MAX_VALUE_DEPTH} arrayValue/kvlistValue levels")
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
        return tuple(_any_value(x, depth + 1) for x in (v["arrayValue"] or {}).get("values") or ())
    if "kvlistValue" in v:
        return {kv["key"]: _any_value(kv.get("value"), depth + 1)
                for kv in (v["kvlistValue"] or {}).get("values") or ()}
    if "bytesValue" in v:
        return base64.b64decode(v["bytesValue"])
    raise Bad(f"unknown attribute value type {sorted(v)!r}")


def _attributes(kvs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not kvs:
        return out
    if not isinstance(kvs, list):
        raise Bad(f"attributes is a JSON {type(kvs).__name__}, expected a list")
    for kv in kvs:
        v = kv.get("value")
        s = v.get("stringValue") if v else None  # by far the most common: no call
        out[kv["key"]] = s if s is not None else _any_value(v)
    return out


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
    trace_id = _hex_id(tid, 32, "traceId", True)
    span_id = _hex_id(sid, 16, "spanId", True)
    if not trace_id or not span_id:
        raise Bad("traceId or spanId is all zeros")
    pid = s.get("parentSpanId")
    parent = None
    if pid:
        parent = RecordedContext(trace_id, _hex_id(pid, 16, "parentSpanId", False),  # zeros: as the fast path
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



def _otlp_json_spans(spans: list[Any], resource: RecordedResource, out: list[RecordedSpan],
                     where: str, reject: Callable[[str], None], scope: RecordedScope | None = None) -> None:
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
                trace_id = _hex_id(tid, 32, "traceId", True)  # once a trace
                prev_tid = tid if trace_id else None
            sid = s["spanId"]
            span_id = (int.from_bytes(raw, "big") if len(sid) == 16 and len(raw := bytes.fromhex(sid)) == 8
                       else _hex_id(sid, 16, "spanId", True))  # hex digits only: int(sid, 16) takes "-", "0x"
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
                _events(evs) if evs else (), resource, scope))
        except _SLOW:
            try:
                append(_otlp_json_span(s, resource))
            except (Bad, ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
                reject(f"{where}[{k}]: {why(exc)}")


def _scope(value: Any) -> RecordedScope | None:
    """A ``scopeSpans``' instrumentation scope (None: none, or not an object with a string name)."""
    name = value.get("name") if isinstance(value, dict) else None
    return RecordedScope(name, str(value.get("version") or "")) if isinstance(name, str) and name else None


def _parent_hex(pid: str) -> int:
    """A parent id of the fast paths: 16 hex digits (ValueError otherwise: the reference names it), or base64."""
    if len(pid) == 16 and len(raw := bytes.fromhex(pid)) == 8:  # fromhex skips spaces between bytes
        return int.from_bytes(raw, "big")
    return _hex_id(pid, 16, "", True)



def _list(value: Any, field: str) -> Any:
    """A repeated field: a list, or absent/null (an empty tuple); anything else names the field (a
    15 MiB string is not walked character by character)."""
    if not value:
        return ()
    if not isinstance(value, list):
        raise Bad(f"{field} is a JSON {type(value).__name__}, expected a list")
    return value


def otlp_json_request(doc: dict[str, Any], where: str, reject: Callable[[str], None]) -> list[RecordedSpan]:
    """Spans of one request; a bad span goes to ``reject``, a request whose structure is not OTLP's
    (``resourceSpans``, ``scopeSpans`` or ``spans`` not a list) raises :class:`Bad` naming the field."""
    out: list[RecordedSpan] = []
    for i, rs in enumerate(_list(doc.get("resourceSpans"), "resourceSpans")):
        if not isinstance(rs, dict):
            raise Bad(f"resourceSpans[{i}] is a JSON {type(rs).__name__}, expected an object")
        try:
            res = rs.get("resource")
            resource = RecordedResource(_attributes(res.get("attributes"))) if res else EMPTY_RESOURCE
        except (Bad, ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
            reject(f"{where}: resourceSpans[{i}].resource: {why(exc)}")
            continue
        scopes = rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans")
        for j, ss in enumerate(_list(scopes, f"resourceSpans[{i}].scopeSpans")):
            if not isinstance(ss, dict):
                raise Bad(f"resourceSpans[{i}].scopeSpans[{j}] is a JSON {type(ss).__name__}, expected an object")
            spans = _list(ss.get("spans"), f"resourceSpans[{i}].scopeSpans[{j}].spans")
            if spans:
                _otlp_json_spans(spans, resource, out, f"{where}: resourceSpans[{i}].scopeSpans[{j}].spans", reject,
                                 _scope(ss.get("scope")))
    return out


