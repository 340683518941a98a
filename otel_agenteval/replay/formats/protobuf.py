"""OTLP protobuf files: ``ExportTraceServiceRequest`` records -> :class:`RecordedSpan`.

Framing, from the first byte: ``0x0a`` is one single message (read whole); ``0x00`` is the
Collector file exporter's 4-byte big-endian length prefix; anything else is a varint
length-delimited stream (protobuf's ``writeDelimitedTo``).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ..counts import InputError, ReadCounts, gc_paused
from ..spanview import (
    STATUS_UNSET,
    RecordedContext,
    RecordedEvent,
    RecordedResource,
    RecordedScope,
    RecordedSpan,
    RecordedStatus,
)
from . import wire
from .native import native_spans
from .values import _KIND, _STATUS, REMOTE_PARENT, Bad, end_time, shared_parent

# Compiled, the wire reader takes a third of the time of protobuf's parser + request_spans, and
# its C twin (native) 40% of that; as plain Python it takes twice protobuf's (upb is C). So it
# reads requests only when compiled (the tests read every form each way on either build). Bodies
# may be a bytearray (serve's libdeflate output): the C reader reads any buffer.


def _python_wire_spans(data: bytes | bytearray) -> list[RecordedSpan] | None:
    return wire.wire_spans(bytes(data))  # it keys its caches by slices of the body: bytes only


READER_ENV = "OTEL_AGENTEVAL_WIRE_READER"  # benchmarks' A/B: c, python or upb; unset: the fastest built


def _chosen(name: str) -> Callable[[bytes | bytearray], list[RecordedSpan] | None] | None:
    """The reader of the usual forms, or None: protobuf parses every request (``upb``)."""
    compiled = not (getattr(wire, "__file__", "") or "").endswith(".py")
    if name == "":
        return native_spans or (_python_wire_spans if compiled else None)
    if name == "upb":
        return None
    if name == "python":
        return _python_wire_spans
    if name == "c" and native_spans is not None:
        return native_spans
    raise ValueError(f"{READER_ENV}={name!r}: expected c (compiled build only), python or upb")


WIRE_SPANS: Callable[[bytes | bytearray], list[RecordedSpan] | None] | None = _chosen(os.environ.get(READER_ENV, ""))


def _value(v: Any) -> Any:
    which = v.WhichOneof("value")
    if which == "string_value":
        return v.string_value
    if which == "int_value":
        return v.int_value
    if which == "bool_value":
        return v.bool_value
    if which == "double_value":
        return v.double_value
    if which == "array_value":
        return tuple(_value(x) for x in v.array_value.values)
    if which == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    if which == "bytes_value":
        return v.bytes_value
    return None


def _attributes(kvs: Any) -> dict[str, Any]:
    # a non-empty string_value is a string attribute; anything else (or "") asks which value is set
    return {kv.key: v.string_value or _value(v) for kv in kvs for v in (kv.value,)}


def _id(raw: bytes, size: int, field: str, required: bool) -> int:
    if len(raw) != size:
        if not raw and not required:
            return 0
        raise Bad(f"{field} has {len(raw)} bytes, expected {size}")
    n = int.from_bytes(raw, "big")
    if required and n == 0:
        raise Bad(f"{field} is all zeros")
    return n


def _status(st: Any) -> RecordedStatus:
    status = _STATUS.get(st.code)
    if status is None:
        raise Bad(f"unknown status.code {st.code}")
    msg = st.message
    return RecordedStatus(status.status_code, msg) if msg else status


def _events(evs: Any) -> tuple[RecordedEvent, ...]:
    return tuple(RecordedEvent(e.name, _attributes(e.attributes), e.time_unix_nano) for e in evs)


def _from_bytes(raw: bytes) -> int:
    return int.from_bytes(raw, "big")


def _span(s: Any, resource: RecordedResource) -> RecordedSpan:
    """One span, every form; the reference the fast path in :func:`_spans` must equal."""
    ctx = RecordedContext(_id(s.trace_id, 16, "trace_id", True), _id(s.span_id, 8, "span_id", True))
    parent = None
    if s.parent_span_id:
        parent = RecordedContext(ctx.trace_id, _id(s.parent_span_id, 8, "parent_span_id", False),
                                 s.flags & REMOTE_PARENT == REMOTE_PARENT)
    status = _status(s.status) if s.HasField("status") else STATUS_UNSET
    kind = _KIND.get(s.kind)
    if kind is None:
        raise Bad(f"unknown kind {s.kind}")
    return RecordedSpan(s.name, ctx, parent, kind, s.start_time_unix_nano, s.end_time_unix_nano, status,
                        _attributes(s.attributes), _events(s.events), resource)


def _spans(spans: Any, resource: RecordedResource, out: list[RecordedSpan], where: str,
           reject: Callable[[str], None]) -> None:
    """The spans of one ``scope_spans``, appended to ``out``: ids of the right size and the
    common parent read inline (shared by the spans of a trace), anything else through :func:`_span`."""
    parents: dict[bytes, RecordedContext] = {}
    prev_tid = b""
    trace_id = 0
    append = out.append
    for k, s in enumerate(spans):
        try:
            tid = s.trace_id
            if tid != prev_tid:
                trace_id = int.from_bytes(tid, "big") if len(tid) == 16 else 0
                prev_tid = tid
            sid = s.span_id
            span_id = int.from_bytes(sid, "big") if len(sid) == 8 else 0
            pid = s.parent_span_id
            if not trace_id or not span_id or (pid and len(pid) != 8):
                raise Bad("not the common form")
            parent = shared_parent(parents, pid, trace_id, s.flags, _from_bytes) if pid else None
            status = _status(s.status) if s.HasField("status") else STATUS_UNSET
            evs = s.events
            append(RecordedSpan(s.name, RecordedContext(trace_id, span_id), parent, _KIND[s.kind],
                                s.start_time_unix_nano, s.end_time_unix_nano, status, _attributes(s.attributes),
                                _events(evs) if evs else (), resource))
        except (Bad, KeyError):
            try:
                append(_span(s, resource))
            except (Bad, ValueError, TypeError) as exc:
                reject(f"{where}[{k}]: {exc}")


def request_spans(req: Any, where: str, reject: Callable[[str], None]) -> list[RecordedSpan]:
    """The spans of one parsed ``ExportTraceServiceRequest``, sorted by end time."""
    out: list[RecordedSpan] = []
    for i, rs in enumerate(req.resource_spans):
        resource = RecordedResource(_attributes(rs.resource.attributes))
        for j, ss in enumerate(rs.scope_spans):
            first = len(out)
            _spans(ss.spans, resource, out, f"{where}: resource_spans[{i}].scope_spans[{j}].spans", reject)
            if ss.scope.name:  # the instrumentation scope, which tells an unread span's framework apart
                scope = RecordedScope(ss.scope.name, ss.scope.version)
                for k in range(first, len(out)):
                    out[k]._instrumentation_scope = scope
    if len(out) > 1:
        out.sort(key=end_time)
    return out


def _varint(f: IO[bytes]) -> tuple[int, int] | None:
    shift = n = 0
    while True:
        b = f.read(1)
        if not b:
            if shift:
                raise Bad("file ends inside a length prefix")
            return None
        n |= (b[0] & 0x7F) << shift
        if b[0] < 0x80:
            return n, shift // 7 + 1
        shift += 7
        if shift > 63:
            raise Bad("length prefix is not a varint")


def _be32(f: IO[bytes]) -> tuple[int, int] | None:
    b = f.read(4)
    if not b:
        return None
    if len(b) < 4:
        raise Bad("file ends inside a 4-byte length prefix")
    return int.from_bytes(b, "big"), 4


def proto_file(p: Path, f: IO[bytes], counts: ReadCounts, reject: Callable[[str], None],
               raw: Any, on_progress: Callable[[int], None] | None) -> Iterator[list[RecordedSpan]]:
    """Spans of each record of a protobuf file, one list per record."""
    first = f.peek(1)[:1]  # type: ignore[attr-defined]
    if first == b"\x0a":  # one single message: cannot be split, read whole
        data = f.read()
        counts.lines += 1
        yield _message(data, f"{p}: message", counts, reject)
        return
    prefix = _be32 if first == b"\x00" else _varint
    n = 0
    offset = 0
    records = counts.records
    while True:
        try:
            got = prefix(f)
        except Bad as exc:
            _first_bad(p, n, counts.records == records, str(exc))
            reject(f"{p}: record {n + 1} (byte {offset}): {exc}")
            return
        if got is None:
            return
        size, used = got
        n += 1
        counts.lines += 1
        data = _read(f, size)
        where = f"{p}: record {n} (byte {offset})"
        offset += used + size
        if len(data) < size:
            _first_bad(p, n - 1, counts.records == records, f"a record of {size} bytes in a file that ends first")
            reject(f"{where}: file ends inside the record ({len(data)} of {size} bytes)")
            return
        yield _message(data, where, counts, functools.partial(_checked, p, n == 1, counts, records, reject))
        if on_progress is not None and not n & 63:
            on_progress(raw.tell())


def _first_bad(p: Path, before: int, nothing_read: bool, why: str) -> None:
    """The first record of a file is not OTLP: the file is not traces (one error, not a line per record)."""
    if before == 0 and nothing_read:
        raise InputError(f"{p}: not trace data: not OTLP JSON, and not OTLP protobuf either "
                         f"(first record: {why.rpartition(': ')[2] or why})")


def _checked(p: Path, first: bool, counts: ReadCounts, records: int, reject: Callable[[str], None], msg: str) -> None:
    """``reject``, unless the file's first record is not OTLP at all (nothing read from it yet:
    a bad span of a record that was read is only a rejected span)."""
    _first_bad(p, 0 if first else 1, counts.records == records, msg)
    reject(msg)


_CHUNK = 16 << 20


def _read(f: IO[bytes], size: int) -> bytes:
    """``size`` bytes, or fewer at the end of the file; memory grows with what is there, not with
    what a (corrupt) length prefix claims."""
    if size <= _CHUNK:
        return f.read(size)
    parts = []
    while size > 0:
        part = f.read(min(size, _CHUNK))
        if not part:
            break
        parts.append(part)
        size -= len(part)
    return b"".join(parts)


def _message(data: bytes, where: str, counts: ReadCounts, reject: Callable[[str], None]) -> list[RecordedSpan]:
    with gc_paused():
        fast = WIRE_SPANS(data) if WIRE_SPANS is not None else None
        if fast is not None:
            counts.records += 1
            counts.spans += len(fast)
            return fast
        req = ExportTraceServiceRequest()
        try:
            req.ParseFromString(data)
        except (DecodeError, ValueError) as exc:
            reject(f"{where}: not an OTLP ExportTraceServiceRequest: {exc}")
            return []
        counts.records += 1
        spans = request_spans(req, where, reject)
        del req
    counts.spans += len(spans)
    return spans
