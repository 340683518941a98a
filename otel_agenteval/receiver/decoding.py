"""OTLP request bodies -> :class:`RecordedSpan` lists, through replay's one decoder.

Protobuf is read from the wire by :func:`otel_agenteval.replay.formats.wire.wire_spans` (on the compiled
build) when it holds only the usual forms, else parsed into ``ExportTraceServiceRequest`` and
read by :func:`otel_agenteval.replay.formats.protobuf.request_spans` (which names what is wrong); JSON
goes through replay's typed fast path and its dict reader (:mod:`otel_agenteval.replay.formats.decode`).
A body that cannot be read at all
raises :class:`BadRequest` (HTTP 400 / gRPC ``INVALID_ARGUMENT``); a span that cannot be read is
rejected on its own, named, and reported back as OTLP partial success.

Times, the same for JSON and protobuf (:func:`checked_times`): a time no OTLP field can hold
(negative, or past 64 bits: JSON can say it, protobuf's ``fixed64`` cannot) is a 400 naming the
field, like ``1e400``; a span that ends before it starts, ends more than a day past the wall
clock, or lasts more than a day (``MAX_SPAN_NS``) is rejected on its own (partial success,
counted), never played: its duration would be a wrong histogram value, a false duration-budget
breach, or 0 s.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from operator import attrgetter, gt, sub

from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ..engine.store import FUTURE_NS
from ..replay.formats.decode import parse, spans_from_json
from ..replay.formats.protobuf import WIRE_SPANS, request_spans
from ..replay.formats.typed_json import typed_request
from ..replay.formats.values import Bad, why
from ..replay.readers import gc_paused
from ..replay.spanview import RecordedSpan
from .compression import BadRequest

__all__ = ["BadRequest", "Decoded", "from_json", "from_message", "from_protobuf"]

MAX_MESSAGES = 5  # rejection messages kept per request (all are counted)
MAX_SPAN_NS = 86_400 * 1_000_000_000  # a span lasting longer than a day: a clock error, not an agent's run
UINT64 = 1 << 64  # OTLP times are fixed64 nanoseconds
_start, _end = attrgetter("_start_time"), attrgetter("_end_time")


@dataclass
class Decoded:
    spans: list[RecordedSpan]
    rejected: int = 0
    messages: list[str] = field(default_factory=list)

    def reject(self, message: str) -> None:
        self.rejected += 1
        if len(self.messages) < MAX_MESSAGES:
            self.messages.append(message)

    @property
    def error_message(self) -> str:
        more = self.rejected - len(self.messages)
        return "; ".join(self.messages) + (f"; and {more} more" if more > 0 else "")


def from_protobuf(body: bytes | bytearray, where: str = "request") -> Decoded:
    """A body as received, or as inflated (libdeflate gives a bytearray, read as it is)."""
    with gc_paused():
        fast = WIRE_SPANS(body) if WIRE_SPANS is not None else None  # the usual forms, from the bytes
        if fast is not None:
            return checked_times(Decoded(fast), where)
        req = ExportTraceServiceRequest()
        try:
            req.ParseFromString(body)
        except (DecodeError, ValueError) as exc:
            deep = " (nested too deep: the depth limit is 100 messages)" if "MaxDepth" in str(exc) else ""
            raise BadRequest(f"not an OTLP ExportTraceServiceRequest (protobuf): {exc}{deep}") from None
        return from_message(req, where)


def from_message(req: ExportTraceServiceRequest, where: str = "request") -> Decoded:
    out = Decoded([])
    out.spans = request_spans(req, where, out.reject)
    return checked_times(out, where)


def from_json(body: bytes | bytearray, where: str = "request") -> Decoded:
    with gc_paused():
        out = Decoded([])
        try:
            typed = typed_request(body) if typed_request is not None and b'"resourceSpans"' in body[:64] else None
        except RecursionError:  # msgspec's own depth limit: parse names it
            typed = None
        if typed is not None:
            out.spans = typed
            return checked_times(out, where, events=True)
        try:
            value = parse(body)
        except ValueError as exc:
            raise BadRequest(f"not valid JSON: {exc}") from None
        if not isinstance(value, dict) or (value and "resourceSpans" not in value):
            kind = type(value).__name__ if not isinstance(value, dict) else f"keys {', '.join(sorted(value)[:5])}"
            raise BadRequest(f"not an OTLP/JSON ExportTraceServiceRequest (expected an object with resourceSpans, got {kind})")
        try:
            out.spans = spans_from_json(value, where, out.reject)
        except (Bad, ValueError, TypeError, KeyError, AttributeError, OverflowError, RecursionError) as exc:
            raise BadRequest(f"{where}: {why(exc)}") from None
        return checked_times(out, where, events=True)


def checked_times(out: Decoded, where: str = "request", events: bool = False, now_ns: int | None = None) -> Decoded:
    """``out`` with the spans whose times cannot be right rejected (see the module's docstring);
    :class:`BadRequest` for a time out of OTLP's range (``events``: the events' times too, which
    only JSON can put out of range). The usual request is looked at in C (``min``/``max``/``map``),
    span by span only when something is off."""
    spans = out.spans
    if not spans:
        return out
    now = time.time_ns() if now_ns is None else now_ns
    starts, ends = list(map(_start, spans)), list(map(_end, spans))
    if (min(starts) > 0 and max(ends) <= now + FUTURE_NS and not any(map(gt, starts, ends))
            and max(map(sub, ends, starts)) <= MAX_SPAN_NS
            and not (events and not all(0 <= e.timestamp < UINT64 for s in spans for e in s._events))):
        return out
    keep = []
    for s in spans:
        problem = _time_problem(s, now)
        if problem is None:
            keep.append(s)
        else:
            out.reject(f"{where}: span {s._context[1]:016x}: {problem}")
    out.spans = keep
    return out


def _time_problem(s: RecordedSpan, now: int) -> str | None:
    start, end = s._start_time, s._end_time
    for field_name, t in (("startTimeUnixNano", start), ("endTimeUnixNano", end),
                          *(("events.timeUnixNano", e.timestamp) for e in s._events)):
        if not 0 <= t < UINT64:
            raise BadRequest(f"{field_name} {t} is out of range: OTLP times are unsigned 64-bit nanoseconds")
    if end > now + FUTURE_NS:
        return f"endTimeUnixNano {end} is more than a day past this replica's clock ({now})"
    if start and end:
        if start > end:
            return f"endTimeUnixNano {end} is before startTimeUnixNano {start}"
        if end - start > MAX_SPAN_NS:
            return f"the span lasts {(end - start) / 1e9:.0f} s, more than a day: its times cannot be right"
    return None
