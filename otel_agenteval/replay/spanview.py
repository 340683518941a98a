"""A recorded span: the fields of the SDK's ``ReadableSpan`` that the engine and extract read.

Built straight from a file record by :mod:`.readers`; plain ``__slots__`` objects, no
validation beyond what the reader did, so building one costs little more than a tuple.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.trace import SpanKind, StatusCode

__all__ = ["RecordedContext", "RecordedEvent", "RecordedResource", "RecordedSpan", "RecordedStatus"]


class RecordedContext:
    """Like ``SpanContext``: ``trace_id``, ``span_id`` (ints) and ``is_remote``."""

    __slots__ = ("is_remote", "span_id", "trace_id")

    def __init__(self, trace_id: int, span_id: int, is_remote: bool = False) -> None:
        self.trace_id = trace_id
        self.span_id = span_id
        self.is_remote = is_remote

    def __repr__(self) -> str:
        return f"RecordedContext(trace_id=0x{self.trace_id:032x}, span_id=0x{self.span_id:016x}, is_remote={self.is_remote})"


class RecordedStatus:
    """Like ``Status``: ``status_code`` (a real :class:`StatusCode`) and ``description``."""

    __slots__ = ("description", "status_code")

    def __init__(self, status_code: StatusCode, description: str | None = None) -> None:
        self.status_code = status_code
        self.description = description

    @property
    def is_ok(self) -> bool:
        return self.status_code is not StatusCode.ERROR

    def __repr__(self) -> str:
        return f"RecordedStatus({self.status_code.name}, {self.description!r})"


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


class RecordedSpan:
    """One finished span read from a file, duck-compatible with ``ReadableSpan`` for the engine."""

    __slots__ = ("attributes", "context", "end_time", "events", "kind", "name", "parent", "resource", "start_time",
                 "status")

    def __init__(
        self,
        name: str,
        context: RecordedContext,
        parent: RecordedContext | None,
        kind: SpanKind,
        start_time: int,
        end_time: int,
        status: RecordedStatus,
        attributes: Mapping[str, Any],
        events: tuple[RecordedEvent, ...],
        resource: RecordedResource,
    ) -> None:
        self.name = name
        self.context = context
        self.parent = parent
        self.kind = kind
        self.start_time = start_time
        self.end_time = end_time
        self.status = status
        self.attributes = attributes
        self.events = events
        self.resource = resource

    def get_span_context(self) -> RecordedContext:
        return self.context

    def __repr__(self) -> str:
        return (f"RecordedSpan({self.name!r}, trace=0x{self.context.trace_id:032x}, "
                f"span=0x{self.context.span_id:016x}, {self.kind.name}, {self.status.status_code.name})")
