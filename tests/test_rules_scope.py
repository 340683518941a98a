"""scope_violation, ordering_violation, conditional_forbidden, ungrounded_argument, the repeats
budget and custom rules, through the real SDK and the processor."""

from __future__ import annotations

import json
import sys
import types

import pytest
from conftest import Harness

from otel_agenteval import Check, Policy, PolicyError, ToolStep, TrajectoryProcessor

CLAIMS = """\
tools:
  policy_lookup:
    forbidden_if:
      - same_subject: {argument: policy_id, attribute: app.caller.policy_id}
    arguments: {policy_id: [id]}
  coverage_rules: {}
  fraud_flags: {}
  route: {requires_before: [coverage_rules, fraud_flags]}
  update_payment:
    write: true
    forbidden_if:
      - {after: fraud_flags, result_matches: '"flagged":\\s*true'}
agents:
  "*": {allowed_tools: [policy_lookup, coverage_rules, fraud_flags, route, update_payment]}
  triage: {allowed_tools: [policy_lookup]}
severity:
  ordering_violation: warning
"""


def rules_of(h: Harness) -> list[str]:
    return [v.rule for v in h.violations]


def test_scope_violation_uses_the_agents_own_list_else_star(make_processor):
    h = make_processor(CLAIMS)
    a = h.agent("triage")
    h.tool(a, "policy_lookup", {"policy_id": "P-1"}, at=1)
    h.tool(a, "route", {"claim_id": "C1"}, at=2)
    h.end(a, 3)
    b = h.agent("intake", at=10)
    h.tool(b, "coverage_rules", {}, at=11)
    h.tool(b, "delete_everything", {}, at=12)
    h.end(b, 13)
    scope = [(v.agent, v.tool) for v in h.violations if v.rule == "scope_violation"]
    assert scope == [("triage", "route"), ("intake", "delete_everything")]
    assert h.agent_value("agenteval_violations_total", "triage", rule="scope_violation", tool="route",
                         severity="critical") == 1


def test_ordering_violation_until_both_checks_succeeded(make_processor):
    h = make_processor(CLAIMS)
    r = h.agent("intake")
    h.tool(r, "coverage_rules", {"policy_id": "P-1"}, at=1)
    h.tool(r, "route", {"claim_id": "C1"}, at=2)  # fraud_flags missing
    h.tool(r, "fraud_flags", {"claim_id": "C1"}, at=3, error="timeout")
    h.tool(r, "route", {"claim_id": "C1"}, at=4)  # fraud_flags failed
    h.tool(r, "fraud_flags", {"claim_id": "C1"}, at=5, result='{"flagged": false}')
    h.tool(r, "route", {"claim_id": "C1"}, at=6)  # fine now
    h.end(r, 7)
    order = [v for v in h.violations if v.rule == "ordering_violation"]
    assert [v.details["missing"] for v in order] == [["fraud_flags"], ["fraud_flags"]]
    assert {v.severity for v in order} == {"warning"}  # severity override from the policy


def test_ordering_parallel_calls_do_not_count_as_before(make_processor):
    h = make_processor(CLAIMS)
    r = h.agent("intake")
    h.tool(r, "coverage_rules", {}, at=1, dur=2)
    h.tool(r, "fraud_flags", {}, at=1, dur=2)
    h.tool(r, "route", {}, at=2, dur=0.5)  # started before the checks ended
    h.end(r, 4)
    assert rules_of(h) == ["ordering_violation"]


def test_forbidden_after_a_flagged_fraud_result(make_processor):
    h = make_processor(CLAIMS)
    r = h.agent("intake")
    h.tool(r, "fraud_flags", {"claim_id": "C1"}, at=1, result='{"flagged": false}')
    h.tool(r, "update_payment", {"claim_id": "C1", "iban": "X"}, at=2)
    h.tool(r, "fraud_flags", {"claim_id": "C2"}, at=3, result='{"flagged":  true, "score": 0.93}')
    h.tool(r, "update_payment", {"claim_id": "C2", "iban": "Y"}, at=4)
    h.end(r, 5)
    assert [(v.rule, v.tool) for v in h.violations] == [("conditional_forbidden", "update_payment")]
    assert h.violations[0].span_id is not None


def test_same_subject_compares_the_callers_policy_after_normalising(make_processor):
    h = make_processor(CLAIMS)
    r = h.agent("intake", **{"app.caller.policy_id": "POL-00123"})  # read when the root starts
    h.tool(r, "policy_lookup", {"policy_id": "123"}, at=1)
    assert rules_of(h) == []
    h.tool(r, "policy_lookup", {"policy_id": "POL-999"}, at=2)
    assert rules_of(h) == ["conditional_forbidden"]  # before the root ends
    h.end(r, 3)
    other = h.agent("intake", at=10)  # no caller subject known: nothing to compare
    h.tool(other, "policy_lookup", {"policy_id": "POL-999"}, at=11)
    h.end(other, 12)
    assert rules_of(h) == ["conditional_forbidden"]


GROUNDED = """\
tools:
  issue_refund: {write: true, grounded: [order_id]}
"""


def test_ungrounded_argument_needs_the_value_in_user_input_or_a_tool_result(make_processor):
    h = make_processor(GROUNDED)
    r = h.agent(conv="g1")
    h.chat(r, at=1, end_attrs={"gen_ai.input.messages": json.dumps(
        [{"role": "user", "parts": [{"type": "text", "content": "Refund my order 88120 please"}]}])})
    h.tool(r, "lookup_order", {"order_id": "88120"}, at=2, result='{"order_id": "88120", "related": "77001"}')
    h.tool(r, "issue_refund", {"order_id": "88120"}, at=3)  # in the user input
    h.tool(r, "issue_refund", {"order_id": "77001"}, at=4)  # in a tool result
    h.tool(r, "issue_refund", {"order_id": "55555"}, at=5)  # from nowhere
    h.end(r, 6)
    assert [(v.rule, v.severity, v.details["arguments"]) for v in h.violations] == [
        ("ungrounded_argument", "warning", ["order_id"])]


def test_ungrounded_argument_is_silent_without_content(make_processor):
    h = make_processor(GROUNDED)
    r = h.agent()
    h.chat(r, at=1)
    h.tool(r, "issue_refund", {"order_id": "55555"}, at=2)
    h.end(r, 3)
    assert rules_of(h) == []


def test_max_repeats_loop_guard(make_processor):
    h = make_processor('agents: {"*": {budget: {max_repeats: 2}}}')
    r = h.agent()
    for i in range(4):
        h.tool(r, "search_orders", {"query": "88120"}, at=1 + i)
    h.tool(r, "search_orders", {"query": "other"}, at=9)
    h.end(r, 10)
    assert [(v.rule, v.details["budget"], v.details["used"]) for v in h.violations] == [("budget_breach", "repeats", 3)]
    assert h.agent_value("agenteval_budget_breaches_total", "support", budget="repeats") == 1


# --- custom rules ------------------------------------------------------------------------------
def no_refunds_on_sunday(event, check: Check):
    """A custom rule: any call to issue_refund whose argument day is sunday."""
    if isinstance(event, ToolStep) and event.tool == "issue_refund" and event.arguments.get("day") == "sunday":
        return [check.violation("no_sunday_refunds", "warning", "refund on a sunday", event)]
    return None


def test_custom_rule_in_code_and_named_in_the_policy(make_processor, monkeypatch):
    module = types.ModuleType("my_rules")
    module.no_refunds_on_sunday = no_refunds_on_sunday  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "my_rules", module)
    h = make_processor("custom_rules: ['my_rules:no_refunds_on_sunday']")
    r = h.agent()
    h.tool(r, "issue_refund", {"day": "sunday"}, at=1)
    h.tool(r, "issue_refund", {"day": "monday"}, at=2)
    h.end(r, 3)
    assert rules_of(h) == ["no_sunday_refunds"]
    assert h.agent_value("agenteval_violations_total", "support", rule="no_sunday_refunds", tool="issue_refund",
                         severity="warning") == 1

    from otel_agenteval.rules import builtin_rules

    h2 = make_processor(rules=[*builtin_rules().values(), no_refunds_on_sunday])
    r2 = h2.agent()
    h2.tool(r2, "issue_refund", {"day": "sunday"}, at=1)
    h2.end(r2, 2)
    assert rules_of(h2) == ["no_sunday_refunds"]


def test_custom_rule_that_cannot_be_loaded_names_the_entry():
    with pytest.raises(PolicyError, match=r"custom_rules.0: cannot load 'nowhere_module:rule'"):
        TrajectoryProcessor(Policy.from_dict({"custom_rules": ["nowhere_module:rule"]}))


def test_rules_switched_off_in_the_policy(make_processor):
    h = make_processor("tools: {create_claim: {write: true}}\nrules: {duplicate_write: false}")
    r = h.agent()
    h.tool(r, "create_claim", {"order_id": "1"}, at=1)
    h.tool(r, "create_claim", {"order_id": "1"}, at=2)
    h.end(r, 3)
    assert rules_of(h) == []
