"""Zero config catches the headline: writes inferred from tool names (issue 26, item 2).

With no policy, or for a tool the policy does not name, a tool whose name starts with a write
verb is a write: a repeated identical call is a ``duplicate_write`` (warning); a repeated read
is not. Declared writes keep their severity; ``infer_writes: false`` turns it off. The same
engine behind the processor, replay and serve.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import structlog
import structlog.testing

from otel_agenteval import Policy
from otel_agenteval.cli.main import main
from otel_agenteval.engine import dispatch
from otel_agenteval.engine.dispatch import MAX_INFERRED_LOGGED
from otel_agenteval.policy.write_verbs import first_word, is_inferred_write

CLAIM = {"order_id": "88120", "reason": "damaged"}


@pytest.mark.parametrize(("tool", "write"), [
    ("create_claim", True), ("issueRefund", True), ("IssueRefund", True), ("send-email", True),
    ("orders.cancel", True), ("crm.create_contact", True), ("mcp__github__create_issue", True),
    ("orders/cancel", True), ("book_flight", True), ("set_status", True), ("add_item", True), ("post", True),
    # Semantic Kernel's <plugin>-<function>: the verb after the plugin
    ("orders-create_claim", True), ("OrdersPlugin-issueRefund", True), ("orders-lookup_order", False),
    ("order-lookup", False), ("support-transfer_to_human_agents", False),
    ("lookup_order", False), ("get_policy", False), ("search_orders", False), ("ask_user_confirmation", False),
    ("settings_get", False), ("address_lookup", False), ("posts_list", False), ("issues.list", False),
    ("file_search", False), ("", False), ("___", False), ("....", False),
])
def test_a_write_verb_leads_the_name(tool: str, write: bool) -> None:
    assert is_inferred_write(tool) is write, first_word(tool)


def _rules(h: Any) -> list[tuple[str, str, str | None]]:
    return [(v.rule, v.severity, v.tool) for v in h.violations]


def test_no_policy_a_repeated_inferred_write_is_a_warning_a_repeated_read_nothing(make_processor: Any) -> None:
    h = make_processor()
    h.run("support", [("lookup_order", {"order_id": "88120"}), ("lookup_order", {"order_id": "88120"}),
                      ("createClaim", CLAIM), ("createClaim", dict(reversed(list(CLAIM.items()))))])
    assert _rules(h) == [("duplicate_write", "warning", "createClaim")]
    assert h.registry.get_sample_value("agenteval_violations_total", {
        "service_name": "shop", "agent_name": "support", "rule": "duplicate_write", "tool": "createClaim",
        "severity": "warning"}) == 1.0


def test_a_repeated_inferred_write_is_a_duplicate_not_a_redundant_call(make_processor: Any) -> None:
    """The redundant-calls counter is for repeated non-writes: an inferred write repeated is the
    duplicate_write rule's (and score's), as a declared one is; a repeated read stays redundant."""
    h = make_processor()
    h.run("support", [("lookup_order", {"order_id": "88120"}), ("lookup_order", {"order_id": "88120"}),
                      ("create_claim", CLAIM), ("create_claim", CLAIM)])
    redundant = {tool: h.registry.get_sample_value("agenteval_redundant_calls_total", {
        "service_name": "shop", "agent_name": "support", "tool": tool}) for tool in ("lookup_order", "create_claim")}
    assert redundant == {"lookup_order": 1.0, "create_claim": None}
    writes = Policy().writes
    assert ("create_claim" in writes, "lookup_order" in writes) == (True, False)
    assert "create_claim" not in Policy.from_yaml("infer_writes: false\n").writes


def test_declared_writes_keep_their_severity_and_named_tools_are_not_inferred(make_processor: Any) -> None:
    h = make_processor("tools:\n  create_claim: {write: true}\n  update_note: {}\n")
    h.run("support", [("create_claim", CLAIM), ("create_claim", CLAIM), ("update_note", {"n": 1}),
                      ("update_note", {"n": 1}), ("cancel_order", {"o": 1}), ("cancel_order", {"o": 1})])
    assert _rules(h) == [("duplicate_write", "critical", "create_claim"), ("duplicate_write", "warning", "cancel_order")]


def test_infer_writes_false_turns_it_off(make_processor: Any) -> None:
    policy = Policy.from_yaml("infer_writes: false\n")
    assert (policy.is_write("create_claim"), policy.in_force) == (
        False, "0 write tools declared; no writes inferred (infer_writes: false)")
    h = make_processor(policy)
    h.run("support", [("create_claim", CLAIM), ("create_claim", CLAIM)])
    assert h.violations == []


def test_a_confirmation_tool_is_not_an_inferred_write() -> None:
    policy = Policy.from_yaml("confirmation: {tools: [confirm_with_user]}")
    assert (policy.is_write("confirm_with_user"), policy.is_write("confirm_order")) == (False, True)


def test_policy_in_force_in_words() -> None:
    assert Policy().in_force == "no policy: writes inferred from tool names"
    assert Policy.from_yaml("tools: {a: {write: true}}").in_force == (
        "1 write tools declared; other writes inferred from tool names")


def test_inferred_write_tools_are_logged_once_each_and_bounded(make_processor: Any, monkeypatch: Any) -> None:
    # the dispatcher's logger, captured directly: CLI commands run in-process elsewhere configure
    # structlog globally (cached, filtered), so structlog.testing.capture_logs() is not reliable here
    captured = structlog.testing.CapturingLogger()
    monkeypatch.setattr(dispatch, "log", captured)
    h = make_processor()
    for i in range(MAX_INFERRED_LOGGED + 10):
        h.run("support", [(f"create_thing{i}", {"n": 1}), ("create_thing0", {"n": 2}), ("lookup", {})])
    lines = [c.args[0] for c in captured.calls if c.args[0].startswith("agenteval.inferred_write")]
    assert len(lines) == MAX_INFERRED_LOGGED + 1
    assert lines[0].startswith("agenteval.inferred_write: create_thing0 is treated as a write")
    assert lines[-1].startswith(f"agenteval.inferred_write: more than {MAX_INFERRED_LOGGED} tools")
    assert captured.calls[0].kwargs == {"tool": "create_thing0"}


def test_replay_finds_an_inferred_duplicate_with_no_policy(tmp_path: Path, capsys: Any) -> None:
    """The same engine on recorded traces: the demo's duplicate claims, replayed with no policy."""
    traces = tmp_path / "runs.jsonl"
    assert main(["demo", "--runs", "120", "--no-serve", "--quiet", "--traces-out", str(traces)]) == 0
    capsys.readouterr()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    try:
        code = main(["replay", str(traces)])
    finally:
        structlog.reset_defaults()
    out = capsys.readouterr().out
    assert "duplicate_write" in out
    # warnings only: nothing the policy declared, so no critical finding and exit 0
    assert (code, "CRITICAL duplicate_write" in out) == (0, False)


def test_serve_with_no_policy_names_it_and_finds_the_inferred_duplicate() -> None:
    """serve's start line names the policy in force; the duplicate claim is in /metrics and in the log."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from serve_support import scrape, serve_process, total, wait_until

    with serve_process("--grace", "0.1") as (proc, info):
        assert info["policy"] == "no policy: writes inferred from tool names"
        provider = TracerProvider(resource=Resource.create({"service.name": "shop"}))
        provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(
            endpoint=f"http://127.0.0.1:{info['http_port']}/v1/traces")))
        tracer = provider.get_tracer("test")
        with tracer.start_as_current_span("invoke_agent support", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}):
            for tool, args in [("lookup_order", '{"order_id": "1"}'), ("lookup_order", '{"order_id": "1"}'),
                               ("create_claim", '{"order_id": "1"}'), ("create_claim", '{"order_id": "1"}')]:
                with tracer.start_as_current_span(f"execute_tool {tool}", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                        "gen_ai.tool.call.arguments": args}):
                    pass
        provider.shutdown()
        port = info["metrics_port"]
        wait_until(lambda: total(scrape(port), "agenteval_violations_total") >= 1, what="the duplicate write")
        s = scrape(port)
        assert total(s, "agenteval_violations_total", rule="duplicate_write", tool="create_claim",
                     severity="warning") == 1
        assert total(s, "agenteval_violations_total") == 1  # the repeated lookup is no finding
        proc.send_signal(__import__("signal").SIGTERM)
        out, err = proc.communicate(timeout=30)
    logged = out + err
    assert '"policy": "no policy: writes inferred from tool names"' in err
    assert "agenteval.inferred_write: create_claim is treated as a write" in logged
    assert "lookup_order is treated" not in logged
    assert "agenteval.violation: create_claim called again" in logged
