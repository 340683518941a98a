"""A held piece as the engine gets it back (:class:`StitchedSpan`), and a trace of them played in
time order (:func:`play`)."""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any

from ...reading.spanfields import PublicSpanFields, SpanIds
from ...reading.spans import register_span_type


class StitchedSpan(PublicSpanFields):
    """A held piece given back to the engine: the span's fields, in the trace and under the parent
    its group gave it (its own trace and no parent when left as it came); never held again.
    ``attributes``: the span's own unless its group named its tool (:mod:`.naming`)."""

    __slots__ = ("_attributes", "_context", "_end_time", "_events", "_instrumentation_scope", "_name", "_parent",
                 "_resource", "_start_time", "_status", "kind")

    def __init__(self, span: Any, trace_id: int, parent_id: int | None, attributes: Any = None) -> None:
        self._context = SpanIds((trace_id, span._context[1], False))
        self._parent = None if parent_id is None else SpanIds((trace_id, parent_id, False))
        self._name = span._name
        self._start_time = span._start_time
        self._end_time = span._end_time
        self._status = span._status
        self._attributes = span._attributes if attributes is None else attributes
        self._events = span._events
        self._resource = span._resource
        self._instrumentation_scope = getattr(span, "instrumentation_scope", None)
        self.kind = getattr(span, "kind", None)

    instrumentation_scope = property(attrgetter("_instrumentation_scope"))


register_span_type(StitchedSpan)


def play(trace: list[StitchedSpan], start: Callable[[Any], None], end: Callable[[Any], None]) -> None:
    """A trace's starts and ends in time order (``trace``: parents before children): a parent starts
    before its children at one time, and a child that ends just after its parent ends first."""
    if len(trace) == 1:
        start(trace[0])
        end(trace[0])
        return
    depth: dict[int, int] = {}
    until: dict[int, int] = {}  # a span's end, no later than its parent's
    timeline = []
    for i, s in enumerate(trace):
        sid, p = s._context[1], s._parent
        depth[sid] = 0 if p is None else depth[p[1]] + 1
        until[sid] = s._end_time if p is None else max(min(s._end_time, until[p[1]]), s._start_time)
        timeline += [(s._start_time, 0, depth[sid], i), (until[sid], 1, -depth[sid], i)]
    for _, is_end, _, i in sorted(timeline):
        (end if is_end else start)(trace[i])
