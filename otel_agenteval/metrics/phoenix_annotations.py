"""``gen_ai.evaluation.result`` records as Arize Phoenix span annotations.

Phoenix reads spans over OTLP but not log records, so the events of :mod:`.evaluation_events`
never reach its trace view by themselves. Phoenix's own word for an evaluation on a span is a
*span annotation* (name, label, score, explanation), the same four fields as the event: this
exporter turns each event that has a span into one annotation and posts a batch to Phoenix's REST
API (``POST /v1/span_annotations``), where the trace view shows it on that span.

It is a ``LogRecordExporter``: put it behind the SDK's ``BatchLogRecordProcessor`` on the
``LoggerProvider`` the processor is given. Posting then runs on the SDK's export thread, in
batches, with the SDK's bounded queue; nothing is added to the span path. Phoenix stores an
annotation that arrives before its span and applies it when the span comes. Records that are
not evaluation results are skipped; a batch Phoenix does not take is counted and logged.
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

try:
    from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
except ImportError:  # SDK < 1.39, before the Log -> LogRecord renames
    from opentelemetry.sdk._logs.export import LogExporter as LogRecordExporter
    from opentelemetry.sdk._logs.export import LogExportResult as LogRecordExportResult  # type: ignore[assignment]

from .evaluation_events import EVENT, EXPLANATION, NAME, SCORE_LABEL, SCORE_VALUE

log = logging.getLogger(__name__)
ANNOTATOR = "CODE"  # Phoenix's kinds: LLM, CODE, HUMAN
IDENTIFIER = "otel-agenteval"  # Phoenix keeps one annotation per (name, span, identifier)
RESULT_KEYS = (NAME, SCORE_LABEL, SCORE_VALUE, EXPLANATION)


def annotation(record: Any) -> dict[str, Any] | None:
    """The span annotation for one SDK log record, or None (not an evaluation result, no span)."""
    attrs: Mapping[str, Any] = record.attributes or {}
    event = getattr(record, "event_name", None) or attrs.get("event.name")  # the attribute: older SDKs
    if event != EVENT or not record.span_id or NAME not in attrs:
        return None
    result: dict[str, Any] = {"label": attrs.get(SCORE_LABEL), "explanation": attrs.get(EXPLANATION)}
    score = attrs.get(SCORE_VALUE)
    if isinstance(score, (int, float)) and not isinstance(score, bool):
        result["score"] = float(score)
    metadata = {k: v if isinstance(v, (str, int, float, bool)) else list(v)
                for k, v in attrs.items() if k not in RESULT_KEYS and k != "event.name"}
    if record.severity_text:
        metadata["severity_text"] = record.severity_text
    metadata["trace_id"] = format(record.trace_id, "032x")
    return {"span_id": format(record.span_id, "016x"), "name": str(attrs[NAME]), "annotator_kind": ANNOTATOR,
            "identifier": IDENTIFIER, "result": result, "metadata": metadata}


class PhoenixAnnotationExporter(LogRecordExporter):
    """Posts ``gen_ai.evaluation.result`` records to Phoenix (``endpoint``: its base URL) as span
    annotations. ``headers``: e.g. ``{"Authorization": "Bearer <api key>"}`` when Phoenix has
    authentication on. ``sent`` / ``failed`` / ``skipped`` count annotations and other records."""

    def __init__(self, endpoint: str = "http://127.0.0.1:6006", *, headers: Mapping[str, str] | None = None,
                 timeout_s: float = 10.0) -> None:
        if not endpoint.startswith(("http://", "https://")):
            raise ValueError(f"invalid Phoenix endpoint: {endpoint!r} (an http:// or https:// URL)")
        self.url = endpoint.rstrip("/") + "/v1/span_annotations"
        self._headers = {"Content-Type": "application/json", **(headers or {})}
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self.sent = self.failed = self.skipped = 0
        self._closed = False

    def export(self, batch: Sequence[Any]) -> LogRecordExportResult:
        found = [annotation(item.log_record) for item in batch]
        data = [a for a in found if a is not None]
        with self._lock:
            self.skipped += len(found) - len(data)
        if not data or self._closed:
            return LogRecordExportResult.SUCCESS if not data else LogRecordExportResult.FAILURE
        body = json.dumps({"data": data}).encode()
        request = urllib.request.Request(self.url, body, self._headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self._timeout_s) as response:
                response.read()
        except (OSError, ValueError) as e:  # HTTPError, URLError and timeouts are OSErrors
            with self._lock:
                self.failed += len(data)
                failed = self.failed
            log.warning("otel-agenteval: Phoenix did not take %d span annotations (%s; %d so far)", len(data), e,
                        failed)
            return LogRecordExportResult.FAILURE
        with self._lock:
            self.sent += len(data)
        return LogRecordExportResult.SUCCESS

    def shutdown(self) -> None:
        self._closed = True

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True  # nothing kept between exports
