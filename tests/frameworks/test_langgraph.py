"""LangGraph 1.2 ``create_react_agent`` + OpenInference's LangChain instrumentor 0.1.80.

A fake chat model returns canned tool calls; ``ToolNode(handle_tool_errors=True)`` turns the
failing tool into an error message for the model. Shapes exercised: every attribute set only
at END (the agent cannot be named before the run ends), a root AGENT span named after the graph
with no ``agent.name``, graph-node AGENT spans named ``agent``, CHAIN spans in between,
``llm.token_count.*`` and ``session.id`` on every span, a bare ``input.value`` for one-argument
tools, and an ERROR tool span under an OK ``tools`` chain.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from fw_harness import (
    CLAIM_BAD,
    CLAIM_OK,
    CLAIM_OK_REORDERED,
    DUPLICATE,
    FINAL_TEXT,
    LOOKUP,
    POLICY_TEXT,
    USER_MESSAGE,
    Harness,
    cost_sample,
    expected,
    expected_cost,
    instrumented_factory,
    make_policy,
    observed,
)
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatResult
from langchain_core.tools import BaseTool, tool
from langgraph.prebuilt import ToolNode, create_react_agent
from openinference.instrumentation.langchain import LangChainInstrumentor

from otel_agenteval import Policy

# create_react_agent is the agent the shapes were captured with; its successor lives in `langchain`.
pytestmark = pytest.mark.filterwarnings("ignore:create_react_agent has been moved")
MODEL = "fake-lc-model"
AGENT = "support_agent"
UNNAMED = "unknown"  # what tool and violation series carry: see test_scenario
Step = tuple[str, dict[str, str]]


@pytest.fixture
def make() -> Iterator[Callable[[Policy], Harness]]:
    """Harnesses whose provider the OpenInference instrumentor exports to; uninstrumented after."""
    yield from instrumented_factory(LangChainInstrumentor())


def usage_of(turn: int) -> tuple[int, int]:
    return 50 + turn, 9 + 2 * turn


class FakeToolModel(FakeMessagesListChatModel):
    """Canned AI messages; ``model_name`` is what LangChain reports as ``ls_model_name``."""

    model_name: str = MODEL
    on_turn: Any = None

    def bind_tools(self, tools: Any, **kwargs: Any) -> FakeToolModel:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        if self.on_turn is not None:
            self.on_turn(self.i)
        return super()._generate(messages, *args, **kwargs)


def script(turns: Sequence[Sequence[Step]], on_turn: Callable[[int], None] | None = None) -> FakeToolModel:
    def message(n: int, steps: Sequence[Step]) -> AIMessage:
        inp, out = usage_of(n)
        return AIMessage(content="" if steps else FINAL_TEXT,
                         tool_calls=[{"name": name, "args": args, "id": f"call_{n}_{i}", "type": "tool_call"}
                                     for i, (name, args) in enumerate(steps)],
                         usage_metadata={"input_tokens": inp, "output_tokens": out, "total_tokens": inp + out},
                         response_metadata={"model_name": MODEL})
    responses: list[BaseMessage] = [message(n, steps) for n, steps in enumerate([*turns, []])]
    return FakeToolModel(responses=responses, on_turn=on_turn)


def tools() -> list[BaseTool]:
    @tool
    def lookup_order(order_id: str) -> dict[str, Any]:
        """Look up an order."""
        return {"order_id": order_id, "status": "delivered", "items": ["vase"]}

    @tool
    def get_policy(topic: str) -> str:
        """Get a policy text."""
        return "Damaged deliveries are refundable within 30 days."

    @tool
    def create_claim(order_id: str, reason: str) -> dict[str, str]:
        """Create a claim."""
        if reason == "damaged":
            raise ValueError("reason must be one of: damaged_in_transit, missing_item")
        return {"claim_id": "CLM-5531", "order_id": order_id, "reason": reason}

    return [lookup_order, get_policy, create_claim]


def run(model: FakeToolModel, session: str) -> str:
    graph = create_react_agent(model, ToolNode(tools(), handle_tool_errors=True),
                               prompt="You are a support agent for order claims.", name=AGENT)
    out = graph.invoke({"messages": [("user", USER_MESSAGE)]},
                       config={"configurable": {"thread_id": session}, "metadata": {"session_id": session}})
    return str(out["messages"][-1].content)


def tokens_for(turns: int) -> tuple[int, int]:
    return sum(usage_of(n)[0] for n in range(turns)), sum(usage_of(n)[1] for n in range(turns))


# One-argument tools get their bare value as input.value ('88120', not JSON): read as {"input": …}.
BARE = [{"input": "88120"}, {"input": "damaged_delivery"}]


def test_scenario(make: Callable[[Policy], Harness]) -> None:
    h = make(make_policy(MODEL))
    assert run(script([[LOOKUP, POLICY_TEXT], [CLAIM_BAD], [CLAIM_OK]]), "conv-1") == FINAL_TEXT

    # LangGraph runs the two parallel calls on a thread pool: which starts first is not defined.
    t = h.only_trajectory()
    assert sorted(s.tool for s in t.steps[:2]) == ["get_policy", "lookup_order"]
    t.steps[:2] = sorted(t.steps[:2], key=lambda s: s.tool != "lookup_order")

    # The trajectory is named from the root span at its end; tool calls counted before that carry
    # agent_name="unknown" (OpenInference sets nothing on a LangChain span until it ends).
    tokens = tokens_for(4)
    assert observed(h, AGENT, tool_agent=UNNAMED) == expected(AGENT, tokens,
                                                               arguments=[*BARE, CLAIM_BAD[1], CLAIM_OK[1]])
    assert [s.error_type for s in t.steps] == [None, None, "ValueError", None]
    assert [s.call_id for s in t.steps] == [None] * 4
    assert t.conversation_id == "conv-1"
    assert t.cost_usd == pytest.approx(expected_cost(*tokens)) and t.cost_usd > 0
    assert cost_sample(h, AGENT) == pytest.approx(expected_cost(*tokens))


def test_identical_write_in_other_key_order_is_a_duplicate(make: Callable[[Policy], Harness]) -> None:
    h = make(make_policy(MODEL))
    run(script([[step] for step in DUPLICATE]), "conv-2")

    t = h.only_trajectory()
    assert [s.raw_arguments for s in t.steps[1:]] == ['{"order_id": "88120", "reason": "damaged_in_transit"}',
                                                      '{"reason": "damaged_in_transit", "order_id": "88120"}']
    dup = ("duplicate_write", "create_claim", UNNAMED, "critical")
    assert observed(h, AGENT, tool_agent=UNNAMED) == expected(
        AGENT, tokens_for(4), tools=DUPLICATE, ok=[True] * 3, arguments=[BARE[0], CLAIM_OK[1], CLAIM_OK[1]],
        violations=[dup])
    assert h.violations[0].conversation_id == "conv-2"
    assert h.duplicates(UNNAMED) == 1.0


def test_duplicate_across_runs_of_one_session(make: Callable[[Policy], Harness]) -> None:
    h = make(make_policy(MODEL))
    run(script([[CLAIM_OK]]), "conv-3")
    run(script([[CLAIM_OK_REORDERED]]), "conv-3")

    run1, run2 = h.trajectories
    assert [(t.agent_name, t.conversation_id, t.outcome) for t in h.trajectories] == [
        (AGENT, "conv-3", "success"), (AGENT, "conv-3", "success")]
    assert [(v.rule, v.trace_id, v.details["first_trace_id"]) for v in h.violations] == [
        ("duplicate_write", run2.trace_hex, run1.trace_hex)]


def test_violation_is_counted_before_the_root_span_ends(make: Callable[[Policy], Harness]) -> None:
    h = make(make_policy(MODEL))
    seen: dict[int, tuple[float | None, int]] = {}
    run(script([[step] for step in DUPLICATE], lambda n: seen.update({n: (h.duplicates(UNNAMED),
                                                                          len(h.trajectories))})), "conv-4")
    assert seen == {0: (None, 0), 1: (None, 0), 2: (None, 0), 3: (1.0, 0)}
    assert len(h.trajectories) == 1

