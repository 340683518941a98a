"""A recorded span: the fields of the SDK's ``ReadableSpan`` that the engine and extract read.

Built straight from a file record by :mod:`.readers`, with no validation beyond what the reader
did: contexts are tuples, spans msgspec structs (built in C), both carrying the fields the SDK's
own classes carry, under the same private names.
"""

from __future__ import annotations

from collections.abc import Mapping
from operator import attrgetter
from typing import Any

import msgspec
from opentelemetry.trace import SpanKind, StatusCode

from ..reading.extract import register_span_type
from ..reading.spanfields import PublicSpanFields, SpanIds

__all__ = ["RecordedContext", "RecordedEvent", "RecordedResource", "RecordedScope", "RecordedSpan", "RecordedStatus"]


class RecordedContext(SpanIds):
    """Like ``SpanContext`` (a tuple too): ``(trace_id, span_id, is_remote)``, read by name or index."""

    __slots__ = ()

    def __new__(cls, trace_id: int, span_id: int, is_remote: bool = False) -> RecordedContext:
        return tuple.__new__(cls, (trace_id, span_id, is_remote))

    def __repr__(self) -> str:
        return f"RecordedContext(trace_id=0x{self[0]:032x}, span_id=0x{self[1]:016x}, is_remote={self[2]})"


class RecordedStatus:
    """Like ``Status``: ``status_code`` (a real :class:`StatusCode`) and ``description``."""

    __slots__ = ("_status_code", "description")

    def __init__(self, status_code: StatusCode, description: str | None = None) -> None:
        self._status_code = status_code  # the SDK's field name: the engine reads it directly
        self.description = description

    status_code = property(attrgetter("_status_code"))

    @property
    def is_ok(self) -> bool:
        return self._status_code is not StatusCode.ERROR

    def __repr__(self) -> str:
        return f"RecordedStatus({self._status_code.name}, {self.description!r})"


# Shared, never mutated: most spans carry one of these three.
STATUS_UNSET = RecordedStatus(StatusCode.UNSET)
STATUS_OK = RecordedStatus(StatusCode.OK)
STATUS_ERROR = RecordedStatus(StatusCode.ERROR)


class RecordedEvent:
    """Like ``Event``: ``name``, ``attributes``, ``timestamp`` (ns)."""

    __slots__ = ("attributes", "name", "timestamp")

    def __init__(self, name: str, attributes: Mapping[str, Any], timestamp: int) -> None:
        self.name = name
        self.attributes = attributes
        self.timestamp = timestamp

    def __repr__(self) -> str:
        return f"RecordedEvent({self.name!r}, {dict(self.attributes)!r}, {self.timestamp})"


class RecordedResource:
    """Like ``Resource``: ``attributes``; one instance is shared by every span of a batch."""

    __slots__ = ("attributes",)

    def __init__(self, attributes: Mapping[str, Any]) -> None:
        self.attributes = attributes

    def __repr__(self) -> str:
        return f"RecordedResource({dict(self.attributes)!r})"


EMPTY_RESOURCE = RecordedResource({})


class RecordedScope:
    """Like ``InstrumentationScope``: ``name`` and ``version``; one instance per ``scopeSpans``."""

    __slots__ = ("name", "version")

    def __init__(self, name: str, version: str = "") -> None:
        self.name = name
        self.version = version


class RecordedSpan(msgspec.Struct, PublicSpanFields, eq=False, gc=False):  # type: ignore[call-arg,unused-ignore]
    """One finished span read from a file, duck-compatible with ``ReadableSpan`` for the engine.

    Fields carry the SDK's private names (``_context``, ``_attributes``, …), which the engine's
    hot path reads directly (see :data:`otel_agenteval.reading.extract.FAST_SPANS`); the public names
    are read-only properties, as on ``ReadableSpan``. A msgspec ``Struct``: built in C, half the
    cost of a ``__slots__`` class with a Python ``__init__``; compared by identity. Not tracked by
    the cyclic GC (``gc=False``): nothing it holds can lead back to it (values read from a
    record, contexts of ints, a shared resource), and ``serve`` holds tens of thousands of spans
    for their grace period, which every collection would otherwise walk.
    """

    _name: str
    _context: RecordedContext
    _parent: RecordedContext | None
    kind: SpanKind
    _start_time: int
    _end_time: int
    _status: RecordedStatus
    _attributes: Mapping[str, Any]
    _events: tuple[RecordedEvent, ...]
    _resource: RecordedResource
    _instrumentation_scope: RecordedScope | None = None  # tells an unread span's instrumentation apart

    @property
    def instrumentation_scope(self) -> RecordedScope | None:
        return self._instrumentation_scope

    def get_span_context(self) -> RecordedContext:
        return self._context

    def __repr__(self) -> str:
        return (f"RecordedSpan({self._name!r}, trace=0x{self._context[0]:032x}, "
                f"span=0x{self._context[1]:016x}, {self.kind.name}, {self._status._status_code.name})")


register_span_type(RecordedSpan)
