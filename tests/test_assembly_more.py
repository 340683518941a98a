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
