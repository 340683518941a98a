"""opentelemetry-util-genai 1.3b0: the official GenAI ``TelemetryHandler`` driving an agent loop.

The handler makes the spans an instrumentation would (``invoke_agent``, ``chat``,
``execute_tool``); a canned model stands in for the LLM. Shapes exercised: tool arguments,
call id and agent name set only at END, ``error.type`` on failures with no exception event,
usage on the agent span as well as on each chat span, content gated by environment variable,
and parallel tool spans that overlap (turn 1) and end in the other order.

The content mode is read when the handler is built, so each test sets the environment with
``monkeypatch`` first and builds its own handler: nothing leaks between tests.
"""

from __future__ import annotations

import asyncio
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
from opentelemetry.util.genai.handler import TelemetryHandler
from opentelemetry.util.genai.types import InputMessage, OutputMessage, TextPart, ToolCallRequestPart

from otel_agenteval import Policy

MODEL = "fake-gpt-4o"
AGENT = "support_agent"
Call = tuple[str, str]  # tool name, raw JSON arguments as the model sends them
CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


@pytest.fixture
def make() -> Iterator[Callable[[Policy], Harness]]:
    yield from harness_factory()


@pytest.fixture
def content(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv(CONTENT_ENV, "SPAN_ONLY")


def usage_of(turn: int) -> tuple[int, int]:
    return 40 + 15 * turn, 12 + turn


def calls(*steps: tuple[str, dict[str, str]]) -> list[Call]:
    return [(name, json.dumps(args)) for name, args in steps]


async def lookup_order(order_id: str) -> dict[str, Any]:
    for _ in range(3):  # yields more than get_policy: the parallel calls end in the other order
        await asyncio.sleep(0)
    return {"order_id": order_id, "status": "delivered", "items": ["vase"]}


async def get_policy(topic: str) -> str:
    await asyncio.sleep(0)
    return "Damaged deliveries are refundable within 30 days."


async def create_claim(order_id: str, reason: str) -> dict[str, str]:
    if reason == "damaged":
        raise ValueError("reason must be one of: damaged_in_transit, missing_item")
    return {"claim_id": "CLM-5531", "order_id": order_id, "reason": reason}


TOOLS: dict[str, Callable[..., Any]] = {"lookup_order": lookup_order, "get_policy": get_policy,
                                        "create_claim": create_claim}


class SupportAgent:
    """A minimal agent loop instrumented the way util-genai asks instrumentations to do it."""

    def __init__(self, h: Harness, on_tool_end: Callable[[str], None] | None = None) -> None:
        self.handler = TelemetryHandler(tracer_provider=h.provider)
        self.on_tool_end = on_tool_end

    def run(self, turns: Sequence[Sequence[Call]], conversation_id: str) -> str:
        return asyncio.run(self._run(turns, conversation_id))

    async def _run(self, turns: Sequence[Sequence[Call]], conversation_id: str) -> str:
        handler = self.handler
        total_in = total_out = 0
        with handler.invoke_local_agent(agent_name=AGENT, request_model=MODEL,
                                        conversation_id=conversation_id) as agent:
            agent.input_messages = [InputMessage(role="user", parts=[TextPart(content=USER_MESSAGE)])]
            for n in range(len(turns) + 1):
                todo = turns[n] if n < len(turns) else []
                with handler.inference("openai", request_model=MODEL, conversation_id=conversation_id) as chat:
                    parts: list[Any] = [ToolCallRequestPart(arguments=json.loads(raw), name=name, id=f"call_{n}_{i}")
                                        for i, (name, raw) in enumerate(todo)] or [TextPart(content=FINAL_TEXT)]
                    chat.output_messages = [OutputMessage(role="assistant", parts=parts)]
                    chat.response_model_name = MODEL
                    chat.input_tokens, chat.output_tokens = usage_of(n)
                    total_in += chat.input_tokens
                    total_out += chat.output_tokens
                if not todo:
                    break
                # Parallel tool calls: each task runs in its own copy of the context.
                await asyncio.gather(*(self._tool(name, raw, f"call_{n}_{i}") for i, (name, raw) in enumerate(todo)))
            agent.output_messages = [OutputMessage(role="assistant", parts=[TextPart(content=FINAL_TEXT)])]
            agent.input_tokens, agent.output_tokens = total_in, total_out  # the run's totals, on the agent span too
        return FINAL_TEXT

    async def _tool(self, name: str, raw: str, call_id: str) -> None:
        handler = self.handler
        inv = handler.tool(name, tool_type="function", agent_name=AGENT)
        inv.tool_call_id = call_id
        if handler.should_capture_content():
            inv.arguments = raw
        try:
            result = await TOOLS[name](**json.loads(raw))
        except ValueError as exc:  # the tool failing, as create_claim does
            inv.fail(exc)
        else:
            if handler.should_capture_content():
                inv.tool_result = result
            inv.stop()
        if self.on_tool_end is not None:
            self.on_tool_end(name)


def tokens_for(turns: int) -> tuple[int, int]:
    return sum(usage_of(n)[0] for n in range(turns)), sum(usage_of(n)[1] for n in range(turns))


SCENARIO_TURNS = [calls(LOOKUP, POLICY_TEXT), calls(CLAIM_BAD), calls(CLAIM_OK)]


def test_scenario(make: Callable[[Policy], Harness], content: None) -> None:
    h = make(make_policy(MODEL))
    ended: list[str] = []
    assert SupportAgent(h, ended.append).run(SCENARIO_TURNS, "conv-1") == FINAL_TEXT
    assert ended[:2] == ["get_policy", "lookup_order"]  # the parallel pair ended in the other order

    # Steps in start order; usage counted from chat spans only, not again from the agent span.
    tokens = tokens_for(4)
    assert observed(h, AGENT) == expected(AGENT, tokens)
    t = h.only_trajectory()
    assert [s.call_id for s in t.steps] == ["call_0_0", "call_0_1", "call_1_0", "call_2_0"]
    assert [s.error_type for s in t.steps] == [None, None, "ValueError", None]
    assert [s.conversation_id for s in t.steps] == [None] * 4  # tool spans carry none; the chat spans do
    assert t.conversation_id == "conv-1"
    assert t.steps[0].end_ns > t.steps[1].start_ns  # really overlapping
    assert t.cost_usd == pytest.approx(expected_cost(*tokens)) and t.cost_usd > 0
    assert cost_sample(h, AGENT) == pytest.approx(expected_cost(*tokens))


def test_identical_write_in_other_key_order_is_a_duplicate(make: Callable[[Policy], Harness], content: None) -> None:
    h = make(make_policy(MODEL))
    SupportAgent(h).run([calls(step) for step in DUPLICATE], "conv-2")

    t = h.only_trajectory()
    assert [s.raw_arguments for s in t.steps[1:]] == [json.dumps(CLAIM_OK[1]), json.dumps(CLAIM_OK_REORDERED[1])]
    dup = ("duplicate_write", "create_claim", AGENT, "critical")
    assert observed(h, AGENT) == expected(AGENT, tokens_for(4), tools=DUPLICATE, ok=[True] * 3,
                                          arguments=[LOOKUP[1], CLAIM_OK[1], CLAIM_OK[1]], violations=[dup])
    v = h.violations[0]
    assert (v.span_id, v.conversation_id) == (format(t.steps[2].span_id, "016x"), "conv-2")
    assert h.duplicates(AGENT) == 1.0


def test_duplicate_across_runs_of_one_conversation(make: Callable[[Policy], Harness], content: None) -> None:
    h = make(make_policy(MODEL))
    agent = SupportAgent(h)
    agent.run([calls(CLAIM_OK)], "conv-3")
    agent.run([calls(CLAIM_OK_REORDERED)], "conv-3")
    agent.run([calls(CLAIM_OK)], "conv-other")  # another conversation: not a duplicate

    run1, run2, _ = h.trajectories
    assert [(t.conversation_id, t.outcome) for t in h.trajectories] == [
        ("conv-3", "success"), ("conv-3", "success"), ("conv-other", "success")]
    assert [(v.rule, v.trace_id, v.details["first_trace_id"]) for v in h.violations] == [
        ("duplicate_write", run2.trace_hex, run1.trace_hex)]
    assert h.duplicates(AGENT) == 1.0
    assert h.sample("agenteval_trajectories_total", AGENT, outcome="success") == 3.0


def test_violation_is_counted_before_the_agent_span_ends(make: Callable[[Policy], Harness], content: None) -> None:
    h = make(make_policy(MODEL))
    seen: list[tuple[str, float | None, int]] = []
    SupportAgent(h, lambda tool: seen.append((tool, h.duplicates(AGENT), len(h.trajectories)))).run(
        [calls(step) for step in DUPLICATE], "conv-4")
    # Right after the second create_claim span ended, with the agent span still open.
    assert seen == [("lookup_order", None, 0), ("create_claim", None, 0), ("create_claim", 1.0, 0)]
    assert len(h.trajectories) == 1


@pytest.mark.parametrize("mode", [None, "true", "NO_CONTENT"])  # "true" is rejected by util-genai: no content
def test_content_off(make: Callable[[Policy], Harness], monkeypatch: pytest.MonkeyPatch, mode: str | None) -> None:
    """No arguments on tool spans: same sequence and tokens, and no write flagged as a retry."""
    if mode is None:
        monkeypatch.delenv(CONTENT_ENV, raising=False)
    else:
        monkeypatch.setenv(CONTENT_ENV, mode)
    h = make(make_policy(MODEL))
    SupportAgent(h).run(SCENARIO_TURNS, "conv-5")

    assert observed(h, AGENT) == expected(AGENT, tokens_for(4), arguments=[{}] * len(SCENARIO))
    assert [s.raw_arguments for s in h.only_trajectory().steps] == [None] * len(SCENARIO)
