"""Record spans to a file that ``replay`` and ``score`` read: OTLP JSON, one request per line.

The same encoding as the OpenTelemetry Collector's file exporter (hex ids), so recordings made
here and by a Collector are interchangeable.
"""

from __future__ import annotations

import base64
import gzip
import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

_ID_FIELDS = frozenset({"traceId", "spanId", "parentSpanId"})


def _hex_ids(doc: Any) -> Any:
    """protobuf's JSON mapping writes bytes as base64; OTLP/JSON writes trace and span ids in hex."""
    if isinstance(doc, dict):
        return {k: (base64.b64decode(v).hex() if k in _ID_FIELDS and isinstance(v, str) else _hex_ids(v))
                for k, v in doc.items()}
    if isinstance(doc, list):
        return [_hex_ids(v) for v in doc]
    return doc


def otlp_json_line(spans: Sequence[ReadableSpan]) -> str:
    """One ``ExportTraceServiceRequest`` as a single OTLP/JSON line."""
    doc = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    return json.dumps(_hex_ids(doc), separators=(",", ":"))


class OTLPJsonLinesExporter(SpanExporter):
    """A span exporter writing OTLP JSON lines to ``path`` (``.gz``: gzip). Thread-safe."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._file: IO[str] | None = (gzip.open(self.path, "wt", encoding="utf-8") if self.path.suffix == ".gz"
                                      else open(self.path, "w", encoding="utf-8"))
        self.spans_written = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if not spans:
            return SpanExportResult.SUCCESS
        line = otlp_json_line(spans)
        with self._lock:
            if self._file is None:
                return SpanExportResult.FAILURE
            self._file.write(line + "\n")
            self.spans_written += len(spans)
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        with self._lock:
            if self._file is not None:
                self._file.flush()
        return True

    def shutdown(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
