"""Violations as ``gen_ai.evaluation.result`` log records on the offending span (SDK logs, in memory)."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import ISSUE_POLICY, WRITES_ONLY, hex_span
from opentelemetry._logs import SeverityNumber
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

from otel_agenteval import Policy
from otel_agenteval.model.trajectory import short_hash


@pytest.fixture
def logs() -> Any:
    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def _records(exporter: InMemoryLogRecordExporter) -> list[Any]:
    return [r.log_record for r in exporter.get_finished_logs()]


def test_a_violation_is_an_event_on_the_offending_tool_span(make_processor: Any, logs: Any) -> None:
    provider, exporter = logs
    h = make_processor(WRITES_ONLY, logger_provider=provider)
    root = h.agent("support", 0, conv="conv-secret-42")
    h.tool(root, "create_claim", {"order_id": "88120"}, at=1)
    second = h.tool(root, "create_claim", {"order_id": "88120"}, at=2)
    h.end(root, 3)
    [record] = _records(exporter)
    assert record.event_name == "gen_ai.evaluation.result"
    assert (record.trace_id, record.span_id) == (second.context.trace_id, second.context.span_id)
    assert format(record.span_id, "016x") == hex_span(second)
    assert (record.severity_number, record.severity_text) == (SeverityNumber.ERROR, "critical")
    [v] = h.violations
    assert dict(record.attributes) == {
        "gen_ai.evaluation.name": "duplicate_write",
        "gen_ai.evaluation.score.label": "fail",
        "gen_ai.evaluation.explanation": v.message,
        "agenteval.violation.severity": "critical",
        "gen_ai.agent.name": "support",
        "gen_ai.tool.name": "create_claim",
        "agenteval.conversation.hash": short_hash("conv-secret-42"),
    }
    assert "88120" not in str(record.attributes)  # argument values never in clear (the message hashes them)


def test_budget_breach_carries_its_number_and_ids_only_when_opted_in(make_processor: Any, logs: Any) -> None:
    provider, exporter = logs
    policy = Policy.from_yaml(ISSUE_POLICY + "outputs: {evaluation_ids_in_clear: true}\n")
    h = make_processor(policy, logger_provider=provider)
    h.run("support", [("lookup_order", {"n": i}) for i in range(9)], conv="conv-7")
    [record] = [r for r in _records(exporter) if r.attributes["gen_ai.evaluation.name"] == "budget_breach"]
    assert record.attributes["gen_ai.evaluation.score.value"] == 9.0
    assert record.attributes["agenteval.budget.limit"] == 8.0
    assert record.attributes["gen_ai.conversation.id"] == "conv-7"
    assert record.severity_number == SeverityNumber.WARN


def test_one_event_per_finished_run_with_its_verdict(make_processor: Any, logs: Any) -> None:
    provider, exporter = logs
    h = make_processor(Policy.from_yaml(ISSUE_POLICY + "outputs: {evaluation_runs: true}\n"),
                       logger_provider=provider)
    h.run("support", [("create_claim", {"order_id": "1"})])
    [record] = _records(exporter)
    [t] = h.trajectories
    assert record.attributes["gen_ai.evaluation.name"] == "agenteval.trajectory"
    assert record.attributes["gen_ai.evaluation.score.label"] == "pass"  # success_when: create_claim
    assert (record.trace_id, record.span_id) == (t.trace_id, t.root.span_id)


def test_policy_switch_uses_the_global_provider(make_processor: Any, logs: Any,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import otel_agenteval.metrics.evaluation_events as ev

    provider, exporter = logs
    monkeypatch.setattr(ev, "get_logger_provider", lambda: provider)
    off = make_processor(WRITES_ONLY)
    off.run("support", [("create_claim", {"a": 1}), ("create_claim", {"a": 1})])
    assert _records(exporter) == []  # not asked for: nothing emitted
    on = make_processor(WRITES_ONLY + "outputs: {evaluation_events: true}\n")
    on.run("support", [("create_claim", {"a": 1}), ("create_claim", {"a": 1})])
    assert [r.attributes["gen_ai.evaluation.name"] for r in _records(exporter)] == ["duplicate_write"]


def test_an_unknown_outputs_key_is_an_error() -> None:
    from otel_agenteval import PolicyError

    with pytest.raises(PolicyError, match="outputs.evaluation_event"):
        Policy.from_yaml("outputs: {evaluation_event: true}\n")
