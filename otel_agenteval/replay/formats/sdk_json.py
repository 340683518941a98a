"""The SDK's ``span.to_json()`` objects -> :class:`RecordedSpan` (what ``ConsoleSpanExporter`` prints)."""

from __future__ import annotations

import datetime as _dt
from typing import Any

from ..spanview import EMPTY_RESOURCE, RecordedContext, RecordedEvent, RecordedResource, RecordedSpan, RecordedStatus
from .values import _ENTRY_KINDS, _SDK_KIND, _STATUS, _STATUS_CODE, Bad


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


def sdk_span(s: dict[str, Any]) -> RecordedSpan:
    c = s.get("context")
    if not isinstance(c, dict):
        raise Bad("missing context")
    ctx = RecordedContext(_sdk_id(c.get("trace_id"), "context.trace_id", True, 32),
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


def _sdk_id(value: Any, field: str, required: bool, hex_len: int = 16) -> int:
    """``0x`` and hex digits, as ``to_json`` writes an id (no sign, ``_`` or spaces, which ``int`` takes)."""
    if not isinstance(value, str) or not value:
        raise Bad(f"missing {field}")
    digits = value[2:] if value[:2] in ("0x", "0X") else value
    try:
        raw = bytes.fromhex(digits)
        if len(digits) != hex_len or len(raw) * 2 != hex_len:
            raise ValueError
    except ValueError:
        raise Bad(f"{field} {value[:40]!r} is not {hex_len} hex digits") from None
    n = int.from_bytes(raw, "big")
    if required and n == 0:
        raise Bad(f"{field} is all zeros")
    return n


