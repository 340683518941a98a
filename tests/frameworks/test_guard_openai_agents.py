"""The guard in the OpenAI Agents SDK (0.24, OpenInference's instrumentor): a tool input guardrail
stops the duplicate claim, the unconfirmed refund and the out-of-scope tool before they run;
``needs_approval`` asks for approval exactly when a confirmation is missing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, function_tool
from fw_harness import Harness, instrumented_factory
from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
from test_openai_agents import CannedModel

from otel_agenteval import Policy
from otel_agenteval.guard.hooks.openai_agents import guard_input, needs_confirmation

POLICY = Policy.from_dict({
    "tools": {"create_claim": {"write": True},
              "issue_refund": {"write": True, "requires_confirmation": True},
              "delete_account": {"write": True}},
    "agents": {"*": {"allowed_tools": ["lookup_order", "create_claim", "issue_refund"]}},
})
CLAIM = {"order_id": "88120", "reason": "damaged_in_transit"}


@pytest.fixture
def make() -> Iterator[Callable[[Policy], Harness]]:
    yield from instrumented_factory(OpenAIAgentsInstrumentor())


def blocked(h: Harness) -> dict[tuple[str, str], float]:
    return {(s.labels["rule"], s.labels["tool"]): s.value for m in h.registry.collect()
            if m.name == "agenteval_blocked_actions" for s in m.samples if s.name.endswith("_total")}


def support_agent(h: Harness, turns: list[list[tuple[str, dict[str, Any]]]], ran: list[str]) -> Agent[Any]:
    guard = h.processor.guard(tracer_provider=h.provider)
    rail = [guard_input(guard)]

    def lookup_order(order_id: str) -> str:
        """Look up an order."""
        ran.append("lookup_order")
        return "delivered"

    def create_claim(order_id: str, reason: str) -> str:
        """Create a claim."""
        ran.append("create_claim")
        return "CLM-1"

    def issue_refund(order_id: str, amount: int) -> str:
        """Refund an order."""
        ran.append("issue_refund")
        return "refunded"

    def delete_account(account: str) -> str:
        """Delete an account."""
        ran.append("delete_account")
        return "deleted"

    tools = [function_tool(f, tool_input_guardrails=rail) for f in (lookup_order, create_claim, delete_account)]
    tools.append(function_tool(issue_refund, tool_input_guardrails=rail,
                               needs_approval=needs_confirmation(guard, "issue_refund")))
    model = CannedModel([[(name, json.dumps(args)) for name, args in turn] for turn in turns])
    return Agent(name="support_agent", instructions="Support.", model=model, tools=tools)


def test_guardrail_stops_what_must_not_run(make: Callable[[Policy], Harness]) -> None:
    h = make(POLICY)
    ran: list[str] = []
    agent = support_agent(h, [[("lookup_order", {"order_id": "88120"})], [("create_claim", CLAIM)],
                              [("create_claim", CLAIM)], [("delete_account", {"account": "A-1"})]], ran)
    result = asyncio.run(Runner.run(agent, "my order arrived damaged",
                                    run_config=RunConfig(tracing_disabled=False)))
    outputs = [i["output"] for i in result.to_input_list() if isinstance(i, dict) and i.get("type") == "function_call_output"]
    assert ran == ["lookup_order", "create_claim"]
    assert [o.split(": ")[1] if o.startswith("Not done") else o for o in outputs] == [
        "delivered", "CLM-1", "create_claim was stopped by policy rule duplicate_write",
        "delete_account was stopped by policy rule scope_violation"]
    assert blocked(h) == {("duplicate_write", "create_claim"): 1, ("scope_violation", "delete_account"): 1}
    assert h.violations == []


def test_needs_approval_when_only_a_confirmation_is_missing(make: Callable[[Policy], Harness]) -> None:
    h = make(POLICY)
    ran: list[str] = []
    agent = support_agent(h, [[("issue_refund", {"order_id": "88120", "amount": 25})]], ran)
    result = asyncio.run(Runner.run(agent, "refund order 88120", run_config=RunConfig(tracing_disabled=False)))
    assert [i.tool_name for i in result.interruptions] == ["issue_refund"]
    assert ran == []
    assert blocked(h) == {}  # asking whether approval is needed is not a blocked call
