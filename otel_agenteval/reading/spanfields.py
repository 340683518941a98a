"""Span-shaped classes the engine reads like the SDK's ``ReadableSpan``.

Plain Python on purpose: they subclass ``tuple`` or are mixed into ``msgspec`` structs, which
classes in the compiled (mypyc) modules cannot be.
"""

from __future__ import annotations

from operator import attrgetter, itemgetter
from typing import Any

from opentelemetry.trace import Status, StatusCode

_EMPTY: dict[str, Any] = {}


class SpanIds(tuple):  # type: ignore[type-arg]
    """``(trace_id, span_id, is_remote)``: reads like ``SpanContext`` (a tuple too), built in C."""

    __slots__ = ()
    trace_id = property(itemgetter(0))
    span_id = property(itemgetter(1))
    is_remote = property(itemgetter(2))


_STATUS: dict[Any, Status] = {code: Status(code) for code in StatusCode}


class PublicSpanFields:
    """``ReadableSpan``'s public read-only names over the private fields (for span classes of our own)."""

    __slots__ = ()
    name = property(attrgetter("_name"))
    context = property(attrgetter("_context"))
    parent = property(attrgetter("_parent"))
    start_time = property(attrgetter("_start_time"))
    end_time = property(attrgetter("_end_time"))
    status = property(attrgetter("_status"))
    attributes = property(attrgetter("_attributes"))
    events = property(attrgetter("_events"))
    resource = property(attrgetter("_resource"))


class SpanView(PublicSpanFields):
    """Any span-shaped object, read once through its public API into the fields the engine reads."""

    __slots__ = ("_attributes", "_context", "_end_time", "_events", "_name", "_parent", "_resource", "_start_time",
                 "_status")

    def __init__(self, span: Any) -> None:
        ctx = span.context
        self._context = SpanIds((ctx.trace_id, ctx.span_id, bool(getattr(ctx, "is_remote", False))))
        p = span.parent
        self._parent = None if p is None else SpanIds((p.trace_id, p.span_id, bool(getattr(p, "is_remote", False))))
        self._name = span.name or ""
        self._start_time = span.start_time
        self._end_time = span.end_time
        st = getattr(span, "status", None)
        self._status = _STATUS.get(getattr(st, "status_code", None), _STATUS[StatusCode.UNSET])
        a = span.attributes
        self._attributes = a if type(a) is dict else (dict(a) if a else _EMPTY)  # read as a dict, copied once
        self._events = getattr(span, "events", None) or ()
        self._resource = getattr(span, "resource", None)
