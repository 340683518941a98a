"""write_without_confirmation and unauthorized_action, per confirmation source, through the real SDK.

Every adversarial run from the issue is here: a yes to something else, a yes before the amount
was shown, one confirmation used for two writes, "no, don't" (which contains "do"), a
confirmation in an earlier turn of the same conversation (counts) and in another one (does not).
"""

from __future__ import annotations

import json

from conftest import Harness

from otel_agenteval import record_confirmation

POLICY = """\
tools:
  issue_refund: {write: true, requires_confirmation: true, confirm_arguments: [amount],
                 arguments: {amount: [decimal]}}
  update_address: {write: true, requires_confirmation: true}
  delete_account: {destructive: true}
  ask_user_confirmation: {}
confirmation:
  tools: [ask_user_confirmation]
"""


def _msgs(*turns: tuple[str, str]) -> str:
    return json.dumps([{"role": r, "parts": [{"type": "text", "content": c}]} for r, c in turns])


def chat_with(h: Harness, root, at: float, *turns: tuple[str, str]):
    return h.chat(root, at=at, end_attrs={"gen_ai.input.messages": _msgs(*turns)})


def count(h: Harness, rule: str, tool: str, agent: str = "support") -> float:
    return h.agent_value("agenteval_violations_total", agent, rule=rule, tool=tool, severity="critical") or 0.0


# --- confirmation tool -----------------------------------------------------------------------
def test_confirmation_tool_covers_the_write(make_processor):
    h = make_processor(POLICY)
    root = h.agent(conv="c1")
    h.tool(root, "ask_user_confirmation", {"tool": "update_address", "address": "12 Harbour Road"},
           at=1, result=json.dumps({"confirmed": True}))
    h.tool(root, "update_address", {"order_id": "88120", "address": "12 Harbour Road "}, at=2)
    h.end(root, 3)
    assert h.rules() == []
    assert count(h, "write_without_confirmation", "update_address") == 0


def test_confirmation_tool_saying_no_or_naming_another_value(make_processor):
    h = make_processor(POLICY)
    root = h.agent(conv="c1")
    h.tool(root, "ask_user_confirmation", {"tool": "update_address"}, at=1, result=json.dumps({"confirmed": False}))
    h.tool(root, "update_address", {"address": "1 Road"}, at=2)
    h.tool(root, "ask_user_confirmation", {"tool": "update_address", "address": "9 Other Street"}, at=3,
           result="yes")
    h.tool(root, "update_address", {"address": "2 Road"}, at=4)  # yes was to another address
    h.end(root, 5)
    assert h.rules() == ["write_without_confirmation", "write_without_confirmation"]
    assert count(h, "write_without_confirmation", "update_address") == 2


def test_write_without_any_confirmation_fires_when_the_tool_span_ends(make_processor):
    h = make_processor(POLICY)
    root = h.agent(conv="c1")
    h.tool(root, "update_address", {"address": "1 Road"}, at=1)
    # the root is still open: the violation is already counted
    assert count(h, "write_without_confirmation", "update_address") == 1
    assert h.violations[0].span_id is not None and h.violations[0].tool == "update_address"
    h.end(root, 2)
    assert count(h, "write_without_confirmation", "update_address") == 1


# --- record_confirmation (a zero-length span) and span events --------------------------------
def _real_time_tool(tracer, name: str, args: dict) -> None:
    with tracer.start_as_current_span(f"execute_tool {name}", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
            "gen_ai.tool.call.arguments": json.dumps(args)}):
        pass


def test_record_confirmation_helper_covers_only_the_stated_amount(make_processor):
    h = make_processor(POLICY)
    with h.tracer.start_as_current_span("invoke_agent support", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}):
        record_confirmation("issue_refund", {"amount": "45.00"}, tracer=h.tracer)
        _real_time_tool(h.tracer, "issue_refund", {"order_id": "88120", "amount": 120.5})  # yes to another amount
        record_confirmation("issue_refund", {"amount": 45}, tracer=h.tracer)
        _real_time_tool(h.tracer, "issue_refund", {"order_id": "88120", "amount": "45"})
    assert h.rules() == ["write_without_confirmation"]
    assert h.violations[0].details.get("arguments_hash")
    assert h.processor.stats()["spans"]["confirmation"] == 2


def test_record_confirmation_is_seen_before_the_write_even_when_real_time_is_used(make_processor):
    """record_confirmation ends its span at once with the real clock: a write started later counts."""
    h = make_processor(POLICY)
    tracer = h.tracer
    with tracer.start_as_current_span("invoke_agent support",
                                      attributes={"gen_ai.operation.name": "invoke_agent",
                                                  "gen_ai.agent.name": "support"}):
        record_confirmation("update_address", {"address": "1 Road"}, tracer=tracer)
        with tracer.start_as_current_span("execute_tool update_address", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "update_address",
                "gen_ai.tool.call.arguments": json.dumps({"address": "1 Road"})}):
            pass
    assert h.rules() == []


def test_confirmation_event_on_an_earlier_span_counts(make_processor):
    h = make_processor(POLICY)
    root = h.agent(conv="c1")
    ui = h.start("ui.dialog", root, at=1)
    h.end(ui, 1.5, events=[("agenteval.confirmation", {"agenteval.confirmation.tool": "update_address",
                                                       "agenteval.confirmation.arguments": '{"address": "1 Road"}'})])
    h.tool(root, "update_address", {"address": "1 Road"}, at=2)
    h.end(root, 3)
    assert h.rules() == []


def test_a_confirmation_made_after_the_write_started_does_not_count(make_processor):
    h = make_processor(POLICY)
    root = h.agent(conv="c1")
    write = h.start("execute_tool update_address", root, at=1, attrs={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "update_address",
        "gen_ai.tool.call.arguments": '{"address": "1 Road"}'})
    h.tool(root, "ask_user_confirmation", {"tool": "update_address"}, at=1.2, result='{"confirmed": true}')
    h.end(write, 2)
    h.end(root, 3)
    assert h.rules() == ["write_without_confirmation"]


# --- one confirmation, one write ---------------------------------------------------------------
def test_one_confirmation_authorises_one_write(make_processor):
    h = make_processor(POLICY)
    root = h.agent(conv="c1")
    h.tool(root, "ask_user_confirmation", {"tool": "issue_refund", "amount": 45}, at=1, result='{"confirmed": true}')
    h.tool(root, "issue_refund", {"order_id": "88120", "amount": 45}, at=2)
    h.tool(root, "issue_refund", {"order_id": "88120", "amount": 45}, at=3)
    h.end(root, 4)
    assert sorted(h.rules()) == ["duplicate_write", "write_without_confirmation"]


# --- captured messages -----------------------------------------------------------------------
def test_messages_yes_after_the_amount_was_shown_counts(make_processor):
    h = make_processor(POLICY)
    root = h.agent(conv="c1")
    chat_with(h, root, 1, ("user", "Refund order 88120 please"),
              ("assistant", "I can refund $45.00 for order 88120. Shall I go ahead?"), ("user", "Yes, please do."))
    h.tool(root, "issue_refund", {"order_id": "88120", "amount": 45}, at=2)
    h.end(root, 3)
    assert h.rules() == []


def test_messages_yes_to_a_different_amount(make_processor):
    h = make_processor(POLICY)
    root = h.agent(conv="c1")
    chat_with(h, root, 1, ("user", "Refund order 88120"),
              ("assistant", "I can refund $45.00 for order 88120. Shall I go ahead?"), ("user", "yes"))
    h.tool(root, "issue_refund", {"order_id": "88120", "amount": 120.5}, at=2)
    h.end(root, 3)
    assert h.rules() == ["write_without_confirmation"]


def test_messages_yes_before_the_amount_was_shown(make_processor):
    h = make_processor(POLICY)
    root = h.agent(conv="c1")
    chat_with(h, root, 1, ("assistant", "Hello! How can I help?"), ("user", "yes refund order 88120"),
              ("assistant", "The refund will be $45.00."))
    h.tool(root, "issue_refund", {"order_id": "88120", "amount": 45}, at=2)
    h.end(root, 3)
    assert h.rules() == ["write_without_confirmation"]


def test_messages_no_dont_is_not_a_yes(make_processor):
    h = make_processor(POLICY)
    root = h.agent(conv="c1")
    chat_with(h, root, 1, ("assistant", "Shall I change the address of order 88120 to 12 Harbour Road?"),
              ("user", "No, don't do that."))
    h.tool(root, "update_address", {"order_id": "88120", "address": "12 Harbour Road"}, at=2)
    h.end(root, 3)
    assert h.rules() == ["write_without_confirmation"]


def test_messages_two_writes_with_one_yes(make_processor):
    h = make_processor(POLICY)
    root = h.agent(conv="c1")
    turns = (("assistant", "Change order 88120 to 12 Harbour Road?"), ("user", "yes"))
    chat_with(h, root, 1, *turns)
    h.tool(root, "update_address", {"order_id": "88120", "address": "12 Harbour Road"}, at=2)
    chat_with(h, root, 3, *turns)
    h.tool(root, "update_address", {"order_id": "88120", "address": "12 Harbour Road"}, at=4)
    h.end(root, 5)
    assert sorted(h.rules()) == ["duplicate_write", "write_without_confirmation"]


def test_messages_from_events_and_openinference_attributes(make_processor):
    h = make_processor(POLICY)
    root = h.agent(conv="c1")
    chat = h.start("chat", root, at=1, attrs={"gen_ai.operation.name": "chat"})
    h.end(chat, 1.5, events=[("gen_ai.assistant.message", {"content": json.dumps([{"text": "Move 88120 to 1 Road?"}])}),
                             ("gen_ai.user.message", {"content": json.dumps([{"text": "yes"}])})])
    h.tool(root, "update_address", {"order_id": "88120", "address": "1 Road"}, at=2)
    llm = h.start("response", root, at=3, attrs={"openinference.span.kind": "LLM"})
    h.end(llm, 3.5, {"llm.input_messages.1.message.role": "assistant",
                     "llm.input_messages.1.message.content": "Refund 45 USD?",
                     "llm.input_messages.2.message.role": "user",
                     "llm.input_messages.2.message.content": "ok go ahead"})
    h.tool(root, "issue_refund", {"order_id": "88120", "amount": "45.00"}, at=4)
    h.end(root, 5)
    assert h.rules() == []


# --- across turns of one conversation ----------------------------------------------------------
def test_confirmation_in_an_earlier_turn_of_the_same_conversation_counts(make_processor):
    h = make_processor(POLICY)
    first = h.agent(conv="conv-A")
    h.tool(first, "ask_user_confirmation", {"tool": "update_address", "address": "1 Road"}, at=1,
           result='{"confirmed": true}', conv="conv-A")
    h.end(first, 2)
    second = h.agent(at=10, conv="conv-A")  # another trace
    h.tool(second, "update_address", {"address": "1 Road"}, at=11, conv="conv-A")
    h.end(second, 12)
    assert h.rules() == []
    assert len(h.trajectories) == 2 and h.trajectories[0].trace_id != h.trajectories[1].trace_id


def test_confirmation_in_another_conversation_does_not_count(make_processor):
    h = make_processor(POLICY)
    first = h.agent(conv="conv-A")
    h.tool(first, "ask_user_confirmation", {"tool": "update_address", "address": "1 Road"}, at=1,
           result='{"confirmed": true}', conv="conv-A")
    h.end(first, 2)
    other = h.agent(at=10, conv="conv-B")
    h.tool(other, "update_address", {"address": "1 Road"}, at=11, conv="conv-B")
    h.end(other, 12)
    assert h.rules() == ["write_without_confirmation"]


def test_messages_confirmation_from_an_earlier_turn_in_the_history(make_processor):
    h = make_processor(POLICY)
    first = h.agent(conv="conv-A")
    chat_with(h, first, 1, ("user", "Move order 88120"), ("assistant", "Move order 88120 to 1 Road. Confirm?"))
    h.end(first, 2)
    second = h.agent(at=10, conv="conv-A")
    chat_with(h, second, 11, ("user", "Move order 88120"), ("assistant", "Move order 88120 to 1 Road. Confirm?"),
              ("user", "Yes, confirmed."))
    h.tool(second, "update_address", {"order_id": "88120", "address": "1 Road"}, at=12, conv="conv-A")
    h.end(second, 13)
    assert h.rules() == []


# --- unauthorized_action -----------------------------------------------------------------------
def test_destructive_without_approval(make_processor):
    h = make_processor(POLICY)
    root = h.agent()
    h.tool(root, "delete_account", {"account": "a1"}, at=1)
    h.end(root, 2)
    assert h.rules() == ["unauthorized_action"]
    assert count(h, "unauthorized_action", "delete_account") == 1


def test_destructive_approved_by_root_attribute_read_at_start(make_processor):
    h = make_processor(POLICY)
    root = h.agent(**{"agenteval.approved": True})
    h.tool(root, "delete_account", {"account": "a1"}, at=1)
    assert h.rules() == []  # decided while the root is still open
    h.end(root, 2)


def test_destructive_approved_by_span_attribute_or_confirmation(make_processor):
    h = make_processor(POLICY)
    root = h.agent()
    span = h.start("execute_tool delete_account", root, at=1, attrs={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "delete_account", "agenteval.approved": True})
    h.end(span, 1.5)
    h.tool(root, "ask_user_confirmation", {"tool": "delete_account"}, at=2, result="Yes, delete it")
    h.tool(root, "delete_account", {"account": "a2"}, at=3)
    h.tool(root, "delete_account", {"account": "a3"}, at=4)  # that yes was used up
    h.end(root, 5)
    assert h.rules() == ["unauthorized_action"]


def test_a_failed_write_does_not_use_up_the_confirmation(make_processor):
    h = make_processor(POLICY)
    root = h.agent(conv="c1")
    h.tool(root, "ask_user_confirmation", {"tool": "update_address", "address": "1 Road"}, at=1, result="yes")
    h.tool(root, "update_address", {"address": "1 Road"}, at=2, error="timeout")
    h.tool(root, "update_address", {"address": "1 Road"}, at=3)  # the retry: still covered
    h.tool(root, "update_address", {"address": "1 Road"}, at=4)  # now it is used up
    h.end(root, 5)
    assert h.rules() == ["write_retried_after_error", "duplicate_write", "write_without_confirmation"]
