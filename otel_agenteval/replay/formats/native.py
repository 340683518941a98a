"""The wire reader in C (``_wire_c.c``), when the build made it: :func:`native_spans`, or None.

It reads what :func:`.wire.wire_spans` reads and gives up where it gives up (None: protobuf
reads the request), in about 40% of the compiled reader's instructions per span: the
per-attribute work (key lookup, value decode) is what the mypyc build cannot make cheap. The
tests read every form, and thousands of corruptions, with both readers and with protobuf.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from ..spanview import (
    RecordedContext,
    RecordedEvent,
    RecordedResource,
    RecordedScope,
    RecordedSpan,
    RecordedStatus,
)
from .values import _KIND, _STATUS, end_time

_wire_c: Any
try:
    _wire_c = importlib.import_module("._wire_c", __package__)
except ImportError:  # the plain Python build, or no C compiler
    _wire_c = None


def reader(module: Any) -> Callable[[bytes | bytearray], list[RecordedSpan] | None]:
    """``module``'s reader (the build's ``_wire_c``, or ``benchmarks/fuzz_wire_c.py``'s sanitizer
    build of the same sources), given the readers' shared classes and tables."""
    statuses = tuple(_STATUS[code] for code in range(3))  # the readers' shared tables, by OTLP number
    module.configure(RecordedSpan, RecordedContext, RecordedEvent, RecordedResource, RecordedStatus,
                     tuple(_KIND[kind] for kind in range(6)), statuses, tuple(s.status_code for s in statuses),
                     RecordedScope)
    read = module.read

    def native_spans(data: bytes | bytearray) -> list[RecordedSpan] | None:
        """The spans of one serialised ``ExportTraceServiceRequest``, sorted by end time; None when
        the request holds anything but the usual forms (then protobuf reads it)."""
        out: list[RecordedSpan] | None = read(data)
        if out is not None and len(out) > 1:
            out.sort(key=end_time)
        return out

    return native_spans


native_spans = reader(_wire_c) if _wire_c is not None else None
