"""Many threads running agents through ONE provider: exact counts, nothing lost or doubled."""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import Any

import pytest
from conftest import ISSUE_POLICY, Harness
from opentelemetry import trace

THREADS = 16
RUNS = 50
CHAT_IN, CHAT_OUT = 100, 10


def agent_run(h: Harness, agent: str, conv: str, order: str) -> None:
    """1 agent + 3 chat + 5 tool spans, the app's way; one tool pair in a worker thread; one duplicate write."""
    tracer = h.tracer

    def tool(name: str, args: dict[str, Any], ctx: Any = None) -> None:
        attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                 "gen_ai.tool.call.arguments": json.dumps(args), "gen_ai.conversation.id": conv}
        with tracer.start_as_current_span(f"execute_tool {name}", context=ctx, attributes=attrs) as s:
            s.set_attribute("gen_ai.tool.call.result", "ok")

    def chat() -> None:
        with tracer.start_as_current_span("chat gpt-4o", attributes={"gen_ai.operation.name": "chat",
                                                                     "gen_ai.request.model": "gpt-4o"}) as s:
            s.set_attributes({"gen_ai.usage.input_tokens": CHAT_IN, "gen_ai.usage.output_tokens": CHAT_OUT})

    with tracer.start_as_current_span(f"invoke_agent {agent}", context=trace.set_span_in_context(
            trace.INVALID_SPAN), attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent,
                                             "gen_ai.conversation.id": conv}) as root:
        chat()
        ctx = trace.set_span_in_context(root)
        worker = threading.Thread(target=tool, args=("get_policy", {"topic": "damaged"}, ctx))
        worker.start()  # parallel tool calls, ended on another thread
        tool("lookup_order", {"order_id": order})
        worker.join()
        chat()
        tool("create_claim", {"order_id": order, "reason": "damaged"})
        tool("create_claim", {"reason": "damaged ", "order_id": order})  # the duplicate
        chat()
        tool("issue_refund", {"order_id": order})


@pytest.mark.timeout(120)
def test_many_threads_one_provider_exact_counts(make_processor: Any) -> None:
    h = make_processor(ISSUE_POLICY)
    barrier = threading.Barrier(THREADS)
    failures: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            barrier.wait()
            agent = "support" if n % 2 else "billing"
            for r in range(RUNS):
                agent_run(h, agent, conv=f"conv-{n}", order=f"{n}-{r}")
        except BaseException as exc:  # noqa: BLE001 - surfaced below: the app must never see one
            failures.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []

    runs = THREADS * RUNS
    per_agent = runs // 2
    assert len(h.trajectories) == runs
    assert Counter((t.agent_name, t.outcome, t.tool_calls, t.llm_calls, t.input_tokens, t.output_tokens)
                   for t in h.trajectories) == {
        ("support", "success", 5, 3, 3 * CHAT_IN, 3 * CHAT_OUT): per_agent,
        ("billing", "success", 5, 3, 3 * CHAT_IN, 3 * CHAT_OUT): per_agent,
    }
    assert len({t.trace_id for t in h.trajectories}) == runs
    assert Counter((v.rule, v.agent, v.tool) for v in h.violations) == {
        ("duplicate_write", "support", "create_claim"): per_agent,
        ("duplicate_write", "billing", "create_claim"): per_agent,
    }
    for agent in ("support", "billing"):
        assert h.agent_value("agenteval_trajectories_total", agent, outcome="success") == per_agent
        assert h.agent_value("agenteval_trajectory_steps_sum", agent) == 5 * per_agent
        assert h.agent_value("agenteval_trajectory_llm_calls_sum", agent) == 3 * per_agent
        assert h.agent_value("agenteval_tokens_total", agent, type="input") == 3 * CHAT_IN * per_agent
        assert h.agent_value("agenteval_tokens_total", agent, type="output") == 3 * CHAT_OUT * per_agent
        assert h.agent_value("agenteval_violations_total", agent, rule="duplicate_write", tool="create_claim",
                             severity="critical") == per_agent
        assert h.agent_value("agenteval_tool_calls_total", agent, tool="create_claim", status="ok") == 2 * per_agent
        for tool in ("lookup_order", "get_policy", "issue_refund"):
            assert h.agent_value("agenteval_tool_calls_total", agent, tool=tool, status="ok") == per_agent
    assert {k: h.value("agenteval_spans_total", kind=k) for k in ("tool", "llm", "agent", "other")} == {
        "tool": 5.0 * runs, "llm": 3.0 * runs, "agent": 1.0 * runs, "other": 0.0}
    assert h.value("agenteval_open_trajectories") == 0.0
    assert h.value("agenteval_late_spans_total") == 0.0
    for stage in h.processor.stats()["errors"]:
        assert h.value("agenteval_processor_errors_total", stage=stage) == 0.0


def test_one_run_from_many_threads_loses_nothing(make_processor: Any) -> None:
    """Parallel tool calls of ONE run, ended from 8 threads under forced thread switches: its events
    are applied one thread at a time (the others queue and go on), and every call is counted."""
    import sys

    h = make_processor("tools: {create_claim: {write: true}}")
    root = h.agent("support", 0)
    per_thread = 300

    def work(n: int) -> None:
        for i in range(per_thread):
            h.tool(root, "create_claim", {"order_id": f"{n}-{i}"}, at=1 + i * 1e-3)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    finally:
        sys.setswitchinterval(old)
    assert not any(t.is_alive() for t in threads)
    h.end(root, 10)
    (t,) = h.trajectories
    assert t.tool_calls == 8 * per_thread
    assert len(t.writes_ok) == min(8 * per_thread, 512)  # bounded by max_steps_per_trajectory
    assert h.violations == []  # every call distinct: no duplicate seen where there is none
    assert h.agent_value("agenteval_tool_calls_total", "support", tool="create_claim", status="ok") == 8 * per_thread


def test_a_run_is_checked_by_one_thread_at_a_time(make_processor: Any) -> None:
    """Two threads end tool spans of one run at once: the second end is queued and applied after the
    first one's rule returns (the rules never see the run from two threads at once), and the second
    thread's ``end()`` does not wait for it."""
    import time

    from otel_agenteval.model.trajectory import ToolStep
    from otel_agenteval.rules import applies_to

    inside: list[str] = []
    overlaps: list[tuple[str, str]] = []

    @applies_to((ToolStep,))
    def slow_rule(event: Any, check: Any) -> None:
        if inside:
            overlaps.append((inside[0], event.tool))
        inside.append(event.tool)
        if event.tool == "slow":
            time.sleep(0.3)  # another thread ends a span of this run meanwhile
        inside.pop()

    h = make_processor(rules=[slow_rule])
    root = h.agent("support", 0)
    first = threading.Thread(target=h.tool, args=(root, "slow", {}), kwargs={"at": 1.0})
    first.start()
    time.sleep(0.05)  # the slow rule is running
    began = time.perf_counter()
    h.tool(root, "quick", {}, at=1.1)
    waited = time.perf_counter() - began
    first.join(timeout=5)
    h.end(root, 2)
    assert overlaps == []
    assert waited < 0.2, f"end() waited {waited:.3f}s for another thread's rule"
    (t,) = h.trajectories
    assert [s.tool for s in t.steps] == ["slow", "quick"]
