"""The guard decides on everything the run has ended before the call, however the processor checks:
inline or on its own thread (``background=True``), from plain code or asyncio tasks. A write's
span has just ended when the identical call asks, in the same run or in the conversation's next
turn: each of 200 immediate duplicates is blocked, in every setting.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry

from otel_agenteval import Policy, TrajectoryProcessor

POLICY = "tools: {create_claim: {write: true}}\n"
CLAIM = {"order_id": "88120", "reason": "damaged_in_transit"}
DUPLICATES = 200


@pytest.fixture(params=[False, True], ids=["inline", "background"])
def tracer_and_guard(request: pytest.FixtureRequest) -> Iterator[tuple[trace.Tracer, Any, TrajectoryProcessor]]:
    processor = TrajectoryProcessor(Policy.from_yaml(POLICY, "<test>"), registry=CollectorRegistry(),
                                    background=request.param)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    yield provider.get_tracer("app"), processor.guard(tracer_provider=provider), processor
    provider.shutdown()


def _claim(tracer: trace.Tracer, guard: Any) -> bool:
    """One create_claim as a framework hook makes it: the guard asked inside the tool span, which
    ends (the write done, or not run) right after."""
    with tracer.start_as_current_span("execute_tool create_claim", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "create_claim",
            "gen_ai.tool.call.arguments": json.dumps(CLAIM)}):
        return bool(guard.check("create_claim", CLAIM).allowed)


def _agent(tracer: trace.Tracer, conversation: str | None = None) -> Any:
    attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}
    if conversation:
        attrs["gen_ai.conversation.id"] = conversation
    return tracer.start_as_current_span("invoke_agent support", attributes=attrs)


def _blocked(processor: TrajectoryProcessor) -> float:
    value = processor.metrics.registry.get_sample_value(
        "agenteval_blocked_actions_total", {"service_name": "unknown_service:python", "agent_name": "support",
                                            "rule": "duplicate_write", "tool": "create_claim"})
    return value or 0.0


def test_every_immediate_duplicate_in_the_run_is_blocked(
        tracer_and_guard: tuple[trace.Tracer, Any, TrajectoryProcessor]) -> None:
    tracer, guard, processor = tracer_and_guard
    with _agent(tracer):
        allowed = [_claim(tracer, guard) for _ in range(1 + DUPLICATES)]
    assert allowed == [True] + [False] * DUPLICATES
    assert _blocked(processor) == DUPLICATES


def test_every_immediate_duplicate_in_the_next_turn_is_blocked(
        tracer_and_guard: tuple[trace.Tracer, Any, TrajectoryProcessor]) -> None:
    tracer, guard, processor = tracer_and_guard
    allowed = []
    for _ in range(1 + DUPLICATES):  # each turn a run of its own; the last one's end may still be queued
        with _agent(tracer, "conv-1"):
            allowed.append(_claim(tracer, guard))
    assert allowed == [True] + [False] * DUPLICATES
    assert _blocked(processor) == DUPLICATES


def test_every_immediate_duplicate_is_blocked_from_asyncio(
        tracer_and_guard: tuple[trace.Tracer, Any, TrajectoryProcessor]) -> None:
    tracer, guard, processor = tracer_and_guard

    async def tool() -> bool:
        await asyncio.sleep(0)  # the event loop runs in between, as a framework's tool call awaits
        return _claim(tracer, guard)

    async def turn() -> bool:
        with _agent(tracer, "conv-1"):
            return await tool()

    async def conversation() -> list[bool]:
        return [await turn() for _ in range(1 + DUPLICATES)]

    assert asyncio.run(conversation()) == [True] + [False] * DUPLICATES
    assert _blocked(processor) == DUPLICATES


def test_a_stuck_consumer_fails_the_call_the_policy_s_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ends before the call cannot be applied (a callback on the checks' thread hangs): the guard
    does not decide blind; a write fails closed as on any guard error, and the error is counted."""
    from otel_agenteval.engine import handoff

    monkeypatch.setattr(handoff, "SETTLE_S", 0.05)
    gate = threading.Event()
    processor = TrajectoryProcessor(Policy.from_yaml(POLICY, "<test>"), registry=CollectorRegistry(),
                                    background=True, on_trajectory=[lambda t: gate.wait(5)])
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer, guard = provider.get_tracer("app"), processor.guard(tracer_provider=provider)
    try:
        with _agent(tracer, "conv-1"):
            assert _claim(tracer, guard)  # its run's end: the callback holds the consumer
        with _agent(tracer, "conv-1"), tracer.start_as_current_span("execute_tool create_claim"):
            decision = guard.check("create_claim", CLAIM)
    finally:
        gate.set()
        provider.shutdown()
    assert (decision.allowed, decision.rule, decision.error) == (False, "guard_error", True)
    assert processor.metrics.registry.get_sample_value("agenteval_guard_errors_total", {"fail": "closed"}) == 1
