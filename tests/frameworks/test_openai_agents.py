"""OpenAI Agents SDK 0.24 + OpenInference's instrumentor 2.6, with canned model responses.

The real ``OpenAIResponsesModel`` runs (so the SDK's own response spans are made); only its
``_fetch_response`` is replaced, and the client points at a closed port it never calls.
Shapes exercised: a workflow AGENT root with no name over the real ``support_agent`` AGENT span
(whose ``agent.name`` arrives only at end), per-turn CHAIN spans, LLM spans with
``llm.token_count.*``, TOOL spans with ``input.value`` and no call id, errors as status only.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from agents import Agent, FunctionTool, RunConfig, Runner, function_tool
from agents.models.openai_responses import OpenAIResponsesModel
from fw_harness import (
    CLAIM_BAD,
    CLAIM_OK,
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
from openai import AsyncOpenAI
from openai.types.responses import (
    Response,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseUsage,
)
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails
from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

from otel_agenteval import Policy

MODEL = "fake-gpt"
AGENT = "support_agent"
Call = tuple[str, str]  # tool name, raw JSON arguments as the model sends them


@pytest.fixture
def make() -> Iterator[Callable[[Policy], Harness]]:
    """Harnesses whose provider the OpenInference instrumentor exports to; uninstrumented after."""
    yield from instrumented_factory(OpenAIAgentsInstrumentor())


def usage_of(turn: int) -> tuple[int, int]:
    return 50 + 10 * turn, 7 * turn + 3


def calls(*steps: tuple[str, dict[str, str]]) -> list[Call]:
    return [(name, json.dumps(args)) for name, args in steps]


class CannedModel(OpenAIResponsesModel):
    """The real Responses model with the HTTP call replaced by canned ``Response`` objects."""

    def __init__(self, turns: Sequence[Sequence[Call]], on_turn: Callable[[int], None] | None = None) -> None:
        super().__init__(model=MODEL, openai_client=AsyncOpenAI(api_key="sk-offline", base_url="http://127.0.0.1:9/v1"))
        self.turns = list(turns)
        self.on_turn = on_turn
        self.n = 0

    async def _fetch_response(self, *args: Any, **kwargs: Any) -> Response:  # type: ignore[override]
        assert not kwargs.get("stream")
        n = self.n
        self.n += 1
        if self.on_turn is not None:
            self.on_turn(n)
        output: list[Any]
        if n < len(self.turns):
            output = [ResponseFunctionToolCall(id=f"fc_{n}_{i}", call_id=f"call_{n}_{i}", type="function_call",
                                               name=name, arguments=raw, status="completed")
                      for i, (name, raw) in enumerate(self.turns[n])]
        else:
            output = [ResponseOutputMessage(id="msg_final", type="message", role="assistant", status="completed",
                                            content=[ResponseOutputText(text=FINAL_TEXT, type="output_text",
                                                                        annotations=[])])]
        inp, out = usage_of(n)
        return Response(id=f"resp_{n}", created_at=time.time(), model=MODEL, object="response", output=output,
                        parallel_tool_calls=True, tool_choice="auto", tools=[], status="completed",
                        usage=ResponseUsage(input_tokens=inp, output_tokens=out, total_tokens=inp + out,
                                            input_tokens_details=InputTokensDetails(cached_tokens=0,
                                                                                    cache_write_tokens=0),
                                            output_tokens_details=OutputTokensDetails(reasoning_tokens=0)))


def tools(custom_error: bool = False) -> list[FunctionTool]:
    def lookup_order(order_id: str) -> dict[str, Any]:
        """Look up an order."""
        return {"order_id": order_id, "status": "delivered", "items": ["vase"]}

    def get_policy(topic: str) -> str:
        """Get a policy text."""
        return "Damaged deliveries are refundable within 30 days."

    def create_claim(order_id: str, reason: str) -> dict[str, str]:
        """Create a claim."""
        if reason == "damaged":
            raise ValueError("reason must be one of: damaged_in_transit, missing_item")
        return {"claim_id": "CLM-5531", "order_id": order_id, "reason": reason}

    claim = (function_tool(create_claim, failure_error_function=lambda ctx, e: f"ERROR {type(e).__name__}: {e}")
             if custom_error else function_tool(create_claim))
    return [function_tool(lookup_order), function_tool(get_policy), claim]


def run(model: CannedModel, custom_error: bool = False) -> str:
    agent = Agent(name=AGENT, instructions="You are a support agent for order claims.", model=model,
                  tools=list(tools(custom_error)))
    result = asyncio.run(Runner.run(agent, USER_MESSAGE,
                                    run_config=RunConfig(workflow_name="support_workflow", group_id="conv-1")))
    return str(result.final_output)


def tokens_for(turns: int) -> tuple[int, int]:
    return sum(usage_of(n)[0] for n in range(turns)), sum(usage_of(n)[1] for n in range(turns))


@pytest.mark.parametrize("custom_error", [False, True], ids=["default-error-fn", "custom-error-fn"])
def test_scenario(make: Callable[[Policy], Harness], custom_error: bool) -> None:
    h = make(make_policy(MODEL))
    turns = [calls(LOOKUP, POLICY_TEXT), calls(CLAIM_BAD), calls(CLAIM_OK)]
    assert run(CannedModel(turns), custom_error) == FINAL_TEXT

    # One trajectory (the nameless workflow root is not a second run), named from the nested agent.
    tokens = tokens_for(4)
    assert observed(h, AGENT) == expected(AGENT, tokens)
    t = h.only_trajectory()
    assert [s.call_id for s in t.steps] == [None] * 4  # OpenInference exports no tool call id
    assert [s.error_type for s in t.steps] == [None, None, "error", None]  # status alone: no type to read
    assert t.cost_usd == pytest.approx(expected_cost(*tokens)) and t.cost_usd > 0
    assert cost_sample(h, AGENT) == pytest.approx(expected_cost(*tokens))
    spans = h.processor.stats()["spans"]  # workflow root, task and 4 turns: walked through, not agents
    assert {k: spans[k] for k in ("tool", "llm", "agent", "other")} == {"tool": 4, "llm": 4, "agent": 1, "other": 6}


def test_identical_write_in_other_key_order_is_a_duplicate(make: Callable[[Policy], Harness]) -> None:
    h = make(make_policy(MODEL))
    assert run(CannedModel([calls(step) for step in DUPLICATE])) == FINAL_TEXT

    t = h.only_trajectory()
    assert [s.raw_arguments for s in t.steps[1:]] == [json.dumps(CLAIM_OK[1]), json.dumps(DUPLICATE[2][1])]
    dup = ("duplicate_write", "create_claim", AGENT, "critical")
    assert observed(h, AGENT) == expected(AGENT, tokens_for(4), tools=DUPLICATE, ok=[True] * 3,
                                          arguments=[LOOKUP[1], CLAIM_OK[1], CLAIM_OK[1]], violations=[dup])
    assert h.violations[0].span_id == format(t.steps[2].span_id, "016x")
    assert h.duplicates(AGENT) == 1.0


def test_violation_is_counted_before_the_agent_span_ends(make: Callable[[Policy], Harness]) -> None:
    """Each model turn runs inside the open agent span, after the previous turn's tool spans ended."""
    h = make(make_policy(MODEL))
    seen: dict[int, tuple[float | None, float | None, int]] = {}

    def at_turn(n: int) -> None:
        ok_claims = h.sample("agenteval_tool_calls_total", AGENT, tool="create_claim", status="ok")
        seen[n] = (ok_claims, h.duplicates(AGENT), len(h.trajectories))

    run(CannedModel([calls(step) for step in DUPLICATE], at_turn))
    # Tool calls and the violation are labelled with the agent before its span (and name) ends.
    assert seen == {0: (None, None, 0), 1: (None, None, 0), 2: (1.0, None, 0), 3: (2.0, 1.0, 0)}
    assert len(h.trajectories) == 1
