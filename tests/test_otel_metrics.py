"""The metrics through the SDK's MeterProvider: the GenAI agent metrics as the conventions state
them, ``agenteval.*`` read from the same families Prometheus serves (InMemoryMetricReader)."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import ISSUE_POLICY, WRITES_ONLY
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from otel_agenteval.metrics import catalogue as mc


@pytest.fixture
def reader() -> Any:
    r = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[r])
    yield provider, r
    provider.shutdown()


def _metrics(r: InMemoryMetricReader) -> dict[str, Any]:
    data = r.get_metrics_data()
    assert data is not None
    return {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}


def _points(metric: Any) -> dict[frozenset[tuple[str, Any]], Any]:
    return {frozenset(p.attributes.items()): p for p in metric.data.data_points}


def test_genai_agent_metrics_with_the_conventions_units_buckets_and_attributes(make_processor: Any,
                                                                              reader: Any) -> None:
    provider, r = reader
    h = make_processor(ISSUE_POLICY, meter_provider=provider)
    root = h.agent("support", 0)
    h.chat(root, at=0.5, inp=100, out=20)
    h.tool(root, "lookup_order", {"id": 1}, at=1, dur=0.3)
    h.tool(root, "create_claim", {"id": 1}, at=2, dur=0.05, error="timed out", end_attrs={"error.type": "Timeout"})
    h.end(root, 4)
    got = _metrics(r)
    agent = {"gen_ai.agent.name": "support", "gen_ai.operation.name": "invoke_agent"}
    expected = {  # name -> (unit, buckets, {attributes: (count, sum)})
        "gen_ai.invoke_agent.duration": ("s", mc.AGENT_DURATION_BUCKETS, {frozenset(agent.items()): (1, 4.0)}),
        "gen_ai.invoke_agent.inference_calls": ("{inference_call}", mc.CALL_COUNT_BUCKETS,
                                                {frozenset(agent.items()): (1, 1)}),
        "gen_ai.invoke_agent.tool_calls": ("{tool_call}", mc.CALL_COUNT_BUCKETS, {frozenset(agent.items()): (1, 2)}),
    }
    for name, (unit, buckets, points) in expected.items():
        m = got[name]
        assert (m.unit, {k: (p.count, p.sum) for k, p in _points(m).items()}) == (unit, points), name
        assert all(p.explicit_bounds == tuple(map(float, buckets)) for p in _points(m).values()), name
    tool = got["gen_ai.execute_tool.duration"]
    assert tool.unit == "s"
    base = {"gen_ai.agent.name": "support", "gen_ai.operation.name": "execute_tool"}
    assert {k: (p.count, round(p.sum, 6)) for k, p in _points(tool).items()} == {
        frozenset({**base, "gen_ai.tool.name": "lookup_order"}.items()): (1, 0.3),
        frozenset({**base, "gen_ai.tool.name": "create_claim", "error.type": "Timeout"}.items()): (1, 0.05),
    }
    assert [p.explicit_bounds for p in _points(tool).values()][0] == mc.TOOL_DURATION_BUCKETS


def test_agenteval_counters_equal_what_prometheus_serves(make_processor: Any, reader: Any) -> None:
    provider, r = reader
    h = make_processor(WRITES_ONLY, meter_provider=provider)
    h.run("support", [("create_claim", {"a": 1}), ("create_claim", {"a": 1}), ("lookup", {"q": 1})])
    got = _metrics(r)
    violations = got["agenteval.violations"]
    assert violations.unit == "{violation}" and violations.data.is_monotonic
    fired = {k: p.value for k, p in _points(violations).items() if p.value}
    assert fired == {frozenset({"service.name": "shop", "gen_ai.agent.name": "support",
                                "agenteval.rule": "duplicate_write", "gen_ai.tool.name": "create_claim",
                                "agenteval.severity": "critical"}.items()): 1}
    assert h.agent_value("agenteval_violations_total", "support", rule="duplicate_write", tool="create_claim",
                         severity="critical") == 1.0
    calls = {dict(k)["gen_ai.tool.name"]: p.value for k, p in _points(got["agenteval.tool_calls"]).items()}
    assert calls == {"create_claim": 2, "lookup": 1}
    runs = {dict(k)["agenteval.outcome"]: p.value for k, p in _points(got["agenteval.trajectories"]).items()}
    assert runs == {"success": 0, "failure": 0, "unknown": 1, "incomplete": 0}
    spans = {dict(k)["agenteval.kind"]: p.value for k, p in _points(got["agenteval.spans"]).items()}
    assert spans["tool"] == 3
    # every catalogue counter and gauge with an OTel name and a Prometheus series is an instrument
    served = {sample.name for family in h.registry.collect() for sample in family.samples}
    with_series = {d.otel for d in mc.CATALOGUE if d.otel and d.kind != "histogram"
                   and (f"{d.name}_total" if d.kind == "counter" else d.name) in served}
    assert len(with_series) >= 15
    assert with_series <= set(got)


def test_cost_by_outcome_gives_cost_per_successful_task(make_processor: Any, reader: Any) -> None:
    provider, r = reader
    h = make_processor(ISSUE_POLICY, meter_provider=provider)
    for i, tools in enumerate(([("create_claim", {"n": 1})], [("lookup", {"n": 2})])):
        root = h.agent("support", i * 10)
        h.chat(root, at=i * 10 + 0.5, inp=1_000_000, out=0)  # $2.50 each
        for name, args in tools:
            h.tool(root, name, args, at=i * 10 + 1)
        h.end(root, i * 10 + 2)
    cost = {dict(k)["agenteval.outcome"]: (p.count, p.sum) for k, p in
            _points(_metrics(r)["agenteval.trajectory.cost"]).items()}
    assert cost == {"success": (1, 2.5), "unknown": (1, 2.5)}


def test_no_meter_provider_means_no_bridge() -> None:
    import subprocess
    import sys

    code = ("import sys; from prometheus_client import CollectorRegistry; from otel_agenteval import TrajectoryProcessor;"
            " TrajectoryProcessor(registry=CollectorRegistry());"
            " assert 'otel_agenteval.metrics.otel' not in sys.modules, 'bridge loaded'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_through_a_real_otlp_exporter_cumulative_and_delta(make_processor: Any) -> None:
    """The SDK's OTLP/HTTP metric exporter to a loopback receiver decoding the protobuf; a delta
    exporter gets increments of the same cumulative counts."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
    from opentelemetry.sdk.metrics import Counter, ObservableCounter
    from opentelemetry.sdk.metrics.export import AggregationTemporality, PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource

    received: list[ExportMetricsServiceRequest] = []

    class Sink(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            req = ExportMetricsServiceRequest()
            req.ParseFromString(self.rfile.read(int(self.headers["Content-Length"])))
            received.append(req)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}/v1/metrics"
    delta = {Counter: AggregationTemporality.DELTA, ObservableCounter: AggregationTemporality.DELTA}
    readers = {kind: PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=endpoint, preferred_temporality=t),
                                                   export_interval_millis=3_600_000)
               for kind, t in (("cumulative", {}), ("delta", delta))}
    provider = MeterProvider(resource=Resource.create({"service.name": "shop", "service.instance.id": "worker-1"}),
                             metric_readers=list(readers.values()))
    try:
        h = make_processor(WRITES_ONLY, meter_provider=provider)
        exported: dict[str, list[list[float]]] = {"cumulative": [], "delta": []}
        for i in range(2):
            h.run("support", [("create_claim", {"a": i}), ("create_claim", {"a": i})], at=i * 10)
            for kind, reader in readers.items():
                received.clear()
                reader.force_flush()
                values = [p.as_int or p.as_double for req in received for rm in req.resource_metrics
                          for sm in rm.scope_metrics for m in sm.metrics if m.name == "agenteval.violations"
                          for p in m.sum.data_points if p.as_int or p.as_double]
                exported[kind].append(values)
                resource = {kv.key: kv.value.string_value for req in received
                            for kv in req.resource_metrics[0].resource.attributes}
                assert resource["service.instance.id"] == "worker-1"
        assert exported == {"cumulative": [[1], [2]], "delta": [[1], [1]]}
    finally:
        provider.shutdown()
        server.shutdown()
        server.server_close()
