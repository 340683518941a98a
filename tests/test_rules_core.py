"""The first two invariants, inline as each span ends: duplicate_write and budget_breach."""

from __future__ import annotations

import json
from typing import Any

import pytest
import structlog
from conftest import ISSUE_POLICY, SERVICE, WRITES_ONLY, Harness, hex_span, hex_trace
from prometheus_client import generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from otel_agenteval.engine import sinks
from otel_agenteval.metrics.prometheus import BUDGETS
from otel_agenteval.reading.labels import safe_label
from otel_agenteval.rules import KNOWN_RULES

# --- duplicate_write / write_retried_after_error -------------------------------------------------


def test_duplicate_write_ignores_key_order_and_whitespace(make_processor: Any) -> None:
    h = make_processor(WRITES_ONLY)
    root = h.agent("support", 0)
    h.tool(root, "create_claim", '{"order_id": "88120", "reason": "damaged"}', at=1)
    second = h.tool(root, "create_claim", '{ "reason": "  damaged ", "order_id":"88120"}', at=2)
    # found inline, as the offending tool span ends, before the run is over
    assert [(v.rule, v.severity, v.tool, v.span_id, v.trace_id, v.agent) for v in h.violations] == [
        ("duplicate_write", "critical", "create_claim", hex_span(second), hex_trace(second), "support")]
    assert h.trajectories == []
    h.end(root, 3)
    assert h.agent_value("agenteval_violations_total", "support", rule="duplicate_write", tool="create_claim",
                         severity="critical") == 1.0


def test_different_arguments_are_not_a_duplicate(make_processor: Any) -> None:
    h = make_processor(WRITES_ONLY)
    h.run("support", [("create_claim", {"order_id": "88120", "reason": "damaged"}),
                      ("create_claim", {"order_id": "88120", "reason": "damaged_in_transit"}),
                      ("create_claim", {"order_id": "88121", "reason": "damaged"}),
                      ("issue_refund", {"order_id": "88120", "reason": "damaged"})])
    assert h.violations == []


def test_non_write_repeat_is_redundant_not_a_violation(make_processor: Any) -> None:
    h = make_processor(WRITES_ONLY)
    h.run("support", [("lookup_order", {"order_id": "1"}), ("lookup_order", {"order_id": " 1"}),
                      ("lookup_order", {"order_id": "2"})])
    assert h.violations == []
    assert h.agent_value("agenteval_redundant_calls_total", "support", tool="lookup_order") == 1.0


@pytest.mark.parametrize("attr", ["gen_ai.conversation.id", "session.id"])
def test_duplicate_across_traces_in_one_conversation(make_processor: Any, attr: str) -> None:
    h = make_processor(WRITES_ONLY)
    first = h.agent("support", 0)
    h.tool(first, "create_claim", {"order_id": "88120"}, at=1, end_attrs={attr: "conv-7"})
    h.end(first, 2)
    second = h.agent("support", 10)
    dup = h.tool(second, "create_claim", {"order_id": "88120"}, at=11, end_attrs={attr: "conv-7"})
    h.end(second, 12)
    (v,) = h.violations
    assert (v.rule, v.span_id, v.trace_id, v.conversation_id, v.details["first_trace_id"]) == (
        "duplicate_write", hex_span(dup), hex_trace(dup), "conv-7", hex_trace(first))
    assert hex_trace(first) in v.message


def test_no_duplicate_across_conversations_or_without_one(make_processor: Any) -> None:
    h = make_processor(WRITES_ONLY)
    h.run("support", [("create_claim", {"order_id": "88120"})], at=0, conv="conv-a")
    h.run("support", [("create_claim", {"order_id": "88120"})], at=10, conv="conv-b")
    h.run("support", [("create_claim", {"order_id": "88120"})], at=20)
    h.run("support", [("create_claim", {"order_id": "88120"})], at=30)
    assert h.violations == []


def test_repeat_after_failed_write_is_a_retry_warning(make_processor: Any) -> None:
    h = make_processor(WRITES_ONLY)
    root = h.agent("support", 0)
    h.tool(root, "create_claim", {"order_id": "88120"}, at=1, error="carrier down")
    retry = h.tool(root, "create_claim", {"order_id": "88120"}, at=2)
    again = h.tool(root, "create_claim", {"order_id": "88120"}, at=3)
    h.end(root, 4)
    assert [(v.rule, v.severity, v.span_id) for v in h.violations] == [
        ("write_retried_after_error", "warning", hex_span(retry)),
        ("duplicate_write", "critical", hex_span(again)),  # the retry succeeded: now it is a duplicate
    ]
    assert h.agent_value("agenteval_violations_total", "support", rule="write_retried_after_error",
                         tool="create_claim", severity="warning") == 1.0


def test_retry_after_failed_write_in_an_earlier_turn(make_processor: Any) -> None:
    h = make_processor(WRITES_ONLY)
    first = h.agent("support", 0, conv="c")
    h.tool(first, "issue_refund", {"order_id": "1", "amount": 10}, at=1, error="timeout")
    h.end(first, 2)
    h.run("support", [("issue_refund", {"amount": 10, "order_id": "1"})], at=10, conv="c")
    assert h.rules() == ["write_retried_after_error"]


def test_rule_switched_off_and_severity_overridden(make_processor: Any) -> None:
    off = make_processor(WRITES_ONLY + "rules: {duplicate_write: false}")
    off.run("support", [("create_claim", {"order_id": "1"}), ("create_claim", {"order_id": "1"})])
    assert off.violations == []
    assert off.agent_value("agenteval_violations_total", "support", rule="duplicate_write", tool="",
                           severity="critical") is None
    loud = make_processor(WRITES_ONLY + "severity: {duplicate_write: warning}")
    loud.run("support", [("create_claim", {"order_id": "1"}), ("create_claim", {"order_id": "1"})])
    assert [(v.rule, v.severity) for v in loud.violations] == [("duplicate_write", "warning")]


# --- budget_breach ------------------------------------------------------------------------------------

def budget_policy(limits: dict[str, Any] | None = None, **budget: Any) -> str:
    return json.dumps({"agents": {"*": {"budget": budget}}, "limits": limits or {},
                       "pricing": {"gpt-4o": {"input_per_mtok": 2.5, "output_per_mtok": 10.0}}})


def breaches(h: Harness) -> list[tuple[str, str | None, float, float]]:
    return [(v.details["budget"], v.span_id, v.details["used"], v.details["limit"]) for v in h.violations
            if v.rule == "budget_breach"]


def test_max_steps_fires_once_at_the_crossing_step(make_processor: Any) -> None:
    h = make_processor(budget_policy(max_steps=2))
    root = h.agent("support", 0)
    tools = [h.tool(root, "lookup_order", {"order_id": str(i)}, at=i + 1) for i in range(4)]
    h.end(root, 10)
    assert breaches(h) == [("steps", hex_span(tools[2]), 3, 2)]
    assert h.agent_value("agenteval_budget_breaches_total", "support", budget="steps") == 1.0
    assert h.agent_value("agenteval_violations_total", "support", rule="budget_breach", tool="lookup_order",
                         severity="warning") == 1.0


def test_max_llm_calls(make_processor: Any) -> None:
    h = make_processor(budget_policy(max_llm_calls=2))
    root = h.agent("support", 0)
    chats = [h.chat(root, at=i + 1, inp=1, out=1) for i in range(4)]
    h.end(root, 10)
    assert breaches(h) == [("llm_calls", hex_span(chats[2]), 3, 2)]
    assert h.agent_value("agenteval_budget_breaches_total", "support", budget="llm_calls") == 1.0


def test_max_tokens(make_processor: Any) -> None:
    h = make_processor(budget_policy(max_tokens=1000))
    root = h.agent("support", 0)
    chats = [h.chat(root, at=i + 1, inp=300, out=100) for i in range(4)]
    h.end(root, 10)
    assert breaches(h) == [("tokens", hex_span(chats[2]), 1200, 1000)]
    assert h.agent_value("agenteval_budget_breaches_total", "support", budget="tokens") == 1.0


def test_max_cost_usd(make_processor: Any) -> None:
    h = make_processor(budget_policy(max_cost_usd=0.015))
    root = h.agent("support", 0)
    chats = [h.chat(root, at=i + 1, inp=2000, out=500, model="gpt-4o-2024-08-06") for i in range(3)]  # $0.01 each
    h.end(root, 10)
    assert breaches(h) == [("cost", hex_span(chats[1]), 0.02, 0.015)]
    assert h.agent_value("agenteval_budget_breaches_total", "support", budget="cost") == 1.0


def test_max_duration_at_the_step_that_crosses_it(make_processor: Any) -> None:
    h = make_processor(budget_policy(max_duration_s=10))
    root = h.agent("support", 0)
    h.tool(root, "lookup_order", {"order_id": "1"}, at=5)
    late = h.tool(root, "lookup_order", {"order_id": "2"}, at=11.9)
    h.tool(root, "lookup_order", {"order_id": "3"}, at=13)
    h.end(root, 20)
    assert breaches(h) == [("duration", hex_span(late), 12.0, 10)]
    assert h.agent_value("agenteval_budget_breaches_total", "support", budget="duration") == 1.0


def test_max_duration_at_root_end(make_processor: Any) -> None:
    h = make_processor(budget_policy(max_duration_s=10))
    root = h.agent("support", 0)
    h.tool(root, "lookup_order", {"order_id": "1"}, at=5)
    h.end(root, 25)
    assert breaches(h) == [("duration", None, 25.0, 10)]


def _steps(h: Harness, root: Any, n: int) -> None:
    for i in range(n):
        h.tool(root, "lookup_order", {"order_id": str(i)}, at=i + 1)


def _chats(h: Harness, root: Any, usage: list[tuple[int, int]]) -> None:
    for i, (inp, out) in enumerate(usage):
        h.chat(root, at=i + 1, inp=inp, out=out)  # gpt-4o: 2000 in + 500 out is $0.01


# Each run ends exactly at one limit while another budget makes the rule run at every event
# (repeats: every tool call; duration: every event past it; a crossed budget: every later event),
# so the comparison itself decides. "At the limit" is within budget: only the other one fires.
AT_THE_LIMIT = {
    "steps, repeats set": ({"max_steps": 3, "max_repeats": 5}, lambda h, r: _steps(h, r, 3), []),
    "steps, duration set": ({"max_steps": 3, "max_duration_s": 1}, lambda h, r: _steps(h, r, 3), ["duration"]),
    "llm calls, tokens crossed": ({"max_llm_calls": 2, "max_tokens": 10},
                                  lambda h, r: _chats(h, r, [(100, 0), (100, 0)]), ["tokens"]),
    "tokens, llm calls crossed": ({"max_tokens": 1000, "max_llm_calls": 1},
                                  lambda h, r: _chats(h, r, [(300, 200), (400, 100)]), ["llm_calls"]),
    "cost, duration set": ({"max_cost_usd": 0.02, "max_duration_s": 1},
                           lambda h, r: _chats(h, r, [(2000, 500), (2000, 500)]), ["duration"]),
    "agent totals' tokens at finish, duration set": ({"max_tokens": 1000, "max_duration_s": 1}, None, ["duration"]),
}


@pytest.mark.parametrize("case", sorted(AT_THE_LIMIT))
def test_a_run_ending_exactly_at_a_limit_is_within_budget(make_processor: Any, case: str) -> None:
    budget, events, expected = AT_THE_LIMIT[case]
    h = make_processor(budget_policy(**budget))
    root = h.agent("support", 0, model_name="gpt-4o")
    if events is not None:
        events(h, root)
        h.end(root, 5)
    else:  # no model spans: the agent span's totals face the tokens budget at the run's end
        h.end(root, 5, {"gen_ai.aggregated_usage.input_tokens": 600, "gen_ai.aggregated_usage.output_tokens": 400})
    assert [b for b, *_ in breaches(h)] == expected


def test_repeats_at_the_limit_are_within_budget_and_one_more_breaks_it(make_processor: Any) -> None:
    h = make_processor(budget_policy(max_repeats=2))
    root = h.agent("support", 0)
    calls = [h.tool(root, "lookup_order", {"order_id": "1"}, at=i + 1) for i in range(2)]
    assert breaches(h) == []
    calls.append(h.tool(root, "lookup_order", {"order_id": "1"}, at=3))
    h.end(root, 5)
    assert breaches(h) == [("repeats", hex_span(calls[2]), 3, 2)]


def test_max_duration_at_eviction(make_processor: Any) -> None:
    h = make_processor(budget_policy({"trajectory_ttl_s": 30}, max_duration_s=10))
    root = h.agent("support", 0)
    h.tool(root, "lookup_order", {"order_id": "1"}, at=5)
    h.run("other", [("lookup_order", {"order_id": "9"})], at=100, step=0.1)
    assert [(t.agent_name, t.outcome) for t in h.trajectories] == [("support", "incomplete"), ("other", "unknown")]
    assert [(v.agent, v.details["budget"], v.span_id) for v in h.violations] == [("support", "duration", None)]


def test_each_budget_once_per_trajectory(make_processor: Any) -> None:
    h = make_processor(budget_policy(max_steps=1, max_llm_calls=1, max_tokens=10, max_cost_usd=0.000001,
                                     max_duration_s=1))
    for run in range(2):
        root = h.agent("support", run * 100)
        for i in range(3):
            h.chat(root, at=run * 100 + i + 1, inp=100, out=100)
            h.tool(root, "lookup_order", {"order_id": str(i)}, at=run * 100 + i + 1.5)
        h.end(root, run * 100 + 10)
    five = ("steps", "llm_calls", "tokens", "cost", "duration")
    assert sorted(b for b, *_ in breaches(h)) == sorted(five * 2)
    for budget in five:
        assert h.agent_value("agenteval_budget_breaches_total", "support", budget=budget) == 2.0


def test_per_agent_budget_inherits_unset_fields_from_star(make_processor: Any) -> None:
    """The issue's policy: support has max_steps 8 of its own and max_tokens 50000 from "*"."""
    h = make_processor(ISSUE_POLICY)
    support = h.run("support", [("lookup_order", {"order_id": str(i)}) for i in range(9)], at=0, step=0.5)
    h.run("billing", [("lookup_order", {"order_id": str(i)}) for i in range(12)], at=100, step=0.5)
    big = h.agent("support", 200)
    chat = h.chat(big, at=201, inp=45_000, out=6_000, model="gpt-4o-mini")  # unpriced model: tokens only
    h.end(big, 202)
    assert [(v.agent, v.details["budget"], v.details["limit"]) for v in h.violations] == [
        ("support", "steps", 8), ("support", "tokens", 50000)]
    assert h.violations[1].span_id == hex_span(chat)
    assert support.context.trace_id != big.context.trace_id
    assert h.agent_value("agenteval_budget_breaches_total", "billing", budget="steps") == 0.0


def test_star_budget_applies_to_unnamed_agents(make_processor: Any) -> None:
    h = make_processor(ISSUE_POLICY)
    http = h.start("POST /x", None, 0)
    for i in range(13):
        h.tool(http, "lookup_order", {"order_id": str(i)}, at=i + 1)
    h.end(http, 20)
    assert [(v.agent, v.details["budget"], v.details["used"]) for v in h.violations] == [("unknown", "steps", 13)]


# --- metric series and data safety --------------------------------------------------------------------

def test_violation_series_pre_initialised_for_every_rule_and_agent(make_processor: Any) -> None:
    h = make_processor(WRITES_ONLY)
    h.run("support", [("lookup_order", {"order_id": "1"})])
    assert h.violations == []
    enabled = {r: s for r, s in KNOWN_RULES.items() if h.processor.policy.rule_enabled(r)}
    assert "duplicate_write" in enabled and "budget_breach" in enabled
    for rule, severity in enabled.items():
        assert h.agent_value("agenteval_violations_total", "support", rule=rule, tool="", severity=severity) == 0.0
    for budget in BUDGETS:
        assert h.agent_value("agenteval_budget_breaches_total", "support", budget=budget) == 0.0
    for outcome in ("success", "failure", "unknown", "incomplete"):
        expected = 1.0 if outcome == "unknown" else 0.0
        assert h.agent_value("agenteval_trajectories_total", "support", outcome=outcome) == expected


SECRET = "SECRET-CARD-4111-1111"
SECRET_CONV = "conv-PRIVATE-8842"


def test_argument_values_never_in_violations_logs_or_metrics(make_processor: Any, monkeypatch: Any) -> None:
    # the sinks' logger, captured directly: CLI commands run in-process elsewhere configure
    # structlog globally (cached, filtered), so structlog.testing.capture_logs() is not reliable here
    captured = structlog.testing.CapturingLogger()
    monkeypatch.setattr(sinks, "log", captured)
    h = make_processor(WRITES_ONLY + "agents: {'*': {budget: {max_steps: 2}}}")
    first = h.agent("support", 0, conv=SECRET_CONV)
    h.tool(first, "issue_refund", {"card": SECRET, "amount": 10}, at=1, conv=SECRET_CONV,
           result=f"refunded to {SECRET}")
    h.end(first, 2)
    h.run("support", [("issue_refund", {"amount": 10, "card": f" {SECRET} "}),
                      ("issue_refund", {"amount": 10, "card": SECRET}),
                      ("lookup_order", {"card": SECRET})], at=10, conv=SECRET_CONV)
    assert sorted(v.rule for v in h.violations) == ["budget_breach", "duplicate_write", "duplicate_write"]
    for v in h.violations:
        text = v.message + json.dumps(v.details, default=str)
        assert SECRET not in text and SECRET_CONV not in text
    assert {"arguments_hash"} <= set(h.violations[0].details)
    assert [c.method_name for c in captured.calls] == ["warning"] * 3
    for call in captured.calls:
        assert SECRET not in repr(call) and SECRET_CONV not in repr(call)
    assert captured.calls[0].kwargs["arguments_hash"] == h.violations[0].details["arguments_hash"]
    exposition = generate_latest(h.registry).decode() + generate_openmetrics(h.registry).decode()
    assert SECRET not in exposition and SECRET_CONV not in exposition
    assert 'agent_name="support"' in exposition and SERVICE in exposition


def test_tool_labels_capped_policy_tools_always_kept(make_processor: Any) -> None:
    h = make_processor(WRITES_ONLY + "limits: {max_tool_labels: 2}")
    long_name = "x" * 100
    h.run("support", [(long_name, {}), ("t1", {}), ("t2", {}), ("t3", {}), (long_name, {}), ("create_claim", {})])
    tools = {s.labels["tool"]: s.value for m in h.registry.collect() if m.name == "agenteval_tool_calls"
             for s in m.samples if s.name.endswith("_total")}
    assert tools == {safe_label(long_name): 2.0, "t1": 1.0, "other": 2.0, "create_claim": 1.0}
    assert safe_label(long_name).startswith("x" * 55) and len(safe_label(long_name)) == 64  # prefix + hash


def test_violation_exemplar_is_the_trace_id(make_processor: Any) -> None:
    h = make_processor(WRITES_ONLY)
    root = h.run("support", [("create_claim", {"order_id": "1"}), ("create_claim", {"order_id": "1"})])
    text = generate_openmetrics(h.registry).decode()
    (line,) = [x for x in text.splitlines() if x.startswith("agenteval_violations_total{") and 'tool="create_claim"' in x]
    assert f' 1.0 # {{trace_id="{hex_trace(root)}"}} 1.0 ' in line


def test_retry_rule_switched_off_alone(make_processor: Any) -> None:
    h = make_processor(WRITES_ONLY + "rules: {write_retried_after_error: false}")
    root = h.agent("support", 0)
    h.tool(root, "create_claim", {"order_id": "1"}, at=1, error="down")
    h.tool(root, "create_claim", {"order_id": "1"}, at=2)
    h.tool(root, "create_claim", {"order_id": "1"}, at=3)
    h.end(root, 4)
    assert h.rules() == ["duplicate_write"]
    assert h.agent_value("agenteval_violations_total", "support", rule="write_retried_after_error", tool="",
                         severity="warning") is None


# --- the inline budget gate: rules declared over_budget run only past a limit -----------------------


def test_duration_exactly_at_the_limit_is_not_a_breach(make_processor: Any) -> None:
    h = make_processor(budget_policy(max_duration_s=10))
    root = h.agent("support", 0)
    h.tool(root, "lookup_order", {"order_id": "1"}, at=9.9)  # ends at 10.0 s: at the limit, not over
    h.end(root, 10)
    assert breaches(h) == []
    h2 = make_processor(budget_policy(max_duration_s=10))
    root = h2.agent("support", 0)
    over = h2.tool(root, "lookup_order", {"order_id": "1"}, at=9.9, dur=0.100001)
    h2.end(root, 10.5)
    assert breaches(h2) == [("duration", hex_span(over), 10.0, 10)]


def test_tokens_and_cost_exactly_at_the_limit_are_not_breaches(make_processor: Any) -> None:
    h = make_processor(budget_policy(max_tokens=2500, max_cost_usd=0.01))
    root = h.agent("support", 0)
    h.chat(root, at=1, inp=2000, out=500, model="gpt-4o")  # 2500 tokens, $0.01: both at the limit
    h.end(root, 2)
    assert breaches(h) == []


def test_a_custom_over_budget_rule_runs_only_where_a_budget_is_crossed(make_processor: Any) -> None:
    from otel_agenteval.model.trajectory import LLMCall, ToolStep
    from otel_agenteval.rules import Finish, applies_to, builtin_rules

    seen: list[str] = []

    @applies_to((ToolStep, LLMCall, Finish), over_budget=True)
    def over(event: Any, check: Any) -> None:
        seen.append("tool" if isinstance(event, ToolStep) else "llm" if isinstance(event, LLMCall) else "finish")

    h = make_processor(budget_policy(max_steps=2), rules=[*builtin_rules().values(), over])
    root = h.agent("support", 0)
    for i in range(4):
        h.tool(root, "lookup_order", {"order_id": str(i)}, at=i + 1)
    h.chat(root, at=5, inp=10, out=10)
    h.end(root, 6)
    assert seen == ["tool", "tool"]  # the 3rd and 4th calls are over max_steps; the chat and the end are not
    assert [b for b, *_ in breaches(h)] == ["steps"]


def test_a_custom_repeated_call_rule_runs_only_for_a_repeated_write(make_processor: Any) -> None:
    from otel_agenteval.model.trajectory import ToolStep
    from otel_agenteval.rules import applies_to, builtin_rules

    seen: list[tuple[str, str]] = []

    @applies_to((ToolStep,), lambda p: p.write_tools, repeated_call=True)
    def again(event: Any, check: Any) -> None:
        seen.append((event.tool, event.arguments["order_id"]))

    h = make_processor(WRITES_ONLY, rules=[*builtin_rules().values(), again])
    root = h.agent("support", 0, conv="c-1")
    h.tool(root, "issue_refund", {"order_id": "1", "amount": 5}, at=1)
    h.tool(root, "issue_refund", {"order_id": "2", "amount": 5}, at=2)
    h.tool(root, "lookup_order", {"order_id": "1"}, at=3)
    h.tool(root, "lookup_order", {"order_id": "1"}, at=4)  # repeated, but not a write
    h.tool(root, "issue_refund", {"amount": 5, "order_id": "1"}, at=5)  # the first call again
    h.end(root, 6)
    second = h.agent("support", 10, conv="c-1")  # the next turn of the conversation
    h.tool(second, "issue_refund", {"order_id": "2", "amount": 5}, at=11, error="timeout")
    h.tool(second, "issue_refund", {"order_id": "3", "amount": 5}, at=12)
    h.end(second, 13)
    assert seen == [("issue_refund", "1"), ("issue_refund", "2")]
    assert [v.rule for v in h.violations] == ["duplicate_write", "duplicate_write"]


def test_a_screened_rule_is_called_only_for_the_calls_its_test_passes(make_processor: Any) -> None:
    from otel_agenteval.model.trajectory import ToolStep
    from otel_agenteval.rules import applies_to, builtin_rules

    tested: list[str] = []
    seen: list[str] = []

    def big(policy: Any) -> Any:  # made once for the policy: the test of a call
        def test(step: Any) -> bool:
            tested.append(step.arguments["order_id"])
            return step.arguments.get("amount", 0) > 100
        return test

    @applies_to((ToolStep,), lambda p: p.write_tools, guard=True, when=big)
    def big_refund(event: Any, check: Any) -> Any:
        seen.append(event.arguments["order_id"])
        if event.arguments.get("amount", 0) > 100:
            return [check.violation("big_refund", "critical", "refunds over 100 need a human", event)]
        return None

    h = make_processor(WRITES_ONLY, rules=[*builtin_rules().values(), big_refund])
    root = h.agent("support", 0)
    h.tool(root, "issue_refund", {"order_id": "1", "amount": 5}, at=1)
    h.tool(root, "issue_refund", {"order_id": "2", "amount": 500}, at=2)
    h.tool(root, "lookup_order", {"order_id": "3"}, at=3)  # not a tool it looks at: not even tested
    h.end(root, 4)
    assert (tested, seen) == (["1", "2"], ["2"])
    assert [v.rule for v in h.violations] == ["big_refund"]
    # the guard asks the rule itself, before the call runs
    from guard_support import call

    guard = h.processor.guard()
    other = h.agent("support", 10)
    small = call(h, guard, other, "issue_refund", {"order_id": "4", "amount": 5}, at=11)
    large = call(h, guard, other, "issue_refund", {"order_id": "5", "amount": 500}, at=12)
    h.end(other, 13)
    assert (small.allowed, large.allowed, large.rule) == (True, False, "big_refund")
    assert seen[1:3] == ["4", "5"]


def test_a_screened_rule_whose_test_raises_is_called_and_the_error_counted(make_processor: Any) -> None:
    from otel_agenteval.model.trajectory import ToolStep
    from otel_agenteval.rules import applies_to

    def broken(policy: Any) -> Any:
        def test(step: Any) -> bool:
            raise RuntimeError("bug in a rule's test")
        return test

    @applies_to((ToolStep,), lambda p: p.write_tools, when=broken)
    def refunds(event: Any, check: Any) -> Any:
        return [check.violation("refund_seen", "info", "a refund", event)]

    h = make_processor(WRITES_ONLY, rules=[refunds])
    root = h.agent("support", 0)
    h.tool(root, "issue_refund", {"order_id": "1", "amount": 5}, at=1)
    h.end(root, 2)
    assert [v.rule for v in h.violations] == ["refund_seen"]  # the rule decided
    assert h.processor.stats()["errors"]["rule"] == 1
    [t] = h.trajectories
    assert [s.tool for s in t.steps] == ["issue_refund"]  # and the step was recorded


def test_budget_gate_follows_the_agent_name_learned_late(make_processor: Any) -> None:
    # the budget depends on the agent; a name that arrives with the first tool span switches it
    policy = json.dumps({"agents": {"*": {"budget": {"max_steps": 100}}, "support": {"budget": {"max_steps": 1}}}})
    h = make_processor(policy)
    root = h.start("my workflow", None, 0, {})
    h.tool(root, "lookup_order", {"order_id": "1"}, at=1, end_attrs={"gen_ai.agent.name": "support"})
    second = h.tool(root, "lookup_order", {"order_id": "2"}, at=2)
    h.end(root, 3)
    assert breaches(h) == [("steps", hex_span(second), 2, 1)]


def test_integers_past_64_bits_are_compared_exactly(make_processor: Any) -> None:
    # read as floats, these two ids would be one number and the second call a duplicate
    h = make_processor(WRITES_ONLY)
    root = h.agent("support", 0)
    h.tool(root, "issue_refund", '{"order_id": 123456789012345678901234567890, "amount": 5}', at=1)
    h.tool(root, "issue_refund", '{"order_id": 123456789012345678901234567891, "amount": 5}', at=2)
    third = h.tool(root, "issue_refund", '{"amount": 5, "order_id": 123456789012345678901234567891}', at=3)
    h.end(root, 4)
    assert [(v.rule, v.span_id) for v in h.violations] == [("duplicate_write", hex_span(third))]
    assert h.trajectories[0].steps[1].arguments == {"order_id": 123456789012345678901234567891, "amount": 5}


def test_non_standard_json_constants_are_compared_as_text(make_processor: Any) -> None:
    # {"amount": NaN} is not JSON; read as text it must not collide with {"amount": null}
    h = make_processor(WRITES_ONLY)
    root = h.agent("support", 0)
    h.tool(root, "issue_refund", '{"order_id": "1", "amount": null}', at=1)
    h.tool(root, "issue_refund", '{"order_id": "1", "amount": NaN}', at=2)
    h.tool(root, "issue_refund", '{"order_id": "1", "amount": NaN}', at=3)  # the same text again: a duplicate
    h.end(root, 4)
    assert [v.rule for v in h.violations] == ["duplicate_write"]
