"""OTLP request bodies -> :class:`RecordedSpan` lists, through replay's one decoder.

Protobuf is read from the wire by :func:`otel_agenteval.replay.formats.wire.wire_spans` (on the compiled
build) when it holds only the usual forms, else parsed into ``ExportTraceServiceRequest`` and
read by :func:`otel_agenteval.replay.formats.protobuf.request_spans` (which names what is wrong); JSON
goes through replay's typed fast path and its dict reader (:mod:`otel_agenteval.replay.formats.decode`).
A body that cannot be read at all
raises :class:`BadRequest` (HTTP 400 / gRPC ``INVALID_ARGUMENT``); a span that cannot be read is
rejected on its own, named, and reported back as OTLP partial success.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ..replay.formats.decode import parse, spans_from_json
from ..replay.formats.protobuf import WIRE_SPANS, request_spans
from ..replay.formats.typed_json import typed_request
from ..replay.formats.values import Bad, why
from ..replay.readers import gc_paused
from ..replay.spanview import RecordedSpan
from .compression import BadRequest

__all__ = ["BadRequest", "Decoded", "from_json", "from_message", "from_protobuf"]

MAX_MESSAGES = 5  # rejection messages kept per request (all are counted)


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
            return Decoded(fast)
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
    return out


def from_json(body: bytes | bytearray, where: str = "request") -> Decoded:
    with gc_paused():
        out = Decoded([])
        try:
            typed = typed_request(body) if typed_request is not None and b'"resourceSpans"' in body[:64] else None
        except RecursionError:  # msgspec's own depth limit: parse names it
            typed = None
        if typed is not None:
            out.spans = typed
            return out
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
        return out
