"""Edges of the rules a user meets on an ordinary day, each one a bug ``make mutants`` planted and the
rest of the suite let through: an agent allowed nothing, two flagged results before one call, a
call that omits the subject argument, ``agenteval.approved="false"``, a result that came after the
call, the assistant's own words, a write with no arguments, a confirmation tool named like a
write, an agent listed for its budget only, long conversation ids."""

from __future__ import annotations

import json

from conftest import Harness

POLICY = """\
tools:
  lookup_order: {}
  fraud_flags: {}
  policy_lookup:
    forbidden_if:
      - same_subject: {argument: policy_id, attribute: app.caller.policy_id}
  update_payment:
    write: true
    forbidden_if:
      - {after: fraud_flags, result_matches: '"flagged":\\s*true'}
  empty_cart: {write: true}
  delete_account: {destructive: true}
  issue_refund: {write: true, grounded: [order_id]}
confirmation:
  tools: [confirm_with_user]
agents:
  "*": {allowed_tools: [lookup_order, fraud_flags, policy_lookup, update_payment, empty_cart, delete_account,
                        issue_refund, confirm_with_user]}
  auditor: {allowed_tools: []}
  support: {budget: {max_steps: 20}}
"""


def found(h: Harness) -> list[tuple[str, str]]:
    return [(v.rule, v.tool or "") for v in h.violations]


def test_an_agent_allowed_no_tools_may_call_none(make_processor) -> None:
    h = make_processor(POLICY)
    h.run("auditor", [("lookup_order", {"order_id": "1"})])
    assert found(h) == [("scope_violation", "lookup_order")]


def test_an_agent_listed_for_its_budget_only_keeps_the_star_tools(make_processor) -> None:
    h = make_processor(POLICY)
    h.run("support", [("lookup_order", {"order_id": "1"}), ("wipe_disk", {"disk": "sda"})])
    assert found(h) == [("scope_violation", "wipe_disk")]


def test_two_flagged_results_before_one_call_report_it_once(make_processor) -> None:
    h = make_processor(POLICY)
    r = h.agent("intake")
    h.tool(r, "fraud_flags", {"claim_id": "C1"}, at=1, result='{"flagged": true}')
    h.tool(r, "fraud_flags", {"claim_id": "C1"}, at=2, result='{"flagged": true}')
    h.tool(r, "update_payment", {"claim_id": "C1", "iban": "X"}, at=3)
    h.end(r, 4)
    assert found(h) == [("conditional_forbidden", "update_payment")]


def test_a_call_that_omits_the_subject_argument_is_not_another_subjects(make_processor) -> None:
    h = make_processor(POLICY)
    r = h.agent("intake", **{"app.caller.policy_id": "POL-1"})
    h.tool(r, "policy_lookup", {"query": "my policies"}, at=1)  # nothing to compare
    h.tool(r, "policy_lookup", {"policy_id": "POL-2"}, at=2)  # another caller's
    h.end(r, 3)
    assert found(h) == [("conditional_forbidden", "policy_lookup")]


def test_approved_false_does_not_approve_a_destructive_call(make_processor) -> None:
    h = make_processor(POLICY)
    for at, approved in ((0, "false"), (10, "true")):
        root = h.agent("intake", at=at, **{"agenteval.approved": approved})
        h.tool(root, "delete_account", {"account": f"a{at}"}, at=at + 1)
        h.end(root, at + 2)
    assert [(v.rule, v.details.get("trace_id", v.trace_id)) for v in h.violations] == [
        ("unauthorized_action", h.trajectories[0].trace_hex)]


def test_a_result_that_came_after_the_call_started_does_not_ground_it(make_processor) -> None:
    h = make_processor(POLICY)
    r = h.agent("intake", conv="g1")
    h.chat(r, at=0.5, end_attrs={"gen_ai.input.messages": json.dumps(
        [{"role": "user", "parts": [{"type": "text", "content": "Refund the order related to order 1"}]}])})
    h.tool(r, "lookup_order", {"order_id": "1"}, at=1, dur=1.5, result='{"related": "77001"}')  # ends at 2.5
    h.tool(r, "issue_refund", {"order_id": "77001"}, at=2, dur=1)  # started before that result came
    h.tool(r, "issue_refund", {"order_id": "77001", "again": True}, at=3)  # after it: grounded
    h.end(r, 4)
    assert [(v.rule, v.details["arguments"]) for v in h.violations] == [("ungrounded_argument", ["order_id"])]
    assert h.violations[0].span_id == format(h.trajectories[0].steps[1].span_id, "016x")


def test_the_assistants_own_words_do_not_ground_an_argument(make_processor) -> None:
    h = make_processor(POLICY)
    r = h.agent("intake", conv="g2")
    h.chat(r, at=1, end_attrs={"gen_ai.input.messages": json.dumps([
        {"role": "user", "parts": [{"type": "text", "content": "Refund my last order please"}]},
        {"role": "assistant", "parts": [{"type": "text", "content": "I will refund order 55555"}]}])})
    h.tool(r, "issue_refund", {"order_id": "55555"}, at=2)  # the model made the number up
    h.end(r, 3)
    assert [v.rule for v in h.violations] == ["ungrounded_argument"]


def test_a_write_with_no_arguments_twice_is_a_duplicate(make_processor) -> None:
    h = make_processor(POLICY)
    h.run("intake", [("empty_cart", {}), ("empty_cart", {})])
    assert found(h) == [("duplicate_write", "empty_cart")]


def test_a_confirmation_tool_named_like_a_write_is_not_one(make_processor) -> None:
    h = make_processor(POLICY)
    ask = {"tool": "issue_refund", "amount": 25}
    h.run("intake", [("confirm_with_user", ask), ("confirm_with_user", ask)])  # asked twice: fine
    assert found(h) == []


def test_long_conversation_ids_with_one_prefix_are_two_conversations(make_processor) -> None:
    h = make_processor(POLICY)
    prefix = "tenant-42/session/" + "x" * 300
    claim = {"account": "A-1", "iban": "X"}
    h.run("intake", [("update_payment", claim)], conv=prefix + "-alice")
    h.run("intake", [("update_payment", claim)], at=10, conv=prefix + "-bob")  # another user's first change
    h.run("intake", [("update_payment", claim)], at=20, conv=prefix + "-alice")  # alice's second: a duplicate
    assert found(h) == [("duplicate_write", "update_payment")]
    assert h.violations[0].trace_id == h.trajectories[2].trace_hex
