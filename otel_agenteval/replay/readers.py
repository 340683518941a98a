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

JSON is told from protobuf by its first bytes (``{"`` or ``[``), or a ``.pb`` name. A path
``-`` reads standard input. Streaming: a file is read line by line (or record by record), so
memory stays flat however big it is. Two forms are read whole because a document cannot be
split: a pretty-printed JSON *list* and a single protobuf message. Each bad line, record or span is reported through
``on_reject`` with file and line, counted, and skipped (or raised, when ``strict``).
Spans of one request are yielded in end-time order (the SDK's encoder groups them by scope).
Speed: OTLP/JSON requests are decoded typed when msgspec is installed (see :mod:`.decode`), and
the cyclic GC waits while a record is read (:func:`gc_paused`).
"""

from __future__ import annotations

import gzip
import io
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from .counts import InputError, ReadCounts, RejectedInput, gc_paused
from .formats.decode import parse, spans_from_json
from .formats.typed_json import typed_request
from .formats.values import Bad, end_time, why
from .spanview import RecordedSpan

__all__ = ["InputError", "ReadCounts", "RejectedInput", "gc_paused", "iter_batches", "iter_spans", "read_file"]

Reject = Callable[[str], None]


# --- files -------------------------------------------------------------------------------------
_WS = b" \t\r\n\xef\xbb\xbf"  # whitespace and a UTF-8 byte order mark
_ZSTD = b"\x28\xb5\x2f\xfd"
_OTLP_HEAD = b'"resourceSpans"'


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
        return io.BufferedReader(gzip.GzipFile(fileobj=base, mode="rb"), 1 << 20), raw  # type: ignore[arg-type,unused-ignore]
    return (io.BufferedReader(raw, 1 << 20) if raw is not None else base), raw  # type: ignore[arg-type,unused-ignore]


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
            from .formats.protobuf import proto_file  # imported only when needed

            yield from proto_file(p, f, counts, reject, raw, on_progress)
    except (OSError, EOFError) as exc:  # a truncated gzip and the like: the rest is lost, say so
        reject(f"{p}: read failed after line {counts.lines - lines_before}, rest of file skipped: {exc}")
    except RecursionError:  # a reader past Python's recursion limit: name the file, not only "input"
        reject(f"{p}: read failed after line {counts.lines - lines_before}, rest of file skipped: "
               "input nested too deeply to read")
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
    if not head.strip(b"\0"):  # read on, a zero-filled file would be millions of empty records
        raise InputError(f"{p}: not trace data: its first {len(head)} bytes are all zero (a file a crash or a "
                         "failed copy left zero-filled?)")
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
    if _is_text(head):
        if text[:1] in (b"{", b"["):
            return "json"  # JSON gone wrong: its lines are each rejected, with file and line
        raise InputError(f"{p}: not trace data: text that is neither OTLP JSON nor SDK JSON "
                         "(a protobuf file holds binary; formats: otel-agenteval replay --help)")
    return "protobuf"


# bytes a text file has and an OTLP protobuf request never lacks in its first bytes: a span's
# ids are 16 and 8 raw bytes after the tags 0x0a 0x10 and 0x12 0x08 (control characters)
_TEXT_BYTES = frozenset(b"\t\n\r\f" + bytes(range(0x20, 0x7f)) + bytes(range(0x80, 0x100)))


def _is_text(head: bytes) -> bool:
    """Printable UTF-8 text (Markdown, YAML, a log): not a protobuf file, whatever it is."""
    sample = head[:4096]
    if not sample or not _TEXT_BYTES.issuperset(sample):
        return False
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(sample) - 3  # a character cut at the end of the sample is fine
    return True


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
        parse(s)
    except ValueError:
        return False
    return True


def _record(data: bytes, where: str, counts: ReadCounts, reject: Callable[[str], None]) -> list[RecordedSpan]:
    with gc_paused():
        # an OTLP request (its first key tells) is read typed when it can be; else, or when
        # that gives up, as parsed dicts: the same spans, and the reader that names errors
        try:
            typed = typed_request(data) if typed_request is not None and _OTLP_HEAD in data[:64] else None
        except RecursionError:
            reject(f"{where}: not read: a value nested too deeply")
            return []
        if typed is not None:
            counts.records += 1
            spans = typed
        else:
            try:
                value = parse(data)
            except ValueError as exc:
                reject(f"{where}: not valid JSON: {exc}")
                return []
            except RecursionError:
                reject(f"{where}: not read: JSON nested too deeply")
                return []
            counts.records += 1
            try:
                spans = spans_from_json(value, where, reject)
            except RecursionError:
                reject(f"{where}: not read: a value nested too deeply")
                return []
            except (Bad, ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
                reject(f"{where}: {why(exc)}")
                return []
            del value
    if len(spans) > 1:
        spans.sort(key=end_time)  # stable, and one pass when already in end order
    counts.spans += len(spans)
    return spans


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

