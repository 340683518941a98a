"""The span classes the engine reads by their private fields, and reading any span's attributes and
events: the SDK's spans and the replay's recorded ones directly, anything else through a
:class:`SpanView`."""

from __future__ import annotations

import inspect
from typing import Any, Final

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk import trace as _sdk_trace
from opentelemetry.trace import StatusCode

from . import semconv as sc
from .spanfields import SpanView

# the SDK's own span classes (the tracer makes ``_Span``; on_end gets a ``ReadableSpan``)
_SDK_SPANS = frozenset(c for c in (getattr(_sdk_trace, n, None) for n in ("ReadableSpan", "Span", "_Span"))
                       if isinstance(c, type))
_EMPTY: Final[dict[str, Any]] = {}
_BOUNDED: Final = BoundedAttributes  # Final: a compiled module reads it from a C static, not its globals dict


def _default_status() -> Any:
    """The UNSET status object the SDK shares among spans whose status was never set (its
    ``ReadableSpan`` default), so checking a span's status is one identity test in the usual case."""
    try:
        default = inspect.signature(_sdk_trace.ReadableSpan.__init__).parameters["status"].default
    except (AttributeError, KeyError, TypeError, ValueError):
        return None
    return default if getattr(default, "status_code", None) is StatusCode.UNSET else None


UNSET_STATUS: Final = _default_status()

# Classes whose instances carry the SDK ``ReadableSpan``'s private fields (``_context``,
# ``_parent``, ``_start_time``, ``_end_time``, ``_status``, ``_attributes``, ``_events``,
# ``_resource``, ``_name``), contexts indexable as ``(trace_id, span_id, is_remote, ...)``.
# The engine's hot path reads those fields directly: no property call per field.
FAST_SPANS: Final[set[type]] = {*_SDK_SPANS, SpanView}
# the classes on_start and on_end get from the SDK, compared by identity before the set lookup
STARTED_SPAN: Final[Any] = getattr(_sdk_trace, "_Span", None)
ENDED_SPAN: Final[Any] = getattr(_sdk_trace, "ReadableSpan", None)


def view(span: Any) -> Any:
    """The span itself when it carries the SDK's private fields, else a :class:`SpanView` of it."""
    return span if type(span) in FAST_SPANS else SpanView(span)


def register_span_type(cls: type) -> type:
    """Declare that ``cls`` carries the SDK's private span fields (see :data:`FAST_SPANS`)."""
    FAST_SPANS.add(cls)
    return cls


def attributes_of(span: Any) -> dict[str, Any]:
    """A span's attributes for reading, as a plain dict where the SDK holds one.

    ``ReadableSpan.attributes`` builds a new MappingProxy on each access and
    ``BoundedAttributes.get`` runs in Python; the processor only reads, so it takes the inner
    dict. Anything else (replayed spans) is read through ``.attributes``.
    """
    return as_dict(span._attributes if type(span) in FAST_SPANS else span.attributes)


def as_dict(attributes: Any) -> dict[str, Any]:
    """Attributes as a dict to read: the SDK's inner dict, a dict as it is, another mapping copied."""
    if type(attributes) is _BOUNDED:
        return attributes._dict  # type: ignore[no-any-return]
    if type(attributes) is dict:
        return attributes
    return dict(attributes) if attributes else _EMPTY


def events_of(span: Any) -> Any:
    """A finished span's events without the SDK's per-access tuple copy (read-only use)."""
    if type(span) in FAST_SPANS:
        return span._events or ()
    return span.events or ()

def is_local_root(span: Any) -> bool:
    """No parent, or a remote one: the span is its service's entry into the trace."""
    parent = span.parent
    return parent is None or parent.is_remote


class ServiceNames:
    """``service.name`` of a span's resource, remembered for the last resource seen (a process's
    spans share one). Read when a run opens, not for every span."""

    def __init__(self) -> None:
        # (resource, its service.name) in one tuple: replaced in one write, so threads never see half
        self._last: tuple[Any, str] = (object(), "")

    def of(self, span: Any) -> str:
        res = span._resource
        last = self._last
        if last[0] is res:
            return last[1]
        name = res.attributes.get(sc.SERVICE_NAME) if res is not None else None
        service = str(name) if name else "unknown"
        self._last = (res, service)
        return service
