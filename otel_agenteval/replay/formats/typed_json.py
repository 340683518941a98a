"""OTLP/JSON requests decoded straight into structs by msgspec (when installed) -> :class:`RecordedSpan`.

The fast path of JSON reading: :func:`typed_request` returns the spans of a request in the usual
forms, or None, and :mod:`.otlp_json` (the reference) reads it again: the same spans, or the error
named.
"""

from __future__ import annotations

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
from .otlp_json import _any_value, _hex_id, _parent_hex
from .values import _KIND, _SLOW, _STATUS, Bad, shared_parent

# Same spans as the dict path (:mod:`.otlp_json`) for about a third less work: no dict per key/value pair or
# per value, fields skipped without being built. Only the usual forms are typed: a record with
# anything else (a null, an odd type, an unknown value kind, a bad id or number) makes
# ``typed_request`` return None, and the dict path reads it again: same spans, or the error named.
try:
    import msgspec  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # pragma: no cover - optional: the dict path reads everything
    msgspec = None  # type: ignore[assignment]

typed_request: Callable[[bytes | bytearray], list[RecordedSpan] | None] | None = None
_RARE_VALUES = ("boolValue", "doubleValue", "arrayValue", "kvlistValue", "bytesValue")

if msgspec is not None:
    _UNSET: Any = msgspec.UNSET

    # gc=False: leaf structs of JSON values hold no cycles, and untracked ones are 5% cheaper here
    class _Value(msgspec.Struct, forbid_unknown_fields=True, gc=False):  # type: ignore[call-arg,unused-ignore]
        # an unknown kind is refused (dict path); None: absent (a JSON null is refused)
        stringValue: str = None  # type: ignore[assignment]
        intValue: int | str = None  # type: ignore[assignment]
        boolValue: Any = _UNSET
        doubleValue: Any = _UNSET
        arrayValue: Any = _UNSET
        kvlistValue: Any = _UNSET
        bytesValue: Any = _UNSET

    class _KeyValue(msgspec.Struct, gc=False):  # type: ignore[call-arg,unused-ignore]
        key: str
        value: _Value

    class _Status(msgspec.Struct, gc=False):  # type: ignore[call-arg,unused-ignore]
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

    class _Scope(msgspec.Struct):
        name: str = ""
        version: str = ""

    class _ScopeSpans(msgspec.Struct):
        scope: _Scope | None = None
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

    def _typed_spans(spans: list[Any], resource: RecordedResource, out: list[RecordedSpan],
                     scope: RecordedScope | None = None) -> None:
        parents: dict[str, RecordedContext] = {}
        prev_tid = ""
        trace_id = 0
        append = out.append
        for s in spans:
            tid = s.traceId
            if tid != prev_tid:
                trace_id = _hex_id(tid, 32, "traceId", True)  # once a trace
                prev_tid = tid
            sid = s.spanId
            span_id = (int.from_bytes(raw, "big") if len(sid) == 16 and len(raw := bytes.fromhex(sid)) == 8
                       else _hex_id(sid, 16, "spanId", True))  # hex digits only: int(sid, 16) takes "-", "0x"
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
                resource, scope))

    def _typed_request(data: bytes | bytearray) -> list[RecordedSpan] | None:
        """The spans of one OTLP/JSON request in the usual forms; None: read it the dict way."""
        out: list[RecordedSpan] = []
        try:
            for rs in _decode_request(data).resourceSpans:
                res = rs.resource
                resource = EMPTY_RESOURCE if res is None else RecordedResource(_typed_attributes(res.attributes))
                for ss in rs.scopeSpans or rs.instrumentationLibrarySpans:
                    sc = ss.scope
                    _typed_spans(ss.spans, resource, out, RecordedScope(sc.name, sc.version) if sc and sc.name else None)
        except (*_SLOW, msgspec.MsgspecError):
            return None
        return out

    typed_request = _typed_request


