"""Recorded traces -> :class:`RecordedSpan`, streaming, whatever the file format.

Formats, told apart by content (``.gz`` is opened transparently, whatever the name):

- OTLP JSON ``ExportTraceServiceRequest``: one per line (the Collector's file exporter), or
  pretty-printed documents one after another. Ids in hex (OTLP/JSON) or base64 (protobuf's
  generic JSON mapping); ints as strings or numbers; enums as numbers or names.
- OTLP protobuf: varint length-delimited requests, the Collector's 4-byte big-endian
  length prefix, or one single message (first byte ``0x0a``; read whole).
- The Python SDK's ``span.to_json()`` (``ConsoleSpanExporter``): concatenated objects, or a
  JSON list. Timestamps there have microseconds only, and ``is_remote`` is not written: a
  SERVER or CONSUMER span with a parent is taken to have a remote one (its service's entry).

A path ``-`` reads standard input. Streaming: a file is read line by line (or record by record), so memory stays flat however
big it is. Two forms are read whole because a document cannot be split: a pretty-printed JSON
*list* and a single protobuf message. Each bad line, record or span is reported through
``on_reject`` with file and line, counted, and skipped (or raised, when ``strict``).
Spans of one request are yielded in end-time order (the SDK's encoder groups them by scope).
"""

from __future__ import annotations

import base64
import datetime as _dt
import gzip
import io
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from opentelemetry.trace import SpanKind, StatusCode

from .spanview import (
    EMPTY_RESOURCE,
    STATUS_ERROR,
    STATUS_OK,
    STATUS_UNSET,
    RecordedContext,
    RecordedEvent,
    RecordedResource,
    RecordedSpan,
    RecordedStatus,
)

try:  # orjson is ~3x faster on these documents; json is the fallback
    import orjson

    _loads: Callable[[bytes], Any] = orjson.loads
except ImportError:  # pragma: no cover - exercised only without orjson
    _loads = json.loads

__all__ = ["InputError", "ReadCounts", "RejectedInput", "iter_batches", "iter_spans", "read_file"]

Reject = Callable[[str], None]


class InputError(Exception):
    """A file that cannot be read at all (missing, unreadable, unknown format)."""


class RejectedInput(InputError):
    """A bad line, record or span, raised instead of skipped when reading ``strict``."""


@dataclass
class ReadCounts:
    """What was read: nothing is dropped without being counted here."""

    files: int = 0
    lines: int = 0  # text lines, or protobuf records
    records: int = 0  # JSON documents / OTLP requests / to_json objects parsed
    spans: int = 0  # spans yielded
    rejected: int = 0  # bad lines, records or spans skipped

    def as_dict(self) -> dict[str, int]:
        return {"files": self.files, "lines": self.lines, "records": self.records, "spans": self.spans,
                "rejected": self.rejected}


class _Bad(ValueError):
    """A record or span that cannot be read; the message names the field."""


# --- values ------------------------------------------------------------------------------------
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


def _hex_id(value: Any, hex_len: int, field: str, required: bool) -> int:
    """An id from OTLP/JSON (hex) or protobuf's JSON mapping (base64); 0 when absent."""
    if not value:
        if required:
            raise _Bad(f"missing {field}")
        return 0
    try:
        if len(value) == hex_len:
            n = int(value, 16)
        else:
            raw = base64.b64decode(value, validate=True)
            if len(raw) * 2 != hex_len:
                raise ValueError
            n = int.from_bytes(raw, "big")
    except (ValueError, TypeError):
        raise _Bad(f"{field} {str(value)[:40]!r} is neither {hex_len} hex digits nor base64 of {hex_len // 2} bytes") from None
    if required and n == 0:
        raise _Bad(f"{field} is all zeros")
    return n


def _any_value(v: Any) -> Any:
    """An OTLP/JSON ``AnyValue`` as the Python value the SDK would hold."""
    if not v:
        return None
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        return int(v["intValue"])
    if "boolValue" in v:
        return v["boolValue"]
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "arrayValue" in v:
        return tuple(_any_value(x) for x in (v["arrayValue"] or {}).get("values") or ())
    if "kvlistValue" in v:
        return {kv["key"]: _any_value(kv.get("value")) for kv in (v["kvlistValue"] or {}).get("values") or ()}
    if "bytesValue" in v:
        return base64.b64decode(v["bytesValue"])
    raise _Bad(f"unknown attribute value type {sorted(v)!r}")


def _attributes(kvs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not kvs:
        return out
    for kv in kvs:
        v = kv.get("value")
        s = v.get("stringValue") if v else None  # by far the most common: no call
        out[kv["key"]] = s if s is not None else _any_value(v)
    return out


# --- OTLP JSON ---------------------------------------------------------------------------------
def _otlp_json_span(s: dict[str, Any], resource: RecordedResource) -> RecordedSpan:
    tid = s.get("traceId")
    sid = s.get("spanId")
    trace_id = int(tid, 16) if tid and len(tid) == 32 else _hex_id(tid, 32, "traceId", True)
    span_id = int(sid, 16) if sid and len(sid) == 16 else _hex_id(sid, 16, "spanId", True)
    if not trace_id or not span_id:
        raise _Bad("traceId or spanId is all zeros")
    pid = s.get("parentSpanId")
    parent = None
    if pid:
        flags = s.get("flags") or 0
        parent = RecordedContext(trace_id, int(pid, 16) if len(pid) == 16 else _hex_id(pid, 16, "parentSpanId", True),
                                 bool(flags & _IS_REMOTE) if flags & _HAS_IS_REMOTE else False)
    st = s.get("status")
    if st:
        status = _STATUS.get(st.get("code", 0))
        if status is None:
            raise _Bad(f"unknown status.code {st.get('code')!r}")
        msg = st.get("message")
        if msg:
            status = RecordedStatus(status.status_code, msg)
    else:
        status = STATUS_UNSET
    kind = _KIND.get(s.get("kind", 0))
    if kind is None:
        raise _Bad(f"unknown kind {s.get('kind')!r}")
    evs = s.get("events")
    events = tuple(RecordedEvent(e.get("name", ""), _attributes(e.get("attributes")), int(e.get("timeUnixNano") or 0))
                   for e in evs) if evs else ()
    return RecordedSpan(s.get("name", ""), RecordedContext(trace_id, span_id), parent, kind,
                        int(s.get("startTimeUnixNano") or 0), int(s.get("endTimeUnixNano") or 0), status,
                        _attributes(s.get("attributes")), events, resource)


def _otlp_json_request(doc: dict[str, Any], where: str, reject: Callable[[str], None]) -> list[RecordedSpan]:
    out: list[RecordedSpan] = []
    for i, rs in enumerate(doc.get("resourceSpans") or ()):
        try:
            res = rs.get("resource")
            resource = RecordedResource(_attributes(res.get("attributes"))) if res else EMPTY_RESOURCE
        except (_Bad, ValueError, TypeError, KeyError, AttributeError) as exc:
            reject(f"{where}: resourceSpans[{i}].resource: {_why(exc)}")
            continue
        for j, ss in enumerate(rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or ()):
            for k, s in enumerate(ss.get("spans") or ()):
                try:
                    out.append(_otlp_json_span(s, resource))
                except (_Bad, ValueError, TypeError, KeyError, AttributeError) as exc:
                    reject(f"{where}: resourceSpans[{i}].scopeSpans[{j}].spans[{k}]: {_why(exc)}")
    return out


# --- SDK to_json -------------------------------------------------------------------------------
def _iso_ns(value: Any, field: str) -> int:
    if not value:
        return 0
    try:
        t = _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        raise _Bad(f"{field} {str(value)[:40]!r} is not an ISO 8601 time") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    delta = t - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def _sdk_value(v: Any) -> Any:
    return tuple(v) if isinstance(v, list) else v  # the SDK holds sequences as tuples


def _sdk_attributes(attrs: Any) -> dict[str, Any]:
    if not attrs:
        return {}
    if not isinstance(attrs, dict):
        raise _Bad("attributes is not an object")
    return {k: _sdk_value(v) for k, v in attrs.items()}


def _sdk_span(s: dict[str, Any]) -> RecordedSpan:
    c = s.get("context")
    if not isinstance(c, dict):
        raise _Bad("missing context")
    ctx = RecordedContext(_sdk_id(c.get("trace_id"), "context.trace_id", True),
                          _sdk_id(c.get("span_id"), "context.span_id", True))
    kind = _SDK_KIND.get(s.get("kind") or "SpanKind.INTERNAL")
    if kind is None:
        raise _Bad(f"unknown kind {s.get('kind')!r}")
    pid = s.get("parent_id")
    # to_json drops is_remote: a server or consumer span is taken as the entry of its service
    parent = RecordedContext(ctx.trace_id, _sdk_id(pid, "parent_id", True), kind in _ENTRY_KINDS) if pid else None
    st = s.get("status") or {}
    code = _STATUS_CODE.get(st.get("status_code", "UNSET"))
    if code is None:
        raise _Bad(f"unknown status.status_code {st.get('status_code')!r}")
    desc = st.get("description")
    status = RecordedStatus(code, desc) if desc else _STATUS[code.name]
    res = s.get("resource")
    resource = RecordedResource(_sdk_attributes(res.get("attributes"))) if isinstance(res, dict) else EMPTY_RESOURCE
    events = tuple(RecordedEvent(e.get("name", ""), _sdk_attributes(e.get("attributes")),
                                 _iso_ns(e.get("timestamp"), "events.timestamp")) for e in s.get("events") or ())
    return RecordedSpan(s.get("name") or "", ctx, parent, kind, _iso_ns(s.get("start_time"), "start_time"),
                        _iso_ns(s.get("end_time"), "end_time"), status, _sdk_attributes(s.get("attributes")),
                        events, resource)


def _sdk_id(value: Any, field: str, required: bool) -> int:
    if not isinstance(value, str) or not value:
        raise _Bad(f"missing {field}")
    try:
        n = int(value, 16)  # "0x…" is accepted by int(…, 16)
    except ValueError:
        raise _Bad(f"{field} {value[:40]!r} is not hex") from None
    if required and n == 0:
        raise _Bad(f"{field} is all zeros")
    return n


# --- one parsed JSON value, whatever it holds --------------------------------------------------
def _spans_from_json(value: Any, where: str, reject: Callable[[str], None]) -> list[RecordedSpan]:
    if isinstance(value, list):
        out: list[RecordedSpan] = []
        for i, item in enumerate(value):
            out.extend(_spans_from_json(item, f"{where}: item {i}", reject))
        return out
    if not isinstance(value, dict):
        raise _Bad(f"expected a JSON object, got {type(value).__name__}")
    if "resourceSpans" in value:
        return _otlp_json_request(value, where, reject)
    if "context" in value and "name" in value:
        return [_sdk_span(value)]
    if "resource_spans" in value:
        raise _Bad("snake_case OTLP JSON (resource_spans) is not supported: OTLP/JSON uses lowerCamelCase")
    if not value:  # {} is an empty request
        return []
    raise _Bad(f"neither an OTLP ExportTraceServiceRequest nor an SDK span (keys: {', '.join(sorted(value)[:5])})")


def _why(exc: BaseException) -> str:
    if isinstance(exc, _Bad):
        return str(exc)
    if isinstance(exc, KeyError):
        return f"missing {exc}"
    return f"{type(exc).__name__}: {exc}"


def _parse(data: bytes) -> Any:
    try:
        return _loads(data)
    except ValueError:
        return json.loads(data)  # orjson refuses what json takes (e.g. ints beyond 64 bits)


# --- files -------------------------------------------------------------------------------------
_WS = b" \t\r\n\xef\xbb\xbf"  # whitespace and a UTF-8 byte order mark
_ZSTD = b"\x28\xb5\x2f\xfd"


def _open(path: Path) -> tuple[IO[bytes], IO[bytes] | None]:
    """(decoded stream, raw file for progress; None for standard input, named ``-``)."""
    if str(path) == "-":
        import sys

        stdin: Any = sys.stdin.buffer
        head = stdin.peek(4)[:4]
        raw = None
        base: Any = stdin
    else:
        try:
            raw = open(path, "rb")  # noqa: SIM115 - closed by the caller
        except OSError as exc:
            raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
        head = raw.read(4)
        raw.seek(0)
        base = raw
    if head[:4] == _ZSTD:
        if raw is not None:
            raw.close()
        raise InputError(f"{path}: zstd-compressed; decompress it first (zstd -d)")
    if head[:2] == b"\x1f\x8b":
        return io.BufferedReader(gzip.GzipFile(fileobj=base, mode="rb"), 1 << 20), raw  # type: ignore[arg-type]
    return (io.BufferedReader(raw, 1 << 20) if raw is not None else base), raw  # type: ignore[arg-type]


def read_file(path: str | Path, counts: ReadCounts, on_reject: Reject, strict: bool = False,
              on_progress: Callable[[int], None] | None = None) -> Iterator[list[RecordedSpan]]:
    """The spans of one file in batches (one per record), in file order (end order within one)."""
    p = Path(path)
    f, raw = _open(p)
    if raw is None:
        on_progress = None  # standard input: no size, no position
    counts.files += 1
    lines_before = counts.lines

    def reject(msg: str) -> None:
        counts.rejected += 1
        if strict:
            raise RejectedInput(msg)
        on_reject(msg)

    try:
        kind = _detect(f, p)
        if kind is None:
            return  # an empty file holds no spans; not an error
        if kind == "json":
            yield from _json_file(p, f, counts, reject, raw, on_progress)
        else:
            from .protobuf import proto_file  # imported only when needed

            yield from proto_file(p, f, counts, reject, raw, on_progress)
    except (OSError, EOFError) as exc:  # a truncated gzip and the like: the rest is lost, say so
        reject(f"{p}: read failed after line {counts.lines - lines_before}, rest of file skipped: {exc}")
    finally:
        if raw is not None:
            f.close()
            raw.close()


_PB_SUFFIXES = {".pb", ".proto", ".bin", ".binpb"}


def _detect(f: IO[bytes], p: Path) -> str | None:
    """``json``, ``protobuf`` or None (empty). JSON opens with ``{"`` or ``[`` after whitespace;
    a protobuf length prefix can look like ``{`` (123) but is never followed by ``"``."""
    head = f.peek(4096)  # type: ignore[attr-defined]
    if not head:
        return None
    suffixes = [s.lower() for s in p.suffixes]
    if any(s in _PB_SUFFIXES for s in suffixes):
        return "protobuf"
    text = head.lstrip(_WS)
    if not text and len(head) < 4096:
        return None  # whitespace only
    if text[:1] == b"{" and text[1:].lstrip(_WS)[:1] in (b'"', b"}", b""):
        return "json"
    if text[:1] == b"[" and text[1:].lstrip(_WS)[:1] in (b"{", b"[", b"]", b""):
        return "json"
    return "protobuf"


def _json_file(p: Path, f: IO[bytes], counts: ReadCounts, reject: Callable[[str], None], raw: Any,
               on_progress: Callable[[int], None] | None) -> Iterator[list[RecordedSpan]]:
    """JSON lines, or pretty documents each closed by a ``}`` at column 0, or a pretty list."""
    pretty: bool | None = None  # decided by the first line: "{" alone opens a pretty document
    buf: list[bytes] = []
    start = n = 0
    for line in f:
        n += 1
        counts.lines += 1
        if on_progress is not None and not n & 7:
            on_progress(raw.tell())
        if not buf:
            s = line.strip(_WS)
            if not s:
                continue
            if pretty is None:
                pretty = s == b"{"
                if s[:1] == b"[" and not _parses(s):  # a pretty-printed list: read whole
                    rest = f.read()
                    counts.lines += rest.count(b"\n")
                    yield _record(line + rest, f"{p}:{n}", counts, reject)
                    return
            if not pretty:
                yield _record(s, f"{p}:{n}", counts, reject)
                continue
            start = n
        buf.append(line)
        if line[:1] == b"}":
            yield _record(b"".join(buf), f"{p}:{start}", counts, reject)
            buf = []
    if buf:
        yield _record(b"".join(buf), f"{p}:{start}", counts, reject)


def _parses(s: bytes) -> bool:
    try:
        _parse(s)
    except ValueError:
        return False
    return True


def _record(data: bytes, where: str, counts: ReadCounts, reject: Callable[[str], None]) -> list[RecordedSpan]:
    try:
        value = _parse(data)
    except ValueError as exc:
        reject(f"{where}: not valid JSON: {exc}")
        return []
    counts.records += 1
    try:
        spans = _spans_from_json(value, where, reject)
    except (_Bad, ValueError, TypeError, KeyError, AttributeError) as exc:
        reject(f"{where}: {_why(exc)}")
        return []
    if len(spans) > 1:
        spans.sort(key=_end_time)
    counts.spans += len(spans)
    return spans


def _end_time(s: RecordedSpan) -> int:
    return s.end_time


def iter_batches(paths: Iterable[str | Path], *, strict: bool = False, on_reject: Reject | None = None,
                 counts: ReadCounts | None = None,
                 on_progress: Callable[[Path, int], None] | None = None) -> Iterator[list[RecordedSpan]]:
    """Like :func:`iter_spans`, one list per record (cheaper per span)."""
    counts = counts if counts is not None else ReadCounts()
    report = on_reject if on_reject is not None else _to_stderr
    for path in paths:
        p = Path(path)
        prog = (lambda pos, _p=p: on_progress(_p, pos)) if on_progress is not None else None
        for batch in read_file(p, counts, report, strict, prog):
            if batch:
                yield batch


def iter_spans(paths: Iterable[str | Path], *, strict: bool = False, on_reject: Reject | None = None,
               counts: ReadCounts | None = None,
               on_progress: Callable[[Path, int], None] | None = None) -> Iterator[RecordedSpan]:
    """Every span of every file, in order. See the module docstring for formats and errors.

    ``on_reject(message)`` gets each bad line, record or span (default: print to stderr);
    ``counts`` (a :class:`ReadCounts`) is filled in as reading goes.
    """
    for batch in iter_batches(paths, strict=strict, on_reject=on_reject, counts=counts, on_progress=on_progress):
        yield from batch


def _to_stderr(msg: str) -> None:
    import sys

    print(f"otel-agenteval: rejected: {msg}", file=sys.stderr)

