"""One trace from two services; two replicas sharded by trace id like the Collector does it."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
from conftest import ns
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, set_span_in_context
from prometheus_client import CollectorRegistry
from serve_support import ALL_RULES, ALL_RULES_POLICY, HashRing, record_all_rules, scrape, settled, total, wait_until

from otel_agenteval import Policy
from otel_agenteval.receiver import Receiver, ServeConfig


def _receiver(made, policy=None, **kw):
    found, done = [], []
    cfg = ServeConfig(grpc_port=0, http_port=0, metrics_port=0, **{"grace_s": 0.2, "idle_s": 1.0, "log_violations": False, **kw})
    r = Receiver(cfg, policy, registry=CollectorRegistry(), on_violation=(found.append,),
                 on_trajectory=(done.append,)).start()
    r.violations, r.trajectories = found, done
    made.append(r)
    return r


@pytest.fixture
def made():
    rs = []
    yield rs
    for r in rs:
        r.stop()


def test_one_trace_from_two_services_is_one_trajectory(made):
    r = _receiver(made, Policy.from_yaml("tools: {create_claim: {write: true}}\n"
                                         "agents: {support: {budget: {max_steps: 2}}}\n", "<test>"),
                  grace_s=1.5, idle_s=10)
    agent_svc = TracerProvider(resource=Resource.create({"service.name": "agent-svc"}))
    tool_svc = TracerProvider(resource=Resource.create({"service.name": "tool-svc"}))
    agent_svc.add_span_processor(BatchSpanProcessor(HttpExporter(endpoint=f"http://127.0.0.1:{r.ports.http}/v1/traces")))
    tool_svc.add_span_processor(BatchSpanProcessor(GrpcExporter(endpoint=f"127.0.0.1:{r.ports.grpc}", insecure=True)))
    agent = agent_svc.get_tracer("agent").start_span(
        "invoke_agent support", attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"},
        start_time=ns(0))
    ctx = agent.get_span_context()
    remote = set_span_in_context(NonRecordingSpan(SpanContext(ctx.trace_id, ctx.span_id, is_remote=True,
                                                              trace_flags=ctx.trace_flags)))
    tools = tool_svc.get_tracer("tools")
    claim = json.dumps({"order_id": "88120"})
    # the tool host's clock runs 50 ms behind: its first tool "starts" before the agent does
    for i, (name, args) in enumerate([("lookup_order", '{"order_id": "88120"}'), ("create_claim", claim),
                                      ("create_claim", claim)]):
        server = tools.start_span(f"POST /tools/{name}", context=remote, kind=SpanKind.SERVER,
                                  start_time=ns(i - 0.05))
        tool = tools.start_span(f"execute_tool {name}", context=set_span_in_context(server), start_time=ns(i + 0.01),
                                attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                                            "gen_ai.tool.call.arguments": args})
        tool.end(end_time=ns(i + 0.5))
        server.end(end_time=ns(i + 0.6))
    agent.end(end_time=ns(5))
    agent_svc.force_flush()  # the root's batch first
    assert r.trajectories == []  # held for the grace period
    tool_svc.force_flush()
    wait_until(lambda: len(r.trajectories) == 1 and total(scrape(r.ports.metrics), "agenteval_receiver_held_spans") == 0,
               what="the trace played after its grace period")
    (t,) = r.trajectories
    assert (t.agent_name, t.service_name, t.outcome, [s.tool for s in t.steps]) == \
        ("support", "agent-svc", "unknown", ["lookup_order", "create_claim", "create_claim"])
    assert sorted((v.rule, v.tool, v.agent) for v in r.violations) == \
        [("budget_breach", "create_claim", "support"), ("duplicate_write", "create_claim", "support")]
    s = scrape(r.ports.metrics)
    assert total(s, "agenteval_trajectories_total") == 1
    assert total(s, "agenteval_receiver_traces_total", reason="root_end") == 1
    assert total(s, "agenteval_late_spans_total") == 0
    for p in (agent_svc, tool_svc):
        p.shutdown()


def _family_sums(samples_list):
    out = defaultdict(float)
    for s in samples_list:
        for (name, labels), v in s.items():
            if not name.startswith("agenteval_receiver_"):
                out[(name, labels)] += v
    return dict(out)


def test_two_replicas_sharded_by_trace_id_sum_to_one(made, make_processor):
    policy = Policy.from_yaml(ALL_RULES_POLICY, "<test>")
    h = make_processor(policy)
    memory = InMemorySpanExporter()
    h.provider.add_span_processor(SimpleSpanProcessor(memory))
    traces = sum(record_all_rules(h, at=200.0 * i, conv=f"c{i}", across_traces=False) for i in range(6))
    spans = memory.get_finished_spans()
    assert {v.rule for v in h.violations} == ALL_RULES

    single = _receiver(made, policy)
    a, b = _receiver(made, policy), _receiver(made, policy)
    ring = HashRing(["replica-a:4317", "replica-b:4317"])
    shards = defaultdict(list)
    for span in spans:
        shards[ring.endpoint_for(span.context.trace_id)].append(span)
    assert len(shards["replica-a:4317"]) and len(shards["replica-b:4317"])  # both replicas get traces
    send = {
        "replica-a:4317": HttpExporter(endpoint=f"http://127.0.0.1:{a.ports.http}/v1/traces"),
        "replica-b:4317": GrpcExporter(endpoint=f"127.0.0.1:{b.ports.grpc}", insecure=True),
    }
    for endpoint, part in shards.items():
        for i in range(0, len(part), 10):  # the Collector sends batches; any batching gives the same result
            assert send[endpoint].export(part[i:i + 10]).name == "SUCCESS"
    one = HttpExporter(endpoint=f"http://127.0.0.1:{single.ports.http}/v1/traces")
    assert one.export(spans).name == "SUCCESS"
    n_a = len({s.context.trace_id for s in shards["replica-a:4317"]})
    wait_until(settled(a.ports.metrics, n_a), what="replica a settled")
    wait_until(settled(b.ports.metrics, traces - n_a), what="replica b settled")
    wait_until(settled(single.ports.metrics, traces), what="single instance settled")

    summed = _family_sums([scrape(a.ports.metrics), scrape(b.ports.metrics)])
    alone = _family_sums([scrape(single.ports.metrics)])
    assert summed.keys() == alone.keys()
    assert summed == pytest.approx(alone)  # sums of float sums: equal to rounding
    assert total(alone, "agenteval_violations_total") == len(h.violations) > 0
    assert sorted(v.rule for v in a.violations + b.violations) == sorted(v.rule for v in h.violations)
