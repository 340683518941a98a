"""Real SDK spans for the scoring tests: one agent run per call, shaped like the GenAI semconv."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode
from prometheus_client import CollectorRegistry

from otel_agenteval import Policy, Trajectory, TrajectoryProcessor, Violation

SUPPORT_POLICY = Policy.from_dict({
    "tools": {"create_claim": {"write": True}, "issue_refund": {"write": True}},
    "pricing": {"gpt-4o": {"input_per_mtok": 2.5, "output_per_mtok": 10.0}},
})

# The worked example: lookup, an unneeded search, a wrong-topic policy call, the right one,
# and a claim created twice.
WORKED_RUN: list[tuple[str, dict[str, Any]]] = [
    ("lookup_order", {"order_id": "88120"}),
    ("search_orders", {"query": "88120"}),
    ("get_policy", {"topic": "returns"}),
    ("get_policy", {"topic": "damaged_delivery"}),
    ("create_claim", {"order_id": "88120", "reason": "damaged"}),
    ("create_claim", {"order_id": "88120", "reason": "damaged"}),
]

WORKED_CASES = """
cases:
  - id: refund-damaged
    set: regression
    reference:
      order: in_order
      required:
        - {tool: lookup_order, args: {order_id: "88120"}}
        - {tool: get_policy, args: {topic: damaged_delivery}}
        - {tool: create_claim, args: {order_id: "88120", reason: damaged}}
      allowed_extras: []
"""

Call = tuple  # (tool, args) or (tool, args, ok)


class Runner:
    """A tracer provider with an exporter (for files) and optionally the processor (in memory)."""

    def __init__(self, policy: Policy = SUPPORT_POLICY, *, processor: bool = True) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider(resource=Resource.create({"service.name": "support-svc"}))
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.trajectories: list[Trajectory] = []
        self.violations: list[Violation] = []
        if processor:
            self.processor = TrajectoryProcessor(policy, registry=CollectorRegistry(),
                                                 on_violation=[self.violations.append],
                                                 on_trajectory=[self.trajectories.append])
            self.provider.add_span_processor(self.processor)
        self.tracer = self.provider.get_tracer("scoring-tests")

    def run(self, calls: Sequence[Call], *, case: str | None = None, trial: int | None = None,
            input_tokens: int = 1000, output_tokens: int = 200, attr: str = "agenteval.case.id") -> None:
        attrs: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}
        if case is not None:
            attrs[attr] = case
        if trial is not None:
            attrs["agenteval.trial"] = trial
        with self.tracer.start_as_current_span("invoke_agent support", attributes=attrs):
            with self.tracer.start_as_current_span("chat gpt-4o", attributes={
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.input_tokens": input_tokens, "gen_ai.usage.output_tokens": output_tokens,
            }):
                pass
            for call in calls:
                tool, args = call[0], call[1]
                ok = call[2] if len(call) > 2 else True
                with self.tracer.start_as_current_span(f"execute_tool {tool}", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                    "gen_ai.tool.call.arguments": json.dumps(args),
                }) as span:
                    if not ok:
                        span.set_status(Status(StatusCode.ERROR, "tool failed"))

    @property
    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())


def trajectory(calls: Sequence[Call], policy: Policy = SUPPORT_POLICY, **kw: Any) -> tuple[Trajectory, list[Violation]]:
    """One run through the real processor: its trajectory and violations."""
    r = Runner(policy)
    r.run(calls, **kw)
    assert len(r.trajectories) == 1
    return r.trajectories[0], r.violations
