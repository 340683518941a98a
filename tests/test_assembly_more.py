"""Assembly corner cases found in review."""

from __future__ import annotations


def test_llm_call_at_a_non_agent_root_before_the_agents_keeps_runs_apart(make_processor):
    h = make_processor()
    http = h.start("POST /chat", None, at=0)
    h.chat(http, at=0.5)  # e.g. an intent classifier before any agent runs
    a = h.agent("support", at=1, parent=http)
    h.tool(a, "lookup_order", {"order_id": "1"}, at=2)
    h.end(a, 3)
    b = h.agent("billing", at=4, parent=http)
    h.tool(b, "get_invoice", {"id": "9"}, at=5)
    h.end(b, 6)
    h.end(http, 7)
    by_agent = {t.agent_name: [s.tool for s in t.steps] for t in h.trajectories}
    assert by_agent == {"support": ["lookup_order"], "billing": ["get_invoice"], "unknown": []}
    assert [t.llm_calls for t in h.trajectories if t.agent_name == "unknown"] == [1]


def test_force_flush_can_leave_runs_in_flight(make_processor):
    from otel_agenteval import Policy, TrajectoryProcessor

    h = make_processor()
    from prometheus_client import CollectorRegistry

    keep = TrajectoryProcessor(Policy(), registry=CollectorRegistry(), finalise_on_flush=False)
    h.provider.add_span_processor(keep)
    root = h.agent("support", at=0)
    h.tool(root, "lookup_order", {"order_id": "1"}, at=1)
    assert keep.force_flush() is True
    assert keep.engine.open_trajectories == 1  # still in flight
    h.processor.force_flush()
    assert [t.outcome for t in h.trajectories] == ["incomplete"]  # the default: finalise on flush
    h.end(root, 2)
    assert keep.engine.open_trajectories == 0
    keep.shutdown()


def test_spans_of_other_classes_are_read_through_their_public_fields(make_processor):
    """Anything shaped like ReadableSpan (a wrapper, another SDK's span) is read like the SDK's own."""
    from types import SimpleNamespace

    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from otel_agenteval import Policy
    from otel_agenteval.engine.engine import Engine
    from otel_agenteval.reading.extract import FAST_SPANS

    h = make_processor("tools: {create_claim: {write: true}}")
    memory = InMemorySpanExporter()
    h.provider.add_span_processor(SimpleSpanProcessor(memory))
    root = h.agent("support", at=0, conv="c-1")
    h.chat(root, at=0.5, inp=100, out=20)
    h.tool(root, "create_claim", {"order_id": "1"}, at=1, error="boom")
    h.tool(root, "create_claim", {"order_id": "1"}, at=2)
    h.end(root, 3)
    spans = memory.get_finished_spans()  # in end order

    def duck(s):
        return SimpleNamespace(name=s.name, context=s.context, parent=s.parent, start_time=s.start_time,
                               end_time=s.end_time, status=s.status, attributes=dict(s.attributes),
                               events=tuple(s.events), resource=s.resource)

    got, found = [], []
    eng = Engine(Policy.from_yaml("tools: {create_claim: {write: true}}", "<test>"), on_finish=[got.append],
                 on_violation=[found.append])
    ducks = [duck(s) for s in spans]
    assert type(ducks[0]) not in FAST_SPANS
    for d in sorted(ducks, key=lambda d: d.start_time):
        eng.start(d)
    for d in ducks:
        eng.end(d)
    assert eng.stats["errors"]["on_start"] == eng.stats["errors"]["on_end"] == 0
    mine, theirs = got[0], h.trajectories[0]
    assert (mine.agent_name, mine.conversation_id, mine.llm_calls, mine.input_tokens, mine.tool_errors) == (
        theirs.agent_name, theirs.conversation_id, theirs.llm_calls, theirs.input_tokens, theirs.tool_errors)
    assert [(s.tool, s.ok, s.arguments) for s in mine.steps] == [(s.tool, s.ok, s.arguments) for s in theirs.steps]
    assert [v.rule for v in found] == [v.rule for v in h.violations] == ["write_retried_after_error"]


def test_a_subclass_that_overrides_on_end_is_still_called():
    from opentelemetry.sdk.trace import TracerProvider

    from otel_agenteval import TrajectoryProcessor

    seen = []

    class Counting(TrajectoryProcessor):
        def on_end(self, span):
            seen.append(span.name)
            super().on_end(span)

    from prometheus_client import CollectorRegistry

    proc = Counting(registry=CollectorRegistry())
    provider = TracerProvider()
    provider.add_span_processor(proc)
    with provider.get_tracer("t").start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
        pass
    assert seen == ["invoke_agent a"]
    assert proc.stats()["spans"]["agent"] == 1
