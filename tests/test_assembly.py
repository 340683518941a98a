"""Assembly: spans -> one trajectory per outermost agent run, bounded, through the real SDK."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from conftest import SERVICE, WRITES_ONLY, Harness, ns
from opentelemetry.sdk.trace import ReadableSpan, Span
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext, TraceFlags

from otel_agenteval import Trajectory

CLAIM_1 = {"order_id": "88120", "reason": "damaged"}
CLAIM_2 = {"order_id": "88120", "reason": "damaged_in_transit"}
SCENARIO_TOOLS = [
    ("lookup_order", True, {"order_id": "88120"}),
    ("get_policy", True, {"topic": "damaged_delivery"}),
    ("create_claim", False, CLAIM_1),
    ("create_claim", True, CLAIM_2),
]


def summary(t: Trajectory) -> dict[str, Any]:
    return {
        "agent": t.agent_name,
        "service": t.service_name,
        "tools": [(s.tool, s.ok, s.arguments) for s in t.steps],
        "llm_calls": t.llm_calls,
        "tokens": (t.input_tokens, t.output_tokens),
        "outcome": t.outcome,
        "conversation": t.conversation_id,
        "trace": t.trace_id,
        "finished": t.finished,
    }


# --- framework-shaped runs (the scenario of span-shapes.md) --------------------------------------

def span(h: Harness, name: str, parent: Span | None, at: float, end: float, start_attrs: dict[str, Any] | None = None,
         end_attrs: dict[str, Any] | None = None, events: Any = (), error: str | None = None) -> Span:
    return h.end(h.start(name, parent, at, start_attrs), end, end_attrs, events=events, error=error)


def pydantic_ai_run(h: Harness, at: float = 0.0, conv: str = "conv-1") -> Span:
    """Flat: invoke_agent -> chat / execute_tool; args at start, aggregated usage on the agent."""
    root = h.agent("support_agent", at, conv=conv, model_name="gpt-4o")

    def tool(name: str, args: dict[str, Any], start: float, end: float, call_id: str, ok: bool = True) -> Span:
        s = h.start(f"execute_tool {name}", root, at + start,
                    {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.call.id": call_id,
                     "gen_ai.tool.call.arguments": json.dumps(args), "gen_ai.agent.name": "support_agent",
                     "gen_ai.conversation.id": conv})
        if ok:
            return h.end(s, at + end, {"gen_ai.tool.call.result": "ok"})
        return h.end(s, at + end, {"gen_ai.tool.call.result": "carrier down"}, error="",
                     events=[("exception", {"exception.type": "pydantic_ai.exceptions.ToolRetryError"})])

    h.chat(root, at=at + 0.1, inp=100, out=20)
    lookup = h.start("execute_tool lookup_order", root, at + 0.40,
                     {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order",
                      "gen_ai.tool.call.id": "call_lookup_1", "gen_ai.tool.call.arguments": '{"order_id":"88120"}',
                      "gen_ai.conversation.id": conv})
    tool("get_policy", {"topic": "damaged_delivery"}, 0.41, 0.5, "call_policy_1")  # parallel, ends first
    h.end(lookup, at + 0.6, {"gen_ai.tool.call.result": '{"status": "delivered"}'})
    h.chat(root, at=at + 0.7, inp=200, out=30)
    tool("create_claim", CLAIM_1, 1.0, 1.1, "call_claim_1", ok=False)
    h.chat(root, at=at + 1.2, inp=300, out=40)
    tool("create_claim", CLAIM_2, 1.4, 1.5, "call_claim_2")
    h.chat(root, at=at + 1.6, inp=400, out=50)
    return h.end(root, at + 2.0, {"gen_ai.aggregated_usage.input_tokens": 1000,
                                  "gen_ai.aggregated_usage.output_tokens": 140})


def openai_agents_run(h: Harness, at: float = 0.0) -> Span:
    """workflow AGENT -> CHAIN -> AGENT(agent.name) -> turn CHAIN -> response LLM + TOOL; attrs at end."""
    kind = "openinference.span.kind"
    wf = h.start("support_workflow", None, at, {kind: "AGENT"})
    task = h.start("support_workflow", wf, at + 0.01, {kind: "CHAIN"})
    agent = h.start("support_agent", task, at + 0.02, {kind: "AGENT"})

    def response(turn: Span, start: float, inp: int, out: int) -> None:
        span(h, "response", turn, at + start, at + start + 0.05, {kind: "LLM", "llm.system": "openai"},
             {"llm.model_name": "gpt-4o-2024-08-06", "llm.token_count.prompt": inp,
              "llm.token_count.completion": out, "llm.token_count.total": inp + out})

    def tool_end(s: Span, end: float, name: str, args: dict[str, Any], error: str | None = None) -> None:
        h.end(s, at + end, {"tool.name": name, "input.value": json.dumps(args), "output.value": "done"},
              error=error)

    turn = h.start("turn", agent, at + 0.1, {kind: "CHAIN"})
    response(turn, 0.11, 100, 20)
    lookup = h.start("lookup_order", turn, at + 0.2, {kind: "TOOL"})
    policy = h.start("get_policy", turn, at + 0.21, {kind: "TOOL"})
    tool_end(policy, 0.25, "get_policy", {"topic": "damaged_delivery"})
    tool_end(lookup, 0.3, "lookup_order", {"order_id": "88120"})
    h.end(turn, at + 0.31)
    turn = h.start("turn", agent, at + 0.4, {kind: "CHAIN"})
    response(turn, 0.41, 200, 30)
    tool_end(h.start("create_claim", turn, at + 0.5, {kind: "TOOL"}), 0.55, "create_claim", CLAIM_1,
             error="Error running tool (non-fatal)")
    h.end(turn, at + 0.56)
    turn = h.start("turn", agent, at + 0.6, {kind: "CHAIN"})
    response(turn, 0.61, 300, 40)
    tool_end(h.start("create_claim", turn, at + 0.7, {kind: "TOOL"}), 0.75, "create_claim", CLAIM_2)
    h.end(turn, at + 0.76)
    turn = h.start("turn", agent, at + 0.8, {kind: "CHAIN"})
    response(turn, 0.81, 400, 50)
    h.end(turn, at + 0.9)
    h.end(agent, at + 0.95, {"agent.name": "support_agent", "graph.node.id": "support_agent"})
    h.end(task, at + 0.96)
    return h.end(wf, at + 1.0)


def strands_run(h: Harness, at: float = 0.0, session: str = "sess-1") -> Span:
    """invoke_agent -> execute_event_loop_cycle -> chat + execute_tool; nothing at start, content in events."""
    root = h.start("invoke_agent support_agent", None, at)
    common = {"gen_ai.system": "strands-agents", "session.id": session}

    def cycle(start: float, inp: int, out: int, tools: list[tuple[str, dict[str, Any], bool]]) -> None:
        c = h.start("execute_event_loop_cycle", root, at + start)
        span(h, "chat", c, at + start + 0.01, at + start + 0.05, None,
             {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o", **common,
              "gen_ai.usage.prompt_tokens": inp, "gen_ai.usage.input_tokens": inp,
              "gen_ai.usage.completion_tokens": out, "gen_ai.usage.output_tokens": out,
              "gen_ai.usage.total_tokens": inp + out})
        for i, (name, args, ok) in enumerate(tools):
            events = [("gen_ai.tool.message", {"role": "tool", "content": json.dumps(args), "id": f"t{i}"})]
            if ok:
                events.append(("gen_ai.choice", {"message": '[{"text": "done"}]', "id": f"t{i}"}))
            else:
                events.append(("exception", {"exception.type": "ValueError", "exception.message": "carrier down"}))
            span(h, f"execute_tool {name}", c, at + start + 0.06 + i * 0.01, at + start + 0.08 + i * 0.01, None,
                 {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.call.id": f"t{i}",
                  "gen_ai.tool.status": "success" if ok else "error", **common},
                 events=events, error=None if ok else "carrier down")
        h.end(c, at + start + 0.2, {"gen_ai.operation.name": "execute_event_loop_cycle", "event_loop.cycle_id": "x"})

    cycle(0.1, 100, 20, [("lookup_order", {"order_id": "88120"}, True),
                         ("get_policy", {"topic": "damaged_delivery"}, True)])
    cycle(0.4, 200, 30, [("create_claim", CLAIM_1, False)])
    cycle(0.7, 300, 40, [("create_claim", CLAIM_2, True)])
    cycle(1.0, 400, 50, [])
    return h.end(root, at + 1.5, {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support_agent",
                                  **common, "gen_ai.usage.input_tokens": 1000, "gen_ai.usage.prompt_tokens": 1000,
                                  "gen_ai.usage.output_tokens": 140, "gen_ai.usage.completion_tokens": 140})


def langgraph_run(h: Harness, at: float = 0.0, session: str = "lg-1") -> Span:
    """AGENT root -> agent CHAIN -> RunnableSequence -> LLM; tools CHAIN -> TOOL. All attributes at end."""
    kind = "openinference.span.kind"
    meta = {"session.id": session, "metadata": json.dumps({"session_id": session})}
    root = h.start("support_agent", None, at)

    def model_step(start: float, inp: int, out: int) -> None:
        step = h.start("agent", root, at + start)
        seq = h.start("RunnableSequence", step, at + start + 0.01)
        span(h, "Prompt", seq, at + start + 0.02, at + start + 0.03, None, {kind: "CHAIN", **meta})
        span(h, "FakeToolModel", seq, at + start + 0.03, at + start + 0.06, None,
             {kind: "LLM", "llm.token_count.prompt": inp, "llm.token_count.completion": out, **meta})
        h.end(seq, at + start + 0.07, {kind: "CHAIN", **meta})
        h.end(step, at + start + 0.08, {kind: "CHAIN", **meta})

    def tool_step(start: float, name: str, value: str, error: str | None = None) -> None:
        tools = h.start("tools", root, at + start)
        span(h, name, tools, at + start + 0.01, at + start + 0.05, None,
             {kind: "TOOL", "tool.name": name, "input.value": value, "output.value": "{}", **meta},
             events=[("exception", {"exception.type": "ValueError"})] if error else (), error=error)
        h.end(tools, at + start + 0.06, {kind: "CHAIN", **meta})

    model_step(0.1, 100, 20)
    tool_step(0.2, "lookup_order", "88120")
    tool_step(0.3, "get_policy", '{"topic": "damaged_delivery"}')
    model_step(0.4, 200, 30)
    tool_step(0.5, "create_claim", json.dumps(CLAIM_1), error="ValueError('carrier down')\nTraceback…")
    model_step(0.6, 300, 40)
    tool_step(0.7, "create_claim", json.dumps(CLAIM_2))
    model_step(0.8, 400, 50)
    return h.end(root, at + 1.0, {kind: "AGENT", "input.value": '{"messages": ["My order 88120…"]}',
                                  "output.value": '{"messages": ["Claim created"]}', **meta})


RUNS: dict[str, Callable[[Harness], Span]] = {
    "pydantic-ai": pydantic_ai_run,
    "openai-agents": openai_agents_run,
    "strands": strands_run,
    "langgraph": langgraph_run,
}
LOOKUP_ARGS = {"langgraph": {"input": "88120"}}
CONVERSATION = {"pydantic-ai": "conv-1", "openai-agents": None, "strands": "sess-1", "langgraph": "lg-1"}
AGENT: dict[str, str] = {}  # every framework names its agent support_agent


@pytest.mark.parametrize("framework", RUNS)
def test_one_trajectory_per_framework_run(make_processor: Any, framework: str) -> None:
    h = make_processor(WRITES_ONLY)
    root = RUNS[framework](h)
    tools = [(n, ok, LOOKUP_ARGS.get(framework, a) if n == "lookup_order" else a) for n, ok, a in SCENARIO_TOOLS]
    assert [summary(t) for t in h.trajectories] == [{
        "agent": AGENT.get(framework, "support_agent"),
        "service": SERVICE,
        "tools": tools,
        "llm_calls": 4,
        "tokens": (1000, 140),  # from the LLM spans; the agent span's totals are not added again
        "outcome": "unknown",
        "conversation": CONVERSATION[framework],
        "trace": root.context.trace_id,
        "finished": True,
    }]
    assert h.agent_value("agenteval_trajectories_total", AGENT.get(framework, "support_agent"),
                         outcome="unknown") == 1.0
    assert h.value("agenteval_open_trajectories") == 0.0
    assert h.value("agenteval_late_spans_total") == 0.0
    assert h.value("agenteval_processor_errors_total", stage="on_end") == 0.0
    # the failed create_claim was followed by a successful one with different args: nothing to flag
    assert h.violations == []


def test_span_kinds_counted(make_processor: Any) -> None:
    h = make_processor()
    strands_run(h)
    counts = {k: h.value("agenteval_spans_total", kind=k) for k in ("tool", "llm", "agent", "other")}
    assert counts == {"tool": 4.0, "llm": 4.0, "agent": 1.0, "other": 4.0}  # 4 event-loop cycles walked through


def test_steps_ordered_by_start_when_parallel_tools_end_out_of_order(make_processor: Any) -> None:
    h = make_processor()
    root = h.agent("support", 0)
    a = h.start("execute_tool a", root, 1.0, {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "a"})
    b = h.start("execute_tool b", root, 1.1, {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "b"})
    c = h.start("execute_tool c", root, 1.2, {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "c"})
    h.end(c, 1.3)
    h.end(b, 1.5)
    h.end(a, 2.0)
    h.end(root, 3.0)
    (t,) = h.trajectories
    assert [(s.tool, s.index, s.start_ns) for s in t.steps] == [("a", 0, ns(1.0)), ("b", 1, ns(1.1)),
                                                                ("c", 2, ns(1.2))]


def test_two_agent_runs_under_one_http_root(make_processor: Any) -> None:
    h = make_processor()
    http = h.start("POST /support", None, 0, {"http.request.method": "POST"})
    first = h.run("triage", [("lookup_order", {"order_id": "1"})], at=1, parent=http)
    assert [t.agent_name for t in h.trajectories] == ["triage"]  # finalised when its agent span ends
    second = h.run("support", [("create_claim", {"order_id": "1"}), ("issue_refund", {"order_id": "1"})], at=10,
                   parent=http)
    h.end(http, 20)
    assert [(t.agent_name, t.key, [s.tool for s in t.steps]) for t in h.trajectories] == [
        ("triage", first.context.span_id, ["lookup_order"]),
        ("support", second.context.span_id, ["create_claim", "issue_refund"]),
    ]
    assert {t.trace_id for t in h.trajectories} == {http.context.trace_id}


def test_trace_without_agent_span_uses_its_local_root(make_processor: Any) -> None:
    h = make_processor()
    http = h.start("POST /claims", None, 0, {"http.request.method": "POST"})
    h.chat(http, at=1, inp=10, out=5)
    h.tool(http, "create_claim", {"order_id": "7"}, at=2)
    h.end(http, 3, error="upstream 500")
    (t,) = h.trajectories
    assert (t.key, t.agent_name, [s.tool for s in t.steps], t.llm_calls, t.outcome, t.duration_s) == (
        http.context.span_id, "unknown", ["create_claim"], 1, "failure", 3.0)


def test_trace_under_a_remote_parent_uses_its_local_root(make_processor: Any) -> None:
    h = make_processor()
    remote = SpanContext(trace_id=0xABC, span_id=0xDEF, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    root = h.run("support", [("lookup_order", {"order_id": "1"})], parent=remote)
    (t,) = h.trajectories
    assert (t.key, t.trace_id, t.agent_name) == (root.context.span_id, 0xABC, "support")


def test_nested_agent_openai_agents_style_named_after_nested(make_processor: Any) -> None:
    h = make_processor()
    openai_agents_run(h)
    assert [(t.agent_name, t.root.name if t.root else None) for t in h.trajectories] == [
        ("support_agent", "support_agent")]
    assert h.agent_value("agenteval_trajectories_total", "support_agent", outcome="unknown") == 1.0
    assert h.agent_value("agenteval_tool_calls_total", "support_agent", tool="create_claim", status="error") == 1.0


def test_nested_named_agent_stays_in_the_outer_trajectory(make_processor: Any) -> None:
    """A sub-agent invoked inside a named agent run is part of that run, not a second trajectory."""
    h = make_processor()
    outer = h.agent("support", 0)
    inner = h.agent("refunds", 1, parent=outer)
    h.tool(inner, "issue_refund", {"order_id": "1"}, at=2)
    h.end(inner, 3)
    h.tool(outer, "create_claim", {"order_id": "1"}, at=4)
    h.end(outer, 5)
    assert [(t.agent_name, [s.tool for s in t.steps]) for t in h.trajectories] == [
        ("support", ["issue_refund", "create_claim"])]


def test_late_spans_counted_never_crash(make_processor: Any) -> None:
    h = make_processor()
    root = h.agent("support", 0)
    straggler = h.start("execute_tool lookup_order", root, 1,
                        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order"})
    slow_chat = h.start("chat gpt-4o", root, 1, {"gen_ai.operation.name": "chat"})
    h.tool(root, "get_policy", {"topic": "x"}, at=1.5)
    h.end(root, 2)  # the root ends first: the trajectory is final
    h.end(straggler, 3)
    h.end(slow_chat, 4, {"gen_ai.usage.input_tokens": 10})
    (t,) = h.trajectories
    assert ([s.tool for s in t.steps], t.llm_calls) == (["get_policy"], 0)
    assert h.value("agenteval_late_spans_total") == 2.0
    assert h.value("agenteval_processor_errors_total", stage="on_end") == 0.0
    assert h.agent_value("agenteval_tool_calls_total", "support", tool="lookup_order", status="ok") is None


def test_non_agent_traces_make_no_trajectory(make_processor: Any) -> None:
    h = make_processor()
    for i in range(3):
        http = h.start("GET /orders", None, i, {"http.request.method": "GET"})
        h.end(h.start("SELECT orders", http, i + 0.1, {"db.system": "postgresql"}), i + 0.2)
        h.end(h.start("execute_tool not_really", http, i + 0.3, {"http.route": "/x"}), i + 0.4)
        h.end(http, i + 0.5)
    assert h.trajectories == []
    assert h.value("agenteval_spans_total", kind="other") == 9.0
    assert h.value("agenteval_open_trajectories") == 0.0
    assert h.processor.engine._routes == {}  # nothing kept for traces without agent activity


# --- bounds: capacity, TTL, steps -------------------------------------------------------------------

def test_eviction_by_capacity_finalises_incomplete(make_processor: Any) -> None:
    h = make_processor("limits: {max_open_trajectories: 2}")
    agents = [h.agent(f"agent{i}", i) for i in range(3)]
    for i, a in enumerate(agents):
        h.tool(a, "lookup_order", {"order_id": str(i)}, at=i + 0.5)
    # the third open trajectory pushed out the oldest, finalised as incomplete (not dropped)
    assert [(t.agent_name, t.outcome, len(t.steps)) for t in h.trajectories] == [("agent0", "incomplete", 1)]
    assert h.value("agenteval_trajectories_evicted_total", reason="capacity") == 1.0
    assert h.agent_value("agenteval_trajectories_total", "agent0", outcome="incomplete") == 1.0
    assert h.value("agenteval_open_trajectories") == 2.0
    for i, a in enumerate(agents):
        h.end(a, 10 + i)
    assert [(t.agent_name, t.outcome) for t in h.trajectories] == [
        ("agent0", "incomplete"), ("agent1", "unknown"), ("agent2", "unknown")]
    assert h.value("agenteval_late_spans_total") == 1.0  # agent0's own end came after its eviction


def test_eviction_by_capacity_spares_the_run_still_active(make_processor: Any) -> None:
    h = make_processor("limits: {max_open_trajectories: 2}")
    busy, idle = h.agent("busy", 0), h.agent("idle", 1)
    h.tool(busy, "lookup_order", {"order_id": "1"}, at=0.5)
    h.tool(idle, "lookup_order", {"order_id": "2"}, at=1.5)
    h.tool(busy, "get_policy", {"topic": "a"}, at=2.5)  # the older run is still at work
    third = h.agent("third", 3)
    h.tool(third, "lookup_order", {"order_id": "3"}, at=3.5)
    assert [(t.agent_name, t.outcome) for t in h.trajectories] == [("idle", "incomplete")]
    h.tool(busy, "create_claim", {"order_id": "1"}, at=4.5)
    fourth = h.agent("fourth", 5)
    h.tool(fourth, "lookup_order", {"order_id": "4"}, at=5.5)
    assert [t.agent_name for t in h.trajectories] == ["idle", "third"]  # idle since 3.5; busy was seen at 4.5
    h.end(busy, 6)
    assert [(t.agent_name, t.outcome, len(t.steps)) for t in h.trajectories][-1] == ("busy", "unknown", 3)


def test_raw_tool_counts_are_bounded_and_lose_no_call(make_processor: Any) -> None:
    # tool names come from models: past the cap (max_tool_labels per agent; the policy's tools
    # always count apart) new names count as "other"; many agents do not push a tool into "other"
    h = make_processor("tools: {create_claim: {write: true}}\nlimits: {max_tool_labels: 2}")
    h.run("support", [(f"tool_{i}", {}) for i in range(70)])
    h.run("support", [("tool_0", {}), ("tool_69", {}), ("create_claim", {"id": 1})])
    counts = h.processor.stats()["tool_calls"]
    assert len(counts) == 2 + 1 + 1
    assert counts[(SERVICE, "support", "tool_0", True)] == 2
    assert counts[(SERVICE, "support", "create_claim", True)] == 1
    assert counts[(SERVICE, "support", "other", True)] == 70 - 2 + 1
    assert sum(counts.values()) == 73
    for i in range(200):
        h.run(f"agent_{i}", [("lookup_order", {})])
    counts = h.processor.stats()["tool_calls"]
    assert all(counts[(SERVICE, f"agent_{i}", "lookup_order", True)] == 1 for i in range(200))


def test_eviction_by_ttl_is_driven_by_span_time(make_processor: Any) -> None:
    h = make_processor("limits: {trajectory_ttl_s: 10}")
    stale = h.agent("stale", 0)
    h.tool(stale, "lookup_order", {"order_id": "1"}, at=1)
    h.run("fresh", [("get_policy", {"topic": "a"})], at=5)  # within the TTL of the stale run
    assert [t.agent_name for t in h.trajectories] == ["fresh"]
    h.run("later", [("get_policy", {"topic": "b"})], at=30)  # span time moves past 1 s + 10 s
    assert [(t.agent_name, t.outcome) for t in h.trajectories] == [
        ("fresh", "unknown"), ("stale", "incomplete"), ("later", "unknown")]
    assert h.value("agenteval_trajectories_evicted_total", reason="ttl") == 1.0
    assert h.agent_value("agenteval_trajectories_total", "stale", outcome="incomplete") == 1.0


def test_max_steps_per_trajectory_keeps_counting(make_processor: Any) -> None:
    h = make_processor("limits: {max_steps_per_trajectory: 3}")
    h.run("support", [("lookup_order", {"order_id": str(i)}) for i in range(5)])
    (t,) = h.trajectories
    assert (t.tool_calls, len(t.steps), t.steps_dropped) == (5, 3, 2)
    assert h.value("agenteval_steps_dropped_total") == 2.0
    assert h.agent_value("agenteval_trajectory_steps_sum", "support") == 5.0
    assert h.agent_value("agenteval_tool_calls_total", "support", tool="lookup_order", status="ok") == 5.0


# --- conversations -------------------------------------------------------------------------------

@pytest.mark.parametrize("attr", ["gen_ai.conversation.id", "session.id"])
def test_conversation_state_shared_across_trajectories(make_processor: Any, attr: str) -> None:
    h = make_processor(WRITES_ONLY)
    for i, conv in enumerate(["c1", "c2", "c1"]):
        root = h.agent("support", i * 10)
        h.tool(root, "lookup_order", {"order_id": "1"}, at=i * 10 + 1, end_attrs={attr: conv})
        h.end(root, i * 10 + 2)
    a, b, c = h.trajectories
    assert (a.conversation_id, b.conversation_id, c.conversation_id) == ("c1", "c2", "c1")
    assert a.conversation is c.conversation and a.conversation is not b.conversation


def test_conversation_dropped_after_its_ttl(make_processor: Any) -> None:
    h = make_processor(WRITES_ONLY + "limits: {conversation_ttl_s: 60}")
    h.run("support", [("create_claim", {"order_id": "1"})], at=0, conv="c1")
    h.run("support", [("lookup_order", {"order_id": "2"})], at=980, conv="other")  # a sweep at 981 s
    h.run("support", [("create_claim", {"order_id": "1"})], at=1000, conv="c1")
    assert h.violations == []  # the first turn's write was forgotten with its conversation
    assert h.trajectories[0].conversation is not h.trajectories[2].conversation
    assert h.value("agenteval_conversations_evicted_total", reason="ttl") == 1.0


def test_conversation_expired_even_without_a_sweep_in_between(make_processor: Any) -> None:
    """The next turn of an expired conversation must not see the old state, whatever the sweep timing."""
    h = make_processor(WRITES_ONLY + "limits: {conversation_ttl_s: 60}")
    h.run("support", [("create_claim", {"order_id": "1"})], at=0, conv="c1")
    h.run("support", [("create_claim", {"order_id": "1"})], at=1000, conv="c1")
    assert h.violations == []
    assert h.value("agenteval_conversations_evicted_total", reason="ttl") == 1.0


def test_conversation_kept_within_its_ttl(make_processor: Any) -> None:
    h = make_processor(WRITES_ONLY + "limits: {conversation_ttl_s: 60}")
    h.run("support", [("create_claim", {"order_id": "1"})], at=0, conv="c1")
    h.run("support", [("create_claim", {"order_id": "1"})], at=30, conv="c1")
    assert h.rules() == ["duplicate_write"]


# --- flush / shutdown --------------------------------------------------------------------------------

@pytest.mark.parametrize("how", ["force_flush", "shutdown"])
def test_flush_and_shutdown_finalise_open_trajectories(make_processor: Any, how: str) -> None:
    h = make_processor()
    root = h.agent("support", 0)
    h.tool(root, "lookup_order", {"order_id": "1"}, at=1)
    h.chat(root, at=2, inp=10, out=2)
    assert h.value("agenteval_open_trajectories") == 1.0
    getattr(h.provider, how)()
    assert [(t.agent_name, t.outcome, t.tool_calls, t.llm_calls) for t in h.trajectories] == [
        ("support", "incomplete", 1, 1)]
    assert h.value("agenteval_trajectories_evicted_total", reason="shutdown") == 1.0
    assert h.agent_value("agenteval_trajectories_total", "support", outcome="incomplete") == 1.0
    assert h.agent_value("agenteval_tokens_total", "support", type="input") == 10.0
    assert h.value("agenteval_open_trajectories") == 0.0


# --- end-only mode ---------------------------------------------------------------------------------

def recorded(make_processor: Any, build: Callable[[Harness], Any], policy: str | None = None
             ) -> tuple[Harness, list[ReadableSpan]]:
    h = make_processor(policy)
    exporter = InMemorySpanExporter()
    h.provider.add_span_processor(SimpleSpanProcessor(exporter))
    build(h)
    return h, list(exporter.get_finished_spans())  # in end order


@pytest.mark.parametrize("framework", RUNS)
def test_end_only_mode_gives_the_same_trajectories(make_processor: Any, framework: str) -> None:
    live, spans = recorded(make_processor, RUNS[framework], WRITES_ONLY)
    replay = make_processor(WRITES_ONLY)
    for s in spans:
        replay.end_only(s)
    replay.processor.engine.finalise_all()
    assert [summary(t) for t in replay.trajectories] == [summary(t) for t in live.trajectories]
    assert len(replay.trajectories) == 1


def test_end_only_mode_interleaved_traces_and_late_span(make_processor: Any) -> None:
    def build(h: Harness) -> None:
        a = h.agent("a", 0)
        b = h.agent("b", 0.5)
        h.tool(a, "lookup_order", {"order_id": "1"}, at=1)
        h.tool(b, "create_claim", {"order_id": "2"}, at=1.2)
        straggler = h.start("execute_tool slow", a, 1.5, {"gen_ai.operation.name": "execute_tool",
                                                          "gen_ai.tool.name": "slow"})
        h.end(a, 2)
        h.end(straggler, 2.5)
        h.end(b, 3)

    live, spans = recorded(make_processor, build)
    replay = make_processor()
    for s in spans:
        replay.end_only(s)
    assert [summary(t) for t in replay.trajectories] == [summary(t) for t in live.trajectories]
    assert [t.agent_name for t in replay.trajectories] == ["a", "b"]
    assert replay.value("agenteval_late_spans_total") == live.value("agenteval_late_spans_total") == 1.0


def test_end_only_mode_finalise_all_marks_incomplete(make_processor: Any) -> None:
    def build(h: Harness) -> None:
        root = h.agent("support", 0)
        h.tool(root, "lookup_order", {"order_id": "1"}, at=1)
        # the root never ends in this capture

    _, spans = recorded(make_processor, build)
    replay = make_processor()
    for s in spans:
        replay.end_only(s)
    assert replay.trajectories == []
    replay.processor.engine.finalise_all()
    assert [(t.outcome, [s.tool for s in t.steps]) for t in replay.trajectories] == [
        ("incomplete", ["lookup_order"])]


def test_legacy_pydantic_ai_run(make_processor: Any) -> None:
    h = make_processor(WRITES_ONLY)
    root = h.start("agent run", None, 0, {"agent_name": "support_agent", "model_name": "gpt-4o"})
    for i, (name, args) in enumerate([("lookup_order", {"order_id": "88120"}), ("create_claim", CLAIM_2)]):
        s = h.start("running tool", root, i + 1, {"gen_ai.tool.name": name, "tool_arguments": json.dumps(args)})
        h.end(s, i + 1.5, {"tool_response": "ok"})
    h.end(root, 5)
    assert [(t.agent_name, [(s.tool, s.arguments) for s in t.steps]) for t in h.trajectories] == [
        ("support_agent", [("lookup_order", {"order_id": "88120"}), ("create_claim", CLAIM_2)])]


def test_util_genai_run_everything_set_at_end(make_processor: Any) -> None:
    """util-genai: the tool span has only its name at start; call id, arguments, agent name at end."""
    h = make_processor(WRITES_ONLY)
    root = h.start("invoke_agent support_agent", None, 0, {"gen_ai.operation.name": "invoke_agent",
                                                          "gen_ai.agent.name": "support_agent"})
    for i in range(2):
        s = h.start("execute_tool create_claim", root, i + 1, {"gen_ai.operation.name": "execute_tool",
                                                              "gen_ai.tool.name": "create_claim"})
        h.end(s, i + 1.5, {"gen_ai.tool.call.id": f"c{i}", "gen_ai.tool.call.arguments": json.dumps(CLAIM_1),
                           "gen_ai.agent.name": "support_agent"})
    h.end(root, 5, {"gen_ai.conversation.id": "conv-u"})
    assert [(t.agent_name, t.conversation_id, t.tool_calls) for t in h.trajectories] == [
        ("support_agent", "conv-u", 2)]
    assert h.rules() == ["duplicate_write"]


def test_conversations_bounded_by_capacity(make_processor: Any) -> None:
    h = make_processor(WRITES_ONLY + "limits: {max_conversations: 2}")
    for i, conv in enumerate(["c1", "c2", "c3", "c1"]):
        h.run("support", [("create_claim", {"order_id": "1"})], at=i * 10, conv=conv)
    assert h.violations == []  # c1 was the oldest when c3 came: its write is forgotten
    assert h.value("agenteval_conversations_evicted_total", reason="capacity") == 2.0  # c1, then c2


def test_open_spans_bounded_and_drops_counted(make_processor: Any) -> None:
    h = make_processor("limits: {max_open_spans: 3}")
    root = h.agent("support", 0)
    tools = [h.start("execute_tool t", root, 1 + i, {"gen_ai.operation.name": "execute_tool",
                                                     "gen_ai.tool.name": f"t{i}"}) for i in range(4)]
    for i, s in enumerate(tools):
        h.end(s, 10 + i)
    h.end(root, 20)
    h.provider.force_flush()
    assert h.value("agenteval_open_spans_dropped_total") == 2.0  # the root's route, then t0's
    assert sum(t.tool_calls for t in h.trajectories) == 4  # degraded grouping, but no tool call lost
    assert h.processor.engine._routes == {}
    assert h.value("agenteval_processor_errors_total", stage="on_end") == 0.0


def test_end_only_mode_ttl_eviction_and_late_spans(make_processor: Any) -> None:
    def build(h: Harness) -> None:
        stale = h.agent("stale", 0)
        # pydantic-ai puts the agent name on tool spans: end-only mode can name a run whose agent span never ended
        h.tool(stale, "lookup_order", {"order_id": "1"}, at=1, end_attrs={"gen_ai.agent.name": "stale"})
        h.run("fresh", [("get_policy", {"topic": "a"})], at=2000)
        h.end(stale, 2100)  # long after its TTL

    _, spans = recorded(make_processor, build, "limits: {trajectory_ttl_s: 60}")
    replay = make_processor("limits: {trajectory_ttl_s: 60}")
    for s in spans:
        replay.end_only(s)
    assert [(t.agent_name, t.outcome) for t in replay.trajectories] == [("stale", "incomplete"), ("fresh", "unknown")]
    assert replay.value("agenteval_trajectories_evicted_total", reason="ttl") == 1.0
    assert replay.value("agenteval_late_spans_total") == 1.0


def test_duration_histogram_from_root_span(make_processor: Any) -> None:
    h = make_processor()
    root = h.agent("support", 1)
    h.tool(root, "lookup_order", {"order_id": "1"}, at=2)
    h.end(root, 4.5, error="boom")
    assert h.agent_value("agenteval_trajectory_duration_seconds_sum", "support", outcome="failure") == 3.5
    assert h.agent_value("agenteval_trajectory_duration_seconds_bucket", "support", outcome="failure",
                         le="5.0") == 1.0
    assert h.agent_value("agenteval_trajectory_steps_bucket", "support", le="1.0") == 1.0
