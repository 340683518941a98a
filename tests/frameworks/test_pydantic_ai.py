"""pydantic-ai 2.68 with a scripted ``FunctionModel``: its own instrumentation, no configuration.

Shapes exercised: ``invoke_agent`` root with ``gen_ai.aggregated_usage.*`` (must not be counted
on top of the chat spans), flat ``chat`` and ``execute_tool`` children, ``ModelRetry`` as an
ERROR tool span, the legacy v2 names (``agent run`` / ``running tool``) and content off.
"""

from __future__ import annotations

import json
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
    SCENARIO,
    USER_MESSAGE,
    Harness,
    cost_sample,
    expected,
    expected_cost,
    harness_factory,
    make_policy,
    observed,
)
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.usage import RequestUsage

from otel_agenteval import Policy

MODEL = "fake-support-model"
AGENT = "support_agent"
Turn = Sequence[tuple[str, dict[str, str]]]


@pytest.fixture
def make() -> Iterator[Callable[[Policy], Harness]]:
    yield from harness_factory()


def usage_of(turn: int) -> tuple[int, int]:
    return 100 + 10 * turn, 5 + turn


class ScriptedModel:
    """Answers turn ``n`` with ``turns[n]``'s tool calls (the last turn: the final text)."""

    def __init__(self, turns: Sequence[Turn], on_turn: Callable[[int], None] | None = None) -> None:
        self.turns = list(turns)
        self.on_turn = on_turn
        self.calls = 0

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        n = self.calls  # turns answered so far in this run (the history may hold earlier runs')
        if self.on_turn is not None:
            self.on_turn(n)
        self.calls += 1
        inp, out = usage_of(n)
        usage = RequestUsage(input_tokens=inp, output_tokens=out)
        if n >= len(self.turns):
            return ModelResponse(parts=[TextPart(FINAL_TEXT)], usage=usage, model_name=MODEL)
        parts: list[Any] = [
            ToolCallPart(name, args if i % 2 == 0 else json.dumps(args), tool_call_id=f"call_{n}_{i}")
            for i, (name, args) in enumerate(self.turns[n])  # dict args and JSON-string args, as models give
        ]
        return ModelResponse(parts=parts, usage=usage, model_name=MODEL)


def support_agent(h: Harness, model: ScriptedModel, settings: InstrumentationSettings | None = None) -> Agent:
    agent = Agent(FunctionModel(model, model_name=MODEL), name=AGENT,
                  instructions="You are a support agent for order claims.")
    agent.instrument = settings or InstrumentationSettings(tracer_provider=h.provider)

    @agent.tool_plain
    def lookup_order(order_id: str) -> dict[str, Any]:
        """Look up an order."""
        return {"order_id": order_id, "status": "delivered", "items": ["vase"]}

    @agent.tool_plain
    def get_policy(topic: str) -> str:
        """Get a policy text."""
        return "Damaged deliveries are refundable within 30 days."

    @agent.tool_plain
    def create_claim(order_id: str, reason: str) -> dict[str, str]:
        """Create a claim."""
        if reason == "damaged":
            raise ModelRetry("reason must be one of: damaged_in_transit, missing_item")
        return {"claim_id": "CLM-5531", "order_id": order_id, "reason": reason}

    return agent


def tokens_for(turns: int, runs: int = 1) -> tuple[int, int]:
    return (runs * sum(usage_of(n)[0] for n in range(turns)), runs * sum(usage_of(n)[1] for n in range(turns)))


SCENARIO_TURNS: list[Turn] = [[LOOKUP, POLICY_TEXT], [CLAIM_BAD], [CLAIM_OK]]


@pytest.mark.filterwarnings("ignore:Instrumentation format versions 2, 3, and 4 are deprecated")
@pytest.mark.parametrize("version", [5, 6, 2])  # default, newest, legacy names (agent run / running tool)
def test_scenario(make: Callable[[Policy], Harness], version: int) -> None:
    h = make(make_policy(MODEL))
    settings = InstrumentationSettings(tracer_provider=h.provider, version=version)  # type: ignore[arg-type]
    result = support_agent(h, ScriptedModel(SCENARIO_TURNS), settings).run_sync(USER_MESSAGE,
                                                                                 conversation_id="conv-1")
    assert result.output == FINAL_TEXT
    tokens = tokens_for(4)
    assert (result.usage.input_tokens, result.usage.output_tokens) == tokens  # what the framework itself counted

    # The agent span repeats the totals as gen_ai.aggregated_usage.*: counted once, not twice.
    assert observed(h, AGENT) == expected(AGENT, tokens)
    t = h.only_trajectory()
    assert [s.call_id for s in t.steps] == ["call_0_0", "call_0_1", "call_1_0", "call_2_0"]
    assert [s.error_type for s in t.steps] == [None, None, "ToolRetryError", None]
    assert t.conversation_id == "conv-1"
    assert t.cost_usd == pytest.approx(expected_cost(*tokens))
    assert cost_sample(h, AGENT) == pytest.approx(expected_cost(*tokens))
    assert t.cost_usd > 0


def test_identical_write_in_other_key_order_is_a_duplicate(make: Callable[[Policy], Harness]) -> None:
    h = make(make_policy(MODEL))
    turns: list[Turn] = [[step] for step in DUPLICATE]
    support_agent(h, ScriptedModel(turns)).run_sync(USER_MESSAGE, conversation_id="conv-2")

    t = h.only_trajectory()
    first, second = t.steps[1], t.steps[2]
    # The spans really carry the keys in another order; parsed, they are the same call.
    assert [list(json.loads(s.raw_arguments)) for s in (first, second)] == [["order_id", "reason"],
                                                                            ["reason", "order_id"]]
    dup = ("duplicate_write", "create_claim", AGENT, "critical")
    assert observed(h, AGENT) == expected(AGENT, tokens_for(4), tools=DUPLICATE, ok=[True] * 3,
                                          arguments=[LOOKUP[1], CLAIM_OK[1], CLAIM_OK[1]], violations=[dup])
    v = h.violations[0]
    assert (v.span_id, v.trace_id, v.conversation_id) == (format(second.span_id, "016x"), t.trace_hex, "conv-2")
    assert v.details["first_trace_id"] == t.trace_hex
    assert h.duplicates(AGENT) == 1.0


def test_duplicate_across_runs_of_one_conversation(make: Callable[[Policy], Harness]) -> None:
    """The second run of a conversation files the same claim again: caught against the first run."""
    h = make(make_policy(MODEL))
    first = support_agent(h, ScriptedModel([[CLAIM_OK]])).run_sync(USER_MESSAGE, conversation_id="conv-3")
    support_agent(h, ScriptedModel([[CLAIM_OK_REORDERED]])).run_sync(
        "Did that go through?", conversation_id="conv-3", message_history=first.all_messages())

    assert [(t.outcome, [s.tool for s in t.steps]) for t in h.trajectories] == [
        ("success", ["create_claim"]), ("success", ["create_claim"])]
    run1, run2 = h.trajectories
    assert run1.trace_id != run2.trace_id
    assert [(v.rule, v.trace_id, v.details["first_trace_id"]) for v in h.violations] == [
        ("duplicate_write", run2.trace_hex, run1.trace_hex)]
    assert h.duplicates(AGENT) == 1.0


def test_violation_is_counted_before_the_agent_span_ends(make: Callable[[Policy], Harness]) -> None:
    """The model's next turn runs after the duplicate tool span ended, inside the open agent span."""
    h = make(make_policy(MODEL))
    seen: dict[int, tuple[float | None, int, int]] = {}

    def at_turn(n: int) -> None:
        seen[n] = (h.duplicates(AGENT), len(h.violations), len(h.trajectories))

    support_agent(h, ScriptedModel([[step] for step in DUPLICATE], at_turn)).run_sync(USER_MESSAGE)
    # Before turn 3 (after the second create_claim): counted, while no trajectory has finished yet.
    assert seen == {0: (None, 0, 0), 1: (None, 0, 0), 2: (None, 0, 0), 3: (1.0, 1, 0)}
    assert len(h.trajectories) == 1


def test_content_off_reads_no_arguments_and_raises_no_false_duplicate(make: Callable[[Policy], Harness]) -> None:
    """``include_content=False``: tool spans carry no arguments; two writes cannot be told apart."""
    h = make(make_policy(MODEL))
    settings = InstrumentationSettings(tracer_provider=h.provider, include_content=False)
    support_agent(h, ScriptedModel(SCENARIO_TURNS), settings).run_sync(USER_MESSAGE, conversation_id="conv-4")

    assert observed(h, AGENT) == expected(AGENT, tokens_for(4), arguments=[{}] * len(SCENARIO))
    assert [s.raw_arguments for s in h.only_trajectory().steps] == [None] * len(SCENARIO)
