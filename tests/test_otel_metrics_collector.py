"""The metrics bridge through a real OpenTelemetry Collector (issue 30: "through a real OTLP metrics
exporter to serve or a Collector"): the SDK's OTLP/HTTP metric exporter sends to the Collector's
otlp receiver, whose otlp exporter forwards over gRPC to a loopback MetricsService that keeps what
arrives. The Collector is the one .ci/build-collector.sh builds (skipped, with why, when it cannot)."""

from __future__ import annotations

import threading
import time
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from collector_support import collector, wait_healthy
from conftest import WRITES_ONLY
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from serve_support import free_port


class MetricsSink(metrics_service_pb2_grpc.MetricsServiceServicer):
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[Any] = []

    def Export(self, request: Any, context: Any) -> Any:  # noqa: N802 (the service's name)
        with self.lock:
            self.requests.append(request)
        return metrics_service_pb2.ExportMetricsServiceResponse()

    def metrics(self) -> dict[str, Any]:
        with self.lock:
            return {m.name: (m, rm.resource) for req in self.requests for rm in req.resource_metrics
                    for sm in rm.scope_metrics for m in sm.metrics}


def test_the_bridge_through_a_real_collector(make_processor: Any, tmp_path: Path) -> None:
    sink = MetricsSink()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(sink, server)
    sink_port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    http_port, health_port = free_port(), free_port()
    config = {
        "receivers": {"otlp": {"protocols": {"http": {"endpoint": f"127.0.0.1:{http_port}"}}}},
        "exporters": {"otlp": {"endpoint": f"127.0.0.1:{sink_port}", "tls": {"insecure": True}}},
        "extensions": {"health_check": {"endpoint": f"127.0.0.1:{health_port}"}},
        "service": {"extensions": ["health_check"],
                    "pipelines": {"metrics": {"receivers": ["otlp"], "exporters": ["otlp"]}},
                    "telemetry": {"metrics": {"level": "none"}}},
    }
    try:
        with collector(config, tmp_path, {}) as proc:
            wait_healthy(health_port, proc, tmp_path / "otelcol.log")
            reader = PeriodicExportingMetricReader(
                OTLPMetricExporter(endpoint=f"http://127.0.0.1:{http_port}/v1/metrics"),
                export_interval_millis=3_600_000)
            provider = MeterProvider(resource=Resource.create({"service.name": "shop", "service.instance.id": "w-1"}),
                                     metric_readers=[reader])
            h = make_processor(WRITES_ONLY, meter_provider=provider)
            h.run("support", [("create_claim", {"a": 1}), ("create_claim", {"a": 1})])
            provider.shutdown()  # exports once more and flushes
            deadline = time.monotonic() + 30
            while {"agenteval.violations", "gen_ai.invoke_agent.duration"} - set(sink.metrics()):
                assert time.monotonic() < deadline, (tmp_path / "otelcol.log").read_text()[-2000:]
                time.sleep(0.1)
    finally:
        server.stop(None)
    got = sink.metrics()
    violations, resource = got["agenteval.violations"]
    fired = [({kv.key: kv.value.string_value for kv in p.attributes}, p.as_int or p.as_double)
             for p in violations.sum.data_points if p.as_int or p.as_double]
    assert fired == [({"service.name": "shop", "gen_ai.agent.name": "support", "agenteval.rule": "duplicate_write",
                       "gen_ai.tool.name": "create_claim", "agenteval.severity": "critical"}, 1)]
    assert (violations.unit, violations.sum.is_monotonic) == ("{violation}", True)
    assert {kv.key: kv.value.string_value for kv in resource.attributes}["service.instance.id"] == "w-1"
    duration, _ = got["gen_ai.invoke_agent.duration"]
    [point] = duration.histogram.data_points
    assert (duration.unit, point.count, {kv.key: kv.value.string_value for kv in point.attributes}) == (
        "s", 1, {"gen_ai.agent.name": "support", "gen_ai.operation.name": "invoke_agent"})
