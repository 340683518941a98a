"""``serve`` against the in-process processor: one scenario that fires every rule, sent by the
SDK's own ``OTLPSpanExporter`` (HTTP and gRPC) to a receiver on loopback; equal findings."""

from __future__ import annotations

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from prometheus_client import CollectorRegistry, generate_latest
from serve_support import ALL_RULES, ALL_RULES_POLICY, record_all_rules, samples, scrape, settled, wait_until

from otel_agenteval import Policy
from otel_agenteval.receiver import Receiver, ServeConfig


def _key(v):
    return (v.rule, v.tool, v.agent, v.severity, v.trace_id, v.span_id, v.service_name)


@pytest.fixture
def receiver():
    made = []

    def make(policy=None, **config):
        found = []
        done = []
        cfg = ServeConfig(grpc_port=0, http_port=0, metrics_port=0, grace_s=0.2, idle_s=1.0, log_violations=False, **config)
        r = Receiver(cfg, policy, registry=CollectorRegistry(), on_violation=(found.append,),
                     on_trajectory=(done.append,)).start()
        r.violations, r.trajectories = found, done
        made.append(r)
        return r

    yield make
    for r in made:
        r.stop()


def _exporter(protocol: str, r: Receiver, compression: str = "none", **kw):
    if protocol == "http":
        return HttpExporter(endpoint=f"http://127.0.0.1:{r.ports.http}/v1/traces", compression=Compression(compression),
                            **kw)
    return GrpcExporter(endpoint=f"127.0.0.1:{r.ports.grpc}", insecure=True, compression={
        "none": grpc.Compression.NoCompression, "gzip": grpc.Compression.Gzip,
        "deflate": grpc.Compression.Deflate}[compression], **kw)


@pytest.mark.parametrize(("protocol", "loop", "compression"), [
    ("http", "uvloop", "none"), ("http", "asyncio", "none"), ("http", "auto", "gzip"), ("http", "auto", "deflate"),
    ("grpc", "auto", "none"), ("grpc", "auto", "gzip"),  # gzip: the Collector's otlp exporter default
    ("grpc", "auto", "deflate")])
def test_serve_finds_what_the_processor_finds(make_processor, receiver, protocol, loop, compression):
    policy = Policy.from_yaml(ALL_RULES_POLICY, "<test>")
    r = receiver(policy, loop=loop)
    assert r.loop == ("uvloop" if loop == "auto" else loop)  # uvloop comes with the serve extra
    h = make_processor(policy)
    h.provider.add_span_processor(BatchSpanProcessor(_exporter(protocol, r, compression), max_export_batch_size=7))
    traces = record_all_rules(h)
    h.provider.force_flush()
    wait_until(settled(r.ports.metrics, traces), what="every trace played")

    assert {v.rule for v in h.violations} == ALL_RULES  # the scenario fires every rule
    assert sorted(map(_key, r.violations)) == sorted(map(_key, h.violations))
    assert [(t.trace_id, t.agent_name, t.outcome, len(t.steps)) for t in r.trajectories] == \
        [(t.trace_id, t.agent_name, t.outcome, len(t.steps)) for t in h.trajectories]
    inproc = samples(generate_latest(h.registry).decode())
    served = scrape(r.ports.metrics)
    assert {k: served.get(k) for k in inproc} == inproc  # every series of the processor, equal values
    assert served[("agenteval_receiver_spans_total", frozenset({("protocol", protocol), ("result", "accepted")}))] > 0
    assert served[("agenteval_receiver_traces_total", frozenset({("reason", "root_end")}))] == traces - 1
    assert served[("agenteval_receiver_traces_total", frozenset({("reason", "idle_timeout")}))] == 1  # remote root
