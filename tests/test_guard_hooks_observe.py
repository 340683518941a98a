"""``@guarded`` in observe mode, the roll-out the docs recommend: every call runs (sync and async),
what enforce mode would have stopped is marked on its span and counted as ``would_block``, and
the processor reports the same violations after the fact as with no guard at all. And what a
stopped call tells the agent: ask the user only when a yes is all that is missing."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from guard_support import GUARD_POLICY
from test_guard_hooks import Rig

from otel_agenteval import record_confirmation
from otel_agenteval.guard.hooks.plain import guarded

OBSERVE = GUARD_POLICY + "guard: {mode: observe}\n"
CLAIM = {"order_id": "88120", "reason": "damaged"}


@pytest.fixture
def rig() -> Iterator[Rig]:
    r = Rig(OBSERVE)
    yield r
    r.provider.shutdown()


def would_block(rig: Rig) -> dict[tuple[str, str], float]:
    return {(s.labels["rule"], s.labels["tool"]): s.value for m in rig.registry.collect()
            if m.name == "agenteval_guard_would_block" for s in m.samples if s.name.endswith("_total")}


def decisions(rig: Rig) -> list[str | None]:
    return [s.attributes.get("agenteval.guard.decision") for s in rig.tool_spans()]


def test_observe_mode_sync_every_call_runs_and_what_would_stop_it_is_counted(rig: Rig) -> None:
    ran: list[tuple[str, dict[str, Any]]] = []

    @guarded("issue_refund", guard=rig.guard, tracer_provider=rig.provider)
    def issue_refund(order_id: str, amount: int = 25) -> str:
        ran.append(("issue_refund", {"order_id": order_id, "amount": amount}))
        return "R-1"

    @guarded("create_claim", guard=rig.guard, on_block="raise", tracer_provider=rig.provider)
    def create_claim(order_id: str, reason: str) -> str:
        ran.append(("create_claim", {"order_id": order_id, "reason": reason}))
        return "CLM-1"

    with rig.agent("conv-o"):
        got = [issue_refund("88120"),  # unconfirmed: would be stopped
               create_claim(**CLAIM), create_claim(**CLAIM)]  # the second a duplicate: would be stopped, no raise
        record_confirmation("issue_refund", {"amount": 25}, tracer=rig.tracer)
        got.append(issue_refund("77001"))
    assert got == ["R-1", "CLM-1", "CLM-1", "R-1"]
    assert [tool for tool, _ in ran] == ["issue_refund", "create_claim", "create_claim", "issue_refund"]
    assert would_block(rig) == {("write_without_confirmation", "issue_refund"): 1, ("duplicate_write", "create_claim"): 1}
    assert rig.blocked() == {}
    assert decisions(rig) == ["would_block", "allowed", "would_block", "allowed"]
    # the calls ran, so the processor reports them after the fact as it would with no guard
    assert sorted(v.rule for v in rig.violations) == ["duplicate_write", "write_without_confirmation"]
    [t] = rig.trajectories
    assert [(s.tool, s.ok) for s in t.steps] == [("issue_refund", True), ("create_claim", True),
                                                ("create_claim", True), ("issue_refund", True)]


def test_observe_mode_async_every_call_runs_and_what_would_stop_it_is_counted(rig: Rig) -> None:
    ran: list[str] = []

    @guarded("create_claim", guard=rig.guard, on_block="raise", tracer_provider=rig.provider)
    async def create_claim(order_id: str, reason: str) -> str:
        await asyncio.sleep(0)
        ran.append(order_id)
        return "CLM-1"

    @guarded("delete_account", guard=rig.guard, tracer_provider=rig.provider)
    async def delete_account(account: str) -> str:
        await asyncio.sleep(0)
        ran.append(account)
        return "deleted"

    async def main() -> list[str]:
        with rig.agent("conv-oa"):
            return [await create_claim(**CLAIM), await create_claim(**CLAIM), await delete_account("A-1")]

    assert asyncio.run(main()) == ["CLM-1", "CLM-1", "deleted"]
    assert ran == ["88120", "88120", "A-1"]
    assert would_block(rig) == {("duplicate_write", "create_claim"): 1, ("scope_violation", "delete_account"): 1}
    assert rig.blocked() == {}
    assert decisions(rig) == ["allowed", "would_block", "would_block"]
    assert sorted(v.rule for v in rig.violations) == ["duplicate_write", "scope_violation"]


def test_a_call_both_unconfirmed_and_out_of_scope_is_refused_not_offered_for_approval() -> None:
    """A confirmation is all a support agent's refund misses, so the agent is told to ask the user;
    the triage agent may not refund at all, so a yes would change nothing: it is told no, and a
    framework asking ``needs_confirmation`` (the OpenAI Agents SDK's ``needs_approval``) gets False."""
    rig = Rig(GUARD_POLICY + "  triage:\n    allowed_tools: [lookup_order, ask_user_confirmation]\n")
    try:
        @guarded("issue_refund", guard=rig.guard, tracer_provider=rig.provider)
        def issue_refund(order_id: str, amount: int = 25) -> str:
            return "R-1"

        with rig.agent("conv-s"):
            support = issue_refund("88120")
            support_peek = rig.guard.peek("issue_refund", {"order_id": "88120", "amount": 25})
        with rig.tracer.start_as_current_span("invoke_agent triage", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "triage"}):
            triage = issue_refund("88120")
            triage_peek = rig.guard.peek("issue_refund", {"order_id": "88120", "amount": 25})
    finally:
        rig.provider.shutdown()
    assert "Ask the user to confirm" in support and support_peek.needs_confirmation
    assert triage.startswith("Not done: issue_refund was stopped by policy rule")
    assert "Ask the user to confirm" not in triage
    assert not triage_peek.needs_confirmation
    assert sorted(v.rule for v in triage_peek.violations) == ["scope_violation", "write_without_confirmation"]


def test_record_result_false_keeps_the_result_off_the_span(rig: Rig) -> None:
    @guarded("lookup_order", guard=rig.guard, record_result=False, tracer_provider=rig.provider)
    def lookup_order(order_id: str) -> dict[str, str]:
        return {"name": "Ada Lovelace", "card": "4111 1111 1111 1111"}

    with rig.agent("conv-r"):
        assert lookup_order("88120")["name"] == "Ada Lovelace"
    [span] = rig.tool_spans()
    assert "gen_ai.tool.call.result" not in (span.attributes or {})


def test_a_tool_span_named_as_semconv_names_it_gets_the_decision(rig: Rig) -> None:
    """Google ADK names its tool span ``execute_tool <tool>`` and sets the GenAI attributes only when
    it ends: the guard still puts its decision on that span, and opens no span of its own."""
    with rig.agent("conv-adk"), rig.tracer.start_as_current_span("execute_tool issue_refund"):
        decision = rig.guard.check("issue_refund", {"order_id": "88120", "amount": 25})  # unconfirmed
    assert decision.would_block and decision.rule == "write_without_confirmation"
    [span] = rig.tool_spans()
    assert span.attributes is not None and span.attributes.get("agenteval.guard.decision") == "would_block"
    assert [s.name for s in rig.exported.get_finished_spans() if s.name == "agenteval.guard"] == []


def test_a_write_with_no_arguments_runs_once() -> None:
    rig = Rig(GUARD_POLICY.replace("  delete_account: {write: true}\n",
                                   "  delete_account: {write: true}\n  empty_cart: {write: true}\n"))
    emptied: list[int] = []
    try:
        @guarded("empty_cart", guard=rig.guard, tracer_provider=rig.provider)
        def empty_cart() -> str:
            emptied.append(1)
            return "emptied"

        with rig.tracer.start_as_current_span("invoke_agent shop", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "shop"}):
            first, second = empty_cart(), empty_cart()
    finally:
        rig.provider.shutdown()
    assert (first, len(emptied)) == ("emptied", 1)
    assert second.startswith("Not done: empty_cart was stopped by policy rule duplicate_write")
