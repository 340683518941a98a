"""The guard in LangGraph (1.2, OpenInference's LangChain instrumentor): a ToolNode wrapper stops
the duplicate claim, the unconfirmed refund and the out-of-scope tool before they run; the model
gets a ToolMessage saying why; a confirmed refund runs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fw_harness import Harness, instrumented_factory
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.prebuilt import create_react_agent
from openinference.instrumentation.langchain import LangChainInstrumentor
from test_langgraph import script

from otel_agenteval import Policy
from otel_agenteval.guard.hooks.langgraph import guarded_tool_node

POLICY = Policy.from_dict({
    "tools": {"create_claim": {"write": True},
              "issue_refund": {"write": True, "requires_confirmation": True},
              "delete_account": {"write": True}},
    "agents": {"*": {"allowed_tools": ["create_claim", "issue_refund", "ask_user_confirmation"]}},
    "confirmation": {"tools": ["ask_user_confirmation"]},
})
CLAIM = {"order_id": "88120", "reason": "damaged_in_transit"}
REFUND = {"order_id": "88120", "amount": 25}


@pytest.fixture
def make() -> Iterator[Callable[[Policy], Harness]]:
    yield from instrumented_factory(LangChainInstrumentor())


def test_tool_node_wrapper(make: Callable[[Policy], Harness]) -> None:
    h = make(POLICY)
    guard = h.processor.guard(tracer_provider=h.provider)
    ran: list[str] = []

    @tool
    def create_claim(order_id: str, reason: str) -> str:
        """Create a claim."""
        ran.append("create_claim")
        return "CLM-1"

    @tool
    def issue_refund(order_id: str, amount: int) -> str:
        """Refund an order."""
        ran.append("issue_refund")
        return "refunded"

    @tool
    def ask_user_confirmation(order_id: str, amount: int) -> str:
        """Show the refund to the user and ask for a yes (here the user says yes)."""
        return '{"confirmed": true}'

    @tool
    def delete_account(account: str, reason: str) -> str:
        """Delete an account."""
        ran.append("delete_account")
        return "deleted"

    turns: list[list[tuple[str, dict[str, Any]]]] = [
        [("create_claim", CLAIM)], [("create_claim", CLAIM)], [("issue_refund", REFUND)],
        [("delete_account", {"account": "A-1", "reason": "asked"})], [("ask_user_confirmation", REFUND)], [("issue_refund", REFUND)]]
    node = guarded_tool_node([create_claim, issue_refund, ask_user_confirmation, delete_account], guard, handle_tool_errors=True)
    graph = create_react_agent(script(turns), node, name="support_agent")
    out = graph.invoke({"messages": [("user", "refund my damaged order")]},
                       config={"configurable": {"thread_id": "conv-l"}, "metadata": {"session_id": "conv-l"}})
    replies = [(m.name, m.status, str(m.content)) for m in out["messages"] if isinstance(m, ToolMessage)]
    assert ran == ["create_claim", "issue_refund"]
    assert [(name, status, text.split(": ")[1] if text.startswith("Not done") else text)
            for name, status, text in replies] == [
        ("create_claim", "success", "CLM-1"),
        ("create_claim", "error", "create_claim was stopped by policy rule duplicate_write"),
        ("issue_refund", "error", "issue_refund was stopped by policy rule write_without_confirmation"),
        ("delete_account", "error", "delete_account was stopped by policy rule scope_violation"),
        ("ask_user_confirmation", "success", '{"confirmed": true}'),
        ("issue_refund", "success", "refunded")]
    blocked = {(s.labels["rule"], s.labels["tool"]): s.value for m in h.registry.collect()
               if m.name == "agenteval_blocked_actions" for s in m.samples if s.name.endswith("_total")}
    assert blocked == {("duplicate_write", "create_claim"): 1, ("write_without_confirmation", "issue_refund"): 1,
                       ("scope_violation", "delete_account"): 1}
    assert h.violations == []
