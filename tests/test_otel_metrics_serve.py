"""``serve``'s own series (``agenteval_receiver_*``, ``agenteval_wal_*``) are catalogue entries like
every other metric: each family a real ``serve`` exposes after OTLP traffic is declared there, and
a MetricsBridge over serve's registry sends them through the SDK's MeterProvider."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from prometheus_client import generate_latest

from otel_agenteval import Policy
from otel_agenteval.metrics import catalogue as mc
from otel_agenteval.metrics.otel import MetricsBridge

RUNS = 3


def _traffic(port: int) -> None:
    """RUNS runs of one agent filing the same claim twice, over OTLP/HTTP, one request per span."""
    provider = TracerProvider(resource=Resource.create({"service.name": "shop"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(f"http://127.0.0.1:{port}/v1/traces")))
    tracer = provider.get_tracer("test")
    for _ in range(RUNS):
        with tracer.start_as_current_span("invoke_agent support", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}):
            for _ in range(2):
                with tracer.start_as_current_span("execute_tool create_claim", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "create_claim",
                        "gen_ai.tool.call.arguments": '{"order_id": "1"}'}):
                    pass
    provider.shutdown()


def test_every_family_serve_exposes_is_declared_and_goes_out_through_the_bridge(started_receivers: Any,
                                                                                 tmp_path: Path) -> None:
    receiver = started_receivers(Policy.from_yaml("tools:\n  create_claim: {write: true}\n"),
                                 wal_dir=str(tmp_path / "wal"), wal_max_bytes=64 << 20)
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    MetricsBridge(receiver.pipeline.metrics, provider)
    _traffic(receiver.ports.http)
    deadline = time.monotonic() + 20
    while (receiver.registry.get_sample_value("agenteval_receiver_traces_total", {"reason": "root_end"}) < RUNS
           and time.monotonic() < deadline):
        time.sleep(0.05)

    text = generate_latest(receiver.registry).decode()
    families = {re.sub(r"_total$", "", line.split()[2]) for line in text.splitlines()
                if line.startswith("# TYPE ") and not line.split()[2].endswith("_created")}
    declared = {d.name for d in mc.CATALOGUE if d.prometheus}
    assert {f for f in families if f.startswith(("agenteval_receiver_", "agenteval_wal_"))} >= {
        "agenteval_receiver_requests", "agenteval_receiver_spans", "agenteval_wal_bytes", "agenteval_wal_segments"}
    assert families - declared == set()

    data = reader.get_metrics_data()
    assert data is not None
    got = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    provider.shutdown()

    def points(name: str) -> dict[frozenset[tuple[str, Any]], float]:
        return {frozenset(p.attributes.items()): p.value for p in got[name].data.data_points}

    spans = points("agenteval.receiver.spans")
    assert spans[frozenset({"agenteval.protocol": "http", "agenteval.result": "accepted"}.items())] == 3 * RUNS
    assert got["agenteval.receiver.spans"].unit == "{span}" and got["agenteval.receiver.spans"].data.is_monotonic
    assert points("agenteval.receiver.traces")[frozenset({"agenteval.reason": "root_end"}.items())] == RUNS
    assert (got["agenteval.wal.limit"].unit, list(points("agenteval.wal.limit").values())) == ("By", [64 << 20])
    assert list(points("agenteval.receiver.queue.capacity").values()) == [receiver.config.queue_spans]
    # and the engine's own figures from the same registry, as for the processor
    violations = points("agenteval.violations")
    assert sum(violations.values()) == RUNS
    # every receiver and log entry with a series is an instrument
    served = {s.name for family in receiver.registry.collect() for s in family.samples}
    serve_own = [d for d in mc.CATALOGUE if d.name.startswith(("agenteval_receiver_", "agenteval_wal_"))]
    assert len(serve_own) == 23 and all(d.otel for d in serve_own)
    with_series = {d.otel for d in serve_own if (f"{d.name}_total" if d.kind == "counter" else d.name) in served}
    # labelled only when it happens: an error, a drain that ran out of time
    assert {d.otel for d in serve_own} - with_series == {"agenteval.receiver.errors", "agenteval.receiver.drain_lost"}
    assert with_series <= set(got)
