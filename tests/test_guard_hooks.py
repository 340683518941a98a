"""The guard's hooks end to end: ``@guarded`` (sync and async) and pydantic-ai's toolset wrapper
with a scripted model, on a real TracerProvider with the processor; the spans read back."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from guard_support import GUARD_POLICY
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from otel_agenteval import ActionBlocked, Policy, Trajectory, TrajectoryProcessor, Violation, record_confirmation
from otel_agenteval.guard.hooks.plain import guarded


class Rig:
    """A provider whose processors are the checker and an in-memory exporter."""

    def __init__(self, policy: str = GUARD_POLICY) -> None:
        self.registry = CollectorRegistry()
        self.violations: list[Violation] = []
        self.trajectories: list[Trajectory] = []
        self.processor = TrajectoryProcessor(Policy.from_yaml(policy), registry=self.registry,
                                             on_violation=[self.violations.append],
                                             on_trajectory=[self.trajectories.append])
        self.provider = TracerProvider(resource=Resource.create({"service.name": "shop"}))
        self.provider.add_span_processor(self.processor)
        self.exported = InMemorySpanExporter()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exported))
        self.tracer = self.provider.get_tracer("tests")
        self.guard = self.processor.guard(tracer_provider=self.provider)

    def agent(self, conv: str) -> Any:
        return self.tracer.start_as_current_span("invoke_agent support", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support", "gen_ai.conversation.id": conv})

    def blocked(self) -> dict[tuple[str, str], float]:
        return {(s.labels["rule"], s.labels["tool"]): s.value for m in self.registry.collect()
                if m.name == "agenteval_blocked_actions" for s in m.samples if s.name.endswith("_total")}

    def tool_spans(self) -> list[ReadableSpan]:
        return [s for s in self.exported.get_finished_spans() if s.name.startswith("execute_tool")]


@pytest.fixture
def rig() -> Iterator[Rig]:
    r = Rig()
    yield r
    r.provider.shutdown()


def test_guarded_decorator_sync(rig: Rig) -> None:
    ran: list[dict[str, Any]] = []

    @guarded("issue_refund", guard=rig.guard, tracer_provider=rig.provider)
    def issue_refund(order_id: str, amount: int = 25) -> dict[str, Any]:
        ran.append({"order_id": order_id, "amount": amount})
        return {"refund_id": "R-1"}

    with rig.agent("conv-d"):
        first = issue_refund("88120")  # nobody confirmed anything
        record_confirmation("issue_refund", {"amount": 25}, tracer=rig.tracer)
        second = issue_refund("88120")
        third = issue_refund(order_id="88120", amount=25)  # the same call again
    assert first.startswith("Not done: issue_refund was stopped by policy rule write_without_confirmation")
    assert "Ask the user to confirm" in first
    assert second == {"refund_id": "R-1"}
    assert "duplicate_write" in third
    assert ran == [{"order_id": "88120", "amount": 25}]
    assert rig.blocked() == {("write_without_confirmation", "issue_refund"): 1, ("duplicate_write", "issue_refund"): 1}
    assert rig.violations == []
    [t] = rig.trajectories
    assert [(s.tool, s.ok, s.arguments) for s in t.steps] == [("issue_refund", True, {"order_id": "88120",
                                                                                       "amount": 25})]
    assert [(s.attributes.get("agenteval.guard.decision"), s.attributes.get("agenteval.blocked"))
            for s in rig.tool_spans()] == [("blocked", True), ("allowed", None), ("blocked", True)]


def test_guarded_decorator_async_and_raise(rig: Rig) -> None:
    @guarded("create_claim", guard=rig.guard, on_block="raise", tracer_provider=rig.provider)
    async def create_claim(order_id: str, reason: str) -> str:
        await asyncio.sleep(0)
        if reason == "boom":
            raise TimeoutError("claims service")
        return "CLM-1"

    async def main() -> list[Any]:
        out: list[Any] = []
        with rig.agent("conv-a"):
            out.append(await create_claim("1", "damaged"))
            with pytest.raises(ActionBlocked) as caught:
                await create_claim("1", "damaged")
            out.append(caught.value.decision.rule)
            with pytest.raises(TimeoutError):
                await create_claim("2", "boom")
            with pytest.raises(TimeoutError):  # a retry after a failed write: allowed (it fails again)
                await create_claim("2", "boom")
        return out

    assert asyncio.run(main()) == ["CLM-1", "duplicate_write"]
    assert rig.blocked() == {("duplicate_write", "create_claim"): 1}
    assert [v.rule for v in rig.violations] == ["write_retried_after_error"]
    [t] = rig.trajectories
    assert [s.ok for s in t.steps] == [True, False, False]


def test_pydantic_ai_toolset_wrapper(rig: Rig) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings

    from otel_agenteval.guard.hooks.pydantic_ai import GuardTools

    claim = {"order_id": "88120", "reason": "damaged_in_transit"}
    script: list[list[tuple[str, dict[str, Any]]]] = [
        [("lookup_order", {"order_id": "88120"})],
        [("create_claim", claim)],
        [("create_claim", claim)],  # the model forgot it already did that
        [("issue_refund", {"order_id": "88120", "amount": 25})],  # and nobody confirmed a refund
        [("delete_account", {"account": "A-1"})],  # not this agent's tool
    ]

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        n = sum(1 for m in messages if isinstance(m, ModelResponse))
        if n >= len(script):
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"c{n}") for name, args in script[n]])

    agent = Agent(FunctionModel(model, model_name="scripted"), name="support", capabilities=[GuardTools(rig.guard)])
    agent.instrument = InstrumentationSettings(tracer_provider=rig.provider)
    ran: list[str] = []

    @agent.tool_plain
    def lookup_order(order_id: str) -> str:
        ran.append("lookup_order")
        return "delivered"

    @agent.tool_plain
    def create_claim(order_id: str, reason: str) -> str:
        ran.append("create_claim")
        return "CLM-1"

    @agent.tool_plain
    def issue_refund(order_id: str, amount: int) -> str:
        ran.append("issue_refund")
        return "refunded"

    @agent.tool_plain
    def delete_account(account: str) -> str:
        ran.append("delete_account")
        return "deleted"

    result = agent.run_sync("my order arrived damaged", conversation_id="conv-p")
    returns = [p.content for m in result.all_messages() for p in getattr(m, "parts", ())
               if isinstance(p, ToolReturnPart)]
    assert result.output == "done"
    assert ran == ["lookup_order", "create_claim"]
    assert returns[:2] == ["delivered", "CLM-1"]
    assert [r.split(": ")[1] for r in returns[2:]] == [
        "create_claim was stopped by policy rule duplicate_write",
        "issue_refund was stopped by policy rule write_without_confirmation",
        "delete_account was stopped by policy rule scope_violation"]
    assert rig.blocked() == {("duplicate_write", "create_claim"): 1, ("write_without_confirmation", "issue_refund"): 1,
                             ("scope_violation", "delete_account"): 1}
    assert rig.violations == []
    [t] = rig.trajectories
    assert [s.tool for s in t.steps] == ["lookup_order", "create_claim"]
    assert [s.attributes.get("agenteval.blocked") for s in rig.tool_spans()] == [None, None, True, True, True]


def test_hooks_default_guard_is_the_first_processors() -> None:
    from otel_agenteval.guard.guard import default_guard

    assert isinstance(default_guard(), type(Rig().guard))


