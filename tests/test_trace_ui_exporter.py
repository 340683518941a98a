"""``PhoenixAnnotationExporter``: the processor's ``gen_ai.evaluation.result`` records, posted as
Phoenix span annotations, read back from a loopback HTTP server (Phoenix itself:
tests/test_trace_ui_phoenix.py). What Phoenix does not take is counted, never raised."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from conftest import ISSUE_POLICY, WRITES_ONLY, hex_span, hex_trace
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from serve_support import free_port

from otel_agenteval import Policy
from otel_agenteval.metrics.phoenix_annotations import PhoenixAnnotationExporter
from otel_agenteval.model.trajectory import short_hash


class AnnotationsEndpoint(BaseHTTPRequestHandler):
    """Records each request (path, headers, JSON body) and answers with the server's status."""

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.requests.append((self.path, dict(self.headers), json.loads(body)))  # type: ignore[attr-defined]
        self.send_response(self.server.status)  # type: ignore[attr-defined]
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def phoenix_api() -> Iterator[Any]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), AnnotationsEndpoint)
    server.requests = []  # type: ignore[attr-defined]
    server.status = 200  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def _provider(exporter: PhoenixAnnotationExporter) -> LoggerProvider:
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    return provider


def test_a_violation_is_an_annotation_on_the_offending_span(make_processor: Any, phoenix_api: Any) -> None:
    exporter = PhoenixAnnotationExporter(f"http://127.0.0.1:{phoenix_api.server_port}/",
                                         headers={"Authorization": "Bearer k-1"})
    provider = _provider(exporter)
    h = make_processor(Policy.from_yaml(ISSUE_POLICY + "outputs: {evaluation_runs: true}\n"),
                       logger_provider=provider)
    root = h.agent("support", 0, conv="conv-secret-42")
    h.tool(root, "create_claim", {"order_id": "88120"}, at=1)
    second = h.tool(root, "create_claim", {"order_id": "88120"}, at=2)
    h.end(root, 3)
    provider.shutdown()
    [v] = h.violations
    [(path, headers, first), (_, _, run)] = phoenix_api.requests
    assert (path, headers["Authorization"], headers["Content-Type"]) == ("/v1/span_annotations", "Bearer k-1",
                                                                         "application/json")
    assert first == {"data": [{
        "span_id": hex_span(second), "name": "duplicate_write", "annotator_kind": "CODE",
        "identifier": "otel-agenteval",
        "result": {"label": "fail", "explanation": v.message},
        "metadata": {"agenteval.violation.severity": "critical", "gen_ai.agent.name": "support",
                     "gen_ai.tool.name": "create_claim", "agenteval.conversation.hash": short_hash("conv-secret-42"),
                     "severity_text": "critical", "trace_id": hex_trace(second)},
    }]}
    assert "88120" not in json.dumps(first)  # argument values only as hashes, as in the events
    [verdict] = run["data"]
    assert (verdict["span_id"], verdict["name"], verdict["result"]["label"]) == (
        format(root.context.span_id, "016x"), "agenteval.trajectory", "pass")
    assert (exporter.sent, exporter.failed, exporter.skipped) == (2, 0, 0)


def test_a_budget_keeps_its_number_as_the_score(make_processor: Any, phoenix_api: Any) -> None:
    exporter = PhoenixAnnotationExporter(f"http://127.0.0.1:{phoenix_api.server_port}")
    provider = _provider(exporter)
    h = make_processor(ISSUE_POLICY, logger_provider=provider)
    h.run("support", [("lookup_order", {"n": i}) for i in range(9)])
    provider.shutdown()
    [budget] = [a for _, _, body in phoenix_api.requests for a in body["data"] if a["name"] == "budget_breach"]
    assert (budget["result"]["score"], budget["metadata"]["agenteval.budget.limit"]) == (9.0, 8.0)


def test_other_records_are_skipped_and_a_refusal_is_counted_not_raised(make_processor: Any,
                                                                       phoenix_api: Any) -> None:
    phoenix_api.status = 500
    exporter = PhoenixAnnotationExporter(f"http://127.0.0.1:{phoenix_api.server_port}")
    provider = _provider(exporter)
    provider.get_logger("app").emit(body="an ordinary log line")
    h = make_processor(WRITES_ONLY, logger_provider=provider)
    h.run("support", [("create_claim", {"order_id": "1"}), ("create_claim", {"order_id": "1"})])
    provider.shutdown()
    assert [r["name"] for _, _, body in phoenix_api.requests for r in body["data"]] == ["duplicate_write"]
    assert (exporter.sent, exporter.failed, exporter.skipped) == (0, 1, 1)
    assert len(h.trajectories) == 1  # the app's run went on


def test_nobody_listening_is_counted(make_processor: Any) -> None:
    exporter = PhoenixAnnotationExporter(f"http://127.0.0.1:{free_port()}", timeout_s=2)
    provider = _provider(exporter)
    h = make_processor(WRITES_ONLY, logger_provider=provider)
    h.run("support", [("create_claim", {"order_id": "1"}), ("create_claim", {"order_id": "1"})])
    provider.shutdown()
    assert (exporter.sent, exporter.failed) == (0, 1)


def test_a_bad_endpoint_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="invalid Phoenix endpoint: '127.0.0.1:6006'"):
        PhoenixAnnotationExporter("127.0.0.1:6006")
