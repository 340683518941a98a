"""No silent blind spots: ``agenteval_unchecked_calls_total`` and its one log line per (service, tool)."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import SERVICE, Harness
from opentelemetry import trace
from structlog.testing import CapturingLogger, capture_logs

from otel_agenteval.metrics import blindspots
from otel_agenteval.metrics.blindspots import capture_setting, checked_tools
from otel_agenteval.policy.policy import Policy

POLICY = """
tools:
  create_claim: {write: true}
  delete_account: {destructive: true}
  issue_refund: {requires_confirmation: true}
  lookup_order: {}
outcome:
  success_when: [close_ticket]
"""
ADK_TOOL = {"gcp.vertex.agent.event_id": "e-1", "gen_ai.tool.type": "FunctionTool"}
AF_TOOL = {"agent_framework.function.invocation.duration": 0.001}


def unchecked(h: Harness, agent: str, tool: str, reason: str) -> float | None:
    return h.agent_value("agenteval_unchecked_calls_total", agent, tool=tool, reason=reason)


def warnings(logs: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(e["reason"], e.get("tool", ""), e.get("setting", "")) for e in logs
            if e["event"].startswith("agenteval.unchecked")]


def test_checked_tools_from_the_policy() -> None:
    p = Policy.from_yaml(POLICY, "<test>")
    assert checked_tools(p.tools, p.outcome.success_when) == {"create_claim", "delete_account", "issue_refund",
                                                              "close_ticket"}


def test_each_checked_call_without_arguments_counts_and_the_first_is_logged(make_processor: Any) -> None:
    h: Harness = make_processor(POLICY)
    with capture_logs() as logs:
        for _ in range(2):
            root = h.agent("support")
            h.chat(root, at=0.1, inp=10, out=1)
            h.tool(root, "lookup_order", at=1)  # a read without arguments: nothing lost
            h.tool(root, "create_claim", at=2, end_attrs=ADK_TOOL)
            h.tool(root, "create_claim", at=3, end_attrs=ADK_TOOL)
            h.tool(root, "close_ticket", at=4)
            h.tool(root, "issue_refund", {"amount": 5}, at=5)  # arguments there: checked
            h.end(root, 6)
    assert unchecked(h, "support", "create_claim", "no_arguments") == 4.0
    assert unchecked(h, "support", "close_ticket", "no_arguments") == 2.0
    assert unchecked(h, "support", "issue_refund", "no_arguments") == 0.0  # exported at 0 from the first run
    assert unchecked(h, "support", "delete_account", "no_arguments") == 0.0
    assert unchecked(h, "support", "lookup_order", "no_arguments") is None
    assert unchecked(h, "support", "", "no_token_usage") == 0.0
    assert warnings(logs) == [
        ("no_arguments", "create_claim",
         "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY (or ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1)"),
        ("no_arguments", "close_ticket", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY"),
    ]
    [line] = [e for e in logs if e.get("tool") == "create_claim"]
    assert line["framework"] == "Google ADK 2.x" and line["service_name"] == SERVICE
    assert "duplicate and confirmation checks cannot run" in line["event"]


def test_run_with_model_calls_but_no_tokens_counts_once(make_processor: Any) -> None:
    h: Harness = make_processor(POLICY)
    with capture_logs() as logs:
        root = h.agent("triage")
        h.chat(root, at=0.1)
        h.chat(root, at=0.5)
        h.end(root, 1)
        h.run("triage")  # no model calls at all: nothing to say
        root = h.agent("triage")
        h.chat(root, at=0.1, inp=3)
        h.end(root, 1)
    assert unchecked(h, "triage", "", "no_token_usage") == 1.0
    assert warnings(logs) == [("no_token_usage", "", "")]


@pytest.mark.parametrize(("attributes", "framework"), [
    (ADK_TOOL, "Google ADK 2.x"),
    (AF_TOOL, "Microsoft Agent Framework"),
    ({"gen_ai.agent.call.id": "x"}, "pydantic-ai"),
    ({"openinference.span.kind": "TOOL"}, "OpenInference"),
    ({}, "OpenTelemetry GenAI instrumentation"),
    (None, "OpenTelemetry GenAI instrumentation"),
])
def test_capture_setting_names_the_framework(attributes: dict[str, Any] | None, framework: str) -> None:
    assert capture_setting(attributes)[0] == framework


def test_agent_framework_names_its_setting(make_processor: Any) -> None:
    h: Harness = make_processor(POLICY)
    with capture_logs() as logs:
        root = h.agent("support")
        h.tool(root, "create_claim", at=1, end_attrs=AF_TOOL)
        h.end(root, 2)
    assert warnings(logs) == [("no_arguments", "create_claim",
                               "ENABLE_SENSITIVE_DATA=true (or enable_instrumentation(enable_sensitive_data=True))")]


def test_semantic_kernel_told_by_its_instrumentation_scope(make_processor: Any, monkeypatch: Any) -> None:
    """Semantic Kernel's tool spans carry nothing of their own: its scope names it (live, OTLP)."""
    h: Harness = make_processor(POLICY)
    sk = h.provider.get_tracer("semantic_kernel.functions.kernel_function")
    logs = CapturingLogger()  # the logger itself: CLI commands run in-process configure structlog globally
    monkeypatch.setattr(blindspots, "log", logs)
    root = h.agent("support")
    ctx = trace.set_span_in_context(root)
    sk.start_span("execute_tool create_claim", context=ctx, attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "create_claim"}).end()
    h.end(root, 2)
    assert [c.kwargs["setting"] for c in logs.calls] == [
        "SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE=true"]
