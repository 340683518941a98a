"""Spans for the durability tests: agent runs that each hold one duplicate write, made by the SDK."""

from __future__ import annotations

import json

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

DUPLICATE_POLICY = """\
version: 1
tools:
  create_claim: {write: true}
"""


def duplicate_run(tracer: Tracer, i: int, tools: int = 1) -> None:
    """One run: ``tools`` lookups, then the same claim written twice (one ``duplicate_write``)."""
    with tracer.start_as_current_span("invoke_agent support", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}):
        for j in range(tools):
            with tracer.start_as_current_span("execute_tool lookup_order", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order",
                    "gen_ai.tool.call.arguments": json.dumps({"order_id": f"{i}-{j}"})}):
                pass
        for _ in range(2):
            with tracer.start_as_current_span("execute_tool create_claim", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "create_claim",
                    "gen_ai.tool.call.arguments": json.dumps({"order_id": str(i), "reason": "damaged"})}):
                pass


def duplicate_spans(n_runs: int, start: int = 0) -> list:
    """Finished SDK spans of ``n_runs`` :func:`duplicate_run` runs."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "shop"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("t")
    for i in range(start, start + n_runs):
        duplicate_run(tracer, i)
    provider.shutdown()
    return list(memory.get_finished_spans())
