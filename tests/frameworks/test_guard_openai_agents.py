"""The guard in the OpenAI Agents SDK (0.24, OpenInference's instrumentor): a tool input guardrail
stops the duplicate claim, the unconfirmed refund and the out-of-scope tool before they run;
``needs_approval`` asks for approval exactly when a confirmation is missing; an approval, once the
run resumes, is the confirmation the refund runs on; a rejection confirms nothing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, function_tool, trace
from fw_harness import Harness, instrumented_factory
from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
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
    assert h.violations == []  # the held call did not run: its function span is no step
    assert [s.tool for t in h.trajectories for s in t.steps] == []


def exported(h: Harness) -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    h.provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


def resume(agent: Agent[Any], decide: Callable[[Any, Any], None]) -> Any:
    """Run until the refund asks for approval, ``decide(state, interruption)``, resume from the state:
    in one SDK trace (the SDK reattaches a resumed run's own trace without telling its processors,
    so OpenInference would drop the resumed run's spans)."""
    config = RunConfig(tracing_disabled=False)

    async def conversation() -> Any:
        with trace("support conversation"):
            first = await Runner.run(agent, "refund order 88120", run_config=config)
            [interruption] = first.interruptions
            state = first.to_state()
            decide(state, interruption)
            return await Runner.run(agent, state, run_config=config)

    return asyncio.run(conversation())


def test_an_approval_is_a_confirmation_the_resumed_call_runs_on(make: Callable[[Policy], Harness]) -> None:
    h = make(POLICY)
    spans = exported(h)
    ran: list[str] = []
    agent = support_agent(h, [[("issue_refund", {"order_id": "88120", "amount": 25})]], ran)
    resumed = resume(agent, lambda state, interruption: state.approve(interruption))
    assert ran == ["issue_refund"]
    outputs = [i["output"] for i in resumed.to_input_list() if isinstance(i, dict) and i.get("type") == "function_call_output"]
    assert outputs == ["refunded"]
    assert blocked(h) == {}
    assert h.violations == []  # the processor's write_without_confirmation found the approval and used it
    steps = [(s.tool, s.ok, s.arguments) for t in h.trajectories for s in t.steps]
    assert steps == [("issue_refund", True, {"order_id": "88120", "amount": 25})]  # the held call is no step
    confirmations = [s for s in spans.get_finished_spans() if s.name == "agenteval.confirmation"]
    assert [(s.attributes["agenteval.confirmation.tool"], json.loads(str(s.attributes["agenteval.confirmation.arguments"])))
            for s in confirmations] == [("issue_refund", {"order_id": "88120", "amount": 25})]


def test_a_rejection_confirms_nothing_and_the_call_does_not_run(make: Callable[[Policy], Harness]) -> None:
    h = make(POLICY)
    spans = exported(h)
    ran: list[str] = []
    agent = support_agent(h, [[("issue_refund", {"order_id": "88120", "amount": 25})]], ran)
    resume(agent, lambda state, interruption: state.reject(interruption))
    assert ran == []
    assert [s for s in spans.get_finished_spans() if s.name == "agenteval.confirmation"] == []
    assert h.violations == []
    assert [s.tool for t in h.trajectories for s in t.steps] == []
    held = [s.attributes.get("agenteval.guard.decision") for s in spans.get_finished_spans() if s.name == "issue_refund"]
    assert held == ["needs_approval"]  # asked once; the rejected call was not asked about again, nor run
