"""What every reader of recorded spans shares: the error a bad span raises, status and kind
tables, remote-parent flags, the shared parent context and the end-time sort key.

The readers: OTLP/JSON (:mod:`.otlp_json`, :mod:`.typed_json`), the SDK's ``to_json``
(:mod:`.sdk_json`), OTLP protobuf (:mod:`.wire`, :mod:`.protobuf`).
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any

from opentelemetry.trace import SpanKind, StatusCode

from ..spanview import STATUS_ERROR, STATUS_OK, STATUS_UNSET, RecordedContext, RecordedSpan, RecordedStatus


class Bad(ValueError):
    """A record or span that cannot be read; the message names the field."""


_STATUS: dict[Any, RecordedStatus] = {}
for _code, _st in ((StatusCode.UNSET, STATUS_UNSET), (StatusCode.OK, STATUS_OK), (StatusCode.ERROR, STATUS_ERROR)):
    for _k in (_code.value, str(_code.value), _code.name, f"STATUS_CODE_{_code.name}"):
        _STATUS[_k] = _st
_STATUS_CODE = {k: v.status_code for k, v in _STATUS.items()}

_KIND: dict[Any, SpanKind] = {0: SpanKind.INTERNAL, "SPAN_KIND_UNSPECIFIED": SpanKind.INTERNAL}
for _sk in SpanKind:
    for _k in (_sk.value + 1, str(_sk.value + 1), f"SPAN_KIND_{_sk.name}"):
        _KIND[_k] = _sk
_SDK_KIND = {str(k): k for k in SpanKind}  # to_json writes "SpanKind.CLIENT"
_ENTRY_KINDS = (SpanKind.SERVER, SpanKind.CONSUMER)

_HAS_IS_REMOTE = 0x100  # SpanFlags in opentelemetry-proto
_IS_REMOTE = 0x200
REMOTE_PARENT = _HAS_IS_REMOTE | _IS_REMOTE  # flags of a span whose parent is known to be remote


def shared_parent(parents: dict[Any, RecordedContext], key: Any, trace_id: int, flags: int,
                  span_id_of: Callable[[Any], int]) -> RecordedContext:
    """A span's parent context, one per parent within a request (``parents``, keyed by the parent id
    as read); ``span_id_of(key)`` turns the id into an int only when a context is made."""
    if flags & REMOTE_PARENT == REMOTE_PARENT:
        return RecordedContext(trace_id, span_id_of(key), True)
    parent = parents.get(key)
    if parent is None or parent[0] != trace_id:
        parent = parents[key] = RecordedContext(trace_id, span_id_of(key))
    return parent


def why(exc: BaseException) -> str:
    """A reader's error as one line naming what is wrong."""
    if isinstance(exc, Bad):
        return str(exc)
    if isinstance(exc, KeyError):
        return f"missing {exc}"
    return f"{type(exc).__name__}: {exc}"


# the fast paths give up on these (Bad is a ValueError) and the reference reader names the error
_SLOW = (ValueError, TypeError, KeyError, AttributeError, OverflowError)

end_time: Callable[[RecordedSpan], int] = attrgetter("_end_time")  # sort key, without a Python call

