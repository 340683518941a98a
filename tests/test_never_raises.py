"""Inside someone else's process: nothing the processor meets may reach the app as an exception.

Without the processor's guards these exceptions would escape ``with tracer.start_as_current_span``:
the SDK's multi-span processor calls ``on_end`` with no try/except of its own.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import WRITES_ONLY, Harness
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan

from otel_agenteval import Check, Finish, ToolStep, Violation
from otel_agenteval.rules.writes import duplicate_write


def errors(h: Harness) -> dict[str, float | None]:
    return {stage: h.value("agenteval_processor_errors_total", stage=stage) for stage in h.processor.stats()["errors"]}


def no_errors(h: Harness) -> dict[str, float]:
    return dict.fromkeys(h.processor.stats()["errors"], 0.0)


def app_run(h: Harness, tools: list[tuple[str, dict[str, Any]]], agent: str = "support",
            chat: dict[str, Any] | None = None, root_attrs: dict[str, Any] | None = None) -> None:
    """What an instrumented app does: nested ``with`` blocks, attributes set along the way."""
    tracer = h.tracer
    with tracer.start_as_current_span(f"invoke_agent {agent}", context=trace.set_span_in_context(trace.INVALID_SPAN),
                                      attributes={"gen_ai.operation.name": "invoke_agent",
                                                  "gen_ai.agent.name": agent}) as root:
        if chat is not None:
            with tracer.start_as_current_span("chat", attributes={"gen_ai.operation.name": "chat", **chat}):
                pass
        for name, attrs in tools:
            with tracer.start_as_current_span(f"execute_tool {name}", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, **attrs}):
                pass
        if root_attrs:
            root.set_attributes(root_attrs)


ARGS = {"gen_ai.tool.call.arguments": '{"order_id": "1"}'}


def test_a_rule_that_raises(make_processor: Any) -> None:
    def broken(event: Any, check: Check) -> None:
        raise RuntimeError("bug in a custom rule")

    h = make_processor(WRITES_ONLY, rules=[broken, duplicate_write])
    app_run(h, [("create_claim", ARGS), ("create_claim", ARGS)])
    assert h.rules() == ["duplicate_write"]  # the other rules still ran
    assert [t.tool_calls for t in h.trajectories] == [2]
    # once per tool span and once at finish
    assert errors(h) == {**no_errors(h), "rule": 3.0}


def test_a_rule_that_raises_only_at_finish(make_processor: Any) -> None:
    def at_finish(event: Any, check: Check) -> None:
        if not isinstance(event, Finish):
            return
        raise RuntimeError("finish")

    h = make_processor(WRITES_ONLY, rules=[at_finish])
    app_run(h, [("lookup_order", ARGS)])
    assert [(t.outcome, t.tool_calls) for t in h.trajectories] == [("unknown", 1)]
    assert h.agent_value("agenteval_trajectories_total", "support", outcome="unknown") == 1.0
    assert errors(h) == {**no_errors(h), "rule": 1.0}


def test_a_rule_that_returns_garbage(make_processor: Any) -> None:
    def garbage(event: Any, check: Check) -> Any:
        return 42 if isinstance(event, ToolStep) else None  # not an iterable of violations

    h = make_processor(WRITES_ONLY, rules=[garbage, duplicate_write])
    app_run(h, [("create_claim", ARGS), ("create_claim", ARGS)])
    assert h.rules() == ["duplicate_write"]
    assert [t.tool_calls for t in h.trajectories] == [2]
    assert errors(h) == {**no_errors(h), "rule": 2.0}


def test_on_violation_callback_that_raises(make_processor: Any) -> None:
    seen: list[Violation] = []

    def broken(v: Violation) -> None:
        raise RuntimeError("pager down")

    h = make_processor(WRITES_ONLY, on_violation=[broken, seen.append])
    app_run(h, [("create_claim", ARGS), ("create_claim", ARGS), ("create_claim", ARGS)])
    assert [v.rule for v in seen] == ["duplicate_write", "duplicate_write"]  # later callbacks still called
    assert h.agent_value("agenteval_violations_total", "support", rule="duplicate_write", tool="create_claim",
                         severity="critical") == 2.0
    assert errors(h) == {**no_errors(h), "callback": 2.0}


def test_on_trajectory_callback_that_raises(make_processor: Any) -> None:
    seen: list[Any] = []

    def broken(t: Any) -> None:
        raise RuntimeError("sink down")

    h = make_processor(WRITES_ONLY, on_trajectory=[broken, seen.append])
    app_run(h, [("lookup_order", ARGS)])
    app_run(h, [("lookup_order", ARGS)])
    assert len(seen) == 2  # later callbacks still called
    assert h.agent_value("agenteval_trajectories_total", "support", outcome="unknown") == 2.0
    assert errors(h) == {**no_errors(h), "callback": 2.0}


GARBAGE_TOOLS: list[tuple[str, dict[str, Any]]] = [
    ("create_claim", {"gen_ai.tool.call.arguments": "{not json"}),
    ("create_claim", {"gen_ai.tool.call.arguments": "{not json"}),  # still a duplicate, by raw text
    ("create_claim", {"gen_ai.tool.call.arguments": [1, 2, 3]}),
    ("create_claim", {"gen_ai.tool.call.arguments": 12.5, "gen_ai.tool.call.result": 7}),
    ("issue_refund", {"gen_ai.tool.call.arguments": "", "gen_ai.tool.call.id": 99}),
    ("issue_refund", {"gen_ai.tool.call.arguments": "null", "gen_ai.conversation.id": 1.5}),
    ("lookup_order", {"gen_ai.tool.call.arguments": '"just a string"', "gen_ai.agent.name": ["a", "b"]}),
    ("lookup_order", {"gen_ai.tool.call.arguments": "[1, {\"a\": [null, true]}]", "gen_ai.tool.status": 3}),
    ("lookup_order", {"gen_ai.tool.name": 42, "error.type": False}),
    ("lookup_order", {"openinference.span.kind": ["TOOL"], "input.value": True}),
]


def test_garbage_attribute_types(make_processor: Any) -> None:
    h = make_processor(WRITES_ONLY + "agents: {'*': {budget: {max_tokens: 10, max_cost_usd: 0.5}}}\n"
                       + "pricing: {gpt-4o: {input_per_mtok: 1, output_per_mtok: 1}}")
    app_run(h, GARBAGE_TOOLS, chat={"gen_ai.usage.input_tokens": "many", "gen_ai.usage.output_tokens": "12",
                                    "gen_ai.request.model": 4})
    app_run(h, [("lookup_order", {})], chat={"gen_ai.usage.input_tokens": float("inf"),
                                             "gen_ai.usage.output_tokens": -40, "gen_ai.response.model": "gpt-4o"},
            root_attrs={"agenteval.outcome": True, "gen_ai.aggregated_usage.input_tokens": "x"})
    app_run(h, [("lookup_order", {})], agent="", chat={"gen_ai.usage.input_tokens": [1, 2]},
            root_attrs={"gen_ai.conversation.id": "", "session.id": 0})
    assert errors(h) == no_errors(h)
    assert [(t.tool_calls, t.llm_calls, t.input_tokens, t.output_tokens, t.outcome) for t in h.trajectories] == [
        (len(GARBAGE_TOOLS), 1, 0, 12, "unknown"), (1, 1, 0, 0, "unknown"), (1, 1, 0, 0, "unknown")]
    assert h.rules() == ["budget_breach", "duplicate_write"]  # tokens at the chat, then the write
    assert h.agent_value("agenteval_tokens_total", "support", type="output") == 12.0
    assert h.agent_value("agenteval_trajectories_total", "support", outcome="unknown") == 2.0


def test_spans_the_engine_cannot_read(make_processor: Any) -> None:
    h = make_processor()
    h.processor.on_start(object())  # type: ignore[arg-type]
    h.processor.on_end(object())  # type: ignore[arg-type]
    h.processor.on_end(ReadableSpan(name="no context"))
    app_run(h, [("lookup_order", ARGS)])  # and it carries on
    assert [t.tool_calls for t in h.trajectories] == [1]
    assert errors(h) == {**no_errors(h), "on_start": 1.0, "on_end": 2.0}


def test_flush_and_shutdown_are_idempotent(make_processor: Any) -> None:
    h = make_processor()
    root = h.agent("support", 0)
    h.tool(root, "lookup_order", ARGS, at=1)
    assert h.processor.force_flush() is True
    h.processor.shutdown()
    h.processor.shutdown()
    assert h.processor.force_flush() is True
    h.end(root, 2)  # the app ends its span after shutdown: counted, not processed, no exception
    assert [t.outcome for t in h.trajectories] == ["incomplete"]
    assert h.value("agenteval_spans_dropped_total", reason="after_shutdown") == 1.0
    assert errors(h) == no_errors(h)


@pytest.mark.parametrize("bad", ["on_violation", "on_trajectory"])
def test_callbacks_run_outside_the_lock(make_processor: Any, bad: str) -> None:
    """A callback may itself start spans (e.g. a logging exporter): it must not deadlock."""
    holder: dict[str, Harness] = {}

    def reenter(_: Any) -> None:
        with holder["h"].tracer.start_as_current_span("callback work", context=trace.set_span_in_context(
                trace.INVALID_SPAN), attributes={"http.request.method": "POST"}):
            pass

    h = make_processor(WRITES_ONLY, **{bad: [reenter]})
    holder["h"] = h
    app_run(h, [("create_claim", ARGS), ("create_claim", ARGS)])
    assert (h.rules(), len(h.trajectories)) == (["duplicate_write"], 1)
    assert errors(h) == no_errors(h)
