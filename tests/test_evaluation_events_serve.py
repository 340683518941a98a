"""``serve --otlp-logs-endpoint``: each violation reaches an OTLP/HTTP logs endpoint as a
``gen_ai.evaluation.result`` record on the offending span (a real serve process, the SDK's span
exporter, a small OTLP/HTTP logs receiver on loopback decoding the protobuf)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from conftest import WRITES_ONLY
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from serve_support import serve_process, settled, wait_until


class _LogsSink(BaseHTTPRequestHandler):
    received: list[ExportLogsServiceRequest]

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        req = ExportLogsServiceRequest()
        req.ParseFromString(body)
        self.server.received.append(req)  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *_: Any) -> None:
        pass


def test_serve_sends_violations_as_evaluation_events(make_processor: Any, tmp_path: Any) -> None:
    sink = ThreadingHTTPServer(("127.0.0.1", 0), _LogsSink)
    sink.received = []  # type: ignore[attr-defined]
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    policy = tmp_path / "agenteval.yaml"
    policy.write_text(WRITES_ONLY)
    try:
        endpoint = f"http://127.0.0.1:{sink.server_address[1]}/v1/logs"
        with serve_process("--policy", str(policy), "--grace", "0.2", "--otlp-logs-endpoint", endpoint) as (proc, up):
            h = make_processor(WRITES_ONLY)
            h.provider.add_span_processor(SimpleSpanProcessor(
                OTLPSpanExporter(endpoint=f"http://127.0.0.1:{up['http_port']}/v1/traces")))
            root = h.agent("support", 0)
            h.tool(root, "create_claim", {"order_id": "1"}, at=1)
            second = h.tool(root, "create_claim", {"order_id": "1"}, at=2)
            h.end(root, 3)
            wait_until(settled(up["metrics_port"], 1), what="the trace played")
            proc.terminate()  # shutdown flushes the batch of log records
            proc.wait(30)
        records = [(rl.resource, lr) for req in sink.received  # type: ignore[attr-defined]
                   for rl in req.resource_logs for sl in rl.scope_logs for lr in sl.log_records]
        [(resource, record)] = records
        attrs = {kv.key: kv.value.string_value for kv in record.attributes}
        assert record.event_name == "gen_ai.evaluation.result"
        assert (record.trace_id, record.span_id) == (second.context.trace_id.to_bytes(16, "big"),
                                                     second.context.span_id.to_bytes(8, "big"))
        assert (attrs["gen_ai.evaluation.name"], attrs["gen_ai.evaluation.score.label"],
                attrs["gen_ai.tool.name"]) == ("duplicate_write", "fail", "create_claim")
        assert {kv.key: kv.value.string_value for kv in resource.attributes}["service.name"] == "otel-agenteval"
        assert h.violations[0].message == attrs["gen_ai.evaluation.explanation"]
    finally:
        sink.shutdown()
        sink.server_close()


def test_serve_refuses_a_bad_logs_endpoint(tmp_path: Any) -> None:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "otel_agenteval", "serve", "--otlp-logs-endpoint", "collector:4318"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "invalid --otlp-logs-endpoint: 'collector:4318'" in out.stderr
