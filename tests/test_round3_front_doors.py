"""Round 3 (issue 39) through ``replay``'s own front door: the table and ``--format json`` say what
was not read (unread spans by instrumentation scope) and which calls went unchecked, with the
framework's setting that turns arguments on; a correct run's structural spans say nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from otel_agenteval.cli.main import main

POLICY = """\
version: 1
tools:
  create_claim: {write: true}
outcome:
  success_when: [create_claim]
"""
# (in tests/, not tests/frameworks/: commands run in-process here configure logging for the process,
# and the files before test_replay.py capture logs; frameworks/test_captured_shapes.py has the figures)
SPANS = Path(__file__).parent / "frameworks" / "spans"
ROUND3 = sorted(p.name for p in SPANS.glob("*.json") if p.name.startswith(
    ("google-adk-js", "langgraphjs-1.7.3_openinference", "openai-agents-js", "strands-ts", "mastra", "langfuse")))
NO_ARGUMENTS = {"langfuse-5.2.0_no-io.json"}


def replay_json(path: Path, policy: Path, capsys: Any) -> dict[str, Any]:
    main(["replay", "--quiet", "--format", "json", "--policy", str(policy), str(path)])
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("name", ROUND3)
def test_round3_replay_json_reports_no_unread_and_the_unchecked_calls(name: str, tmp_path: Path, capsys: Any) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    doc = replay_json(SPANS / name, policy, capsys)
    assert doc["summary"]["runs"] == 1 and doc["summary"]["agents"] == {"support_agent": 1}
    assert doc["summary"]["llm_calls_total"] == 5 and doc["summary"]["tool_errors"] == 1
    assert doc["unread_spans"] == {}
    if name not in NO_ARGUMENTS:
        assert doc["unchecked_calls"] == [] and doc["summary"]["violations"].get("duplicate_write") == 1
    else:
        assert [(r["tool"], r["calls"], r["framework"]) for r in doc["unchecked_calls"]] == [("create_claim", 2, "Langfuse")]
        assert "LANGFUSE_OBSERVE_DECORATOR_IO_CAPTURE_ENABLED=true" in doc["unchecked_calls"][0]["setting"]


def test_replay_table_names_the_setting_for_unchecked_calls(tmp_path: Path, capsys: Any) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    main(["replay", "--quiet", "--policy", str(policy), str(SPANS / "langfuse-5.2.0_no-io.json")])
    out = capsys.readouterr().out
    assert "unchecked calls: support_agent/create_claim 2" in out
    assert "LANGFUSE_OBSERVE_DECORATOR_IO_CAPTURE_ENABLED=true" in out


def test_score_says_unread_spans_and_unchecked_calls(tmp_path: Path, capsys: Any) -> None:
    from scoring_support import WORKED_CASES
    from test_unread import acme_request

    policy, cases, acme = tmp_path / "policy.yaml", tmp_path / "cases.yaml", tmp_path / "acme.otlp.json"
    policy.write_text(POLICY)
    cases.write_text(WORKED_CASES)
    acme.write_text(json.dumps(acme_request()) + "\n")
    code = main(["score", "--cases", str(cases), "--policy", str(policy), "--format", "json", "--allow-empty",
                 str(SPANS / "langfuse-5.2.0_no-io.json"), str(acme)])
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    summary = json.loads(out)["summary"]
    assert summary["unread_spans"] == {"acme.agents": 2}
    assert [(r["tool"], r["calls"], r["framework"]) for r in summary["unchecked_calls"]] == [("create_claim", 2, "Langfuse")]
    assert "2 unread spans of instrumentation scope 'acme.agents'" in err
    assert "LANGFUSE_OBSERVE_DECORATOR_IO_CAPTURE_ENABLED=true" in err


def test_serve_keeps_a_child_that_ends_just_after_its_root_in_the_run() -> None:
    """JavaScript SDKs' clocks: a tool span may end a millisecond after the agent span around it."""
    from serve_support import post, scrape, serve_process, settled, total, wait_until

    def span(sid: str, name: str, start: int, end: int, attrs: dict[str, str], parent: str = "") -> dict[str, Any]:
        return {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": sid, "name": name, "kind": 1,
                "startTimeUnixNano": str(start), "endTimeUnixNano": str(end),
                **({"parentSpanId": parent} if parent else {}),
                "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()]}

    t0 = 1_700_000_000_000_000_000
    root = span("a7ad6b7169203331", "invoke_agent a1", t0, t0 + 5_000_000,
                {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a1"})
    tool = span("b7ad6b7169203331", "execute_tool t", t0 + 1_000_000, t0 + 6_000_000,  # 1 ms after the root
                {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"}, parent="a7ad6b7169203331")
    body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [root, tool]}]}]}).encode()
    with serve_process("--grace", "0.2") as (_, info):
        status, _, text = post(f"http://127.0.0.1:{info['http_port']}/v1/traces", body,
                               {"Content-Type": "application/json"})
        assert status == 200, text
        wait_until(settled(info["metrics_port"], 1), what="the trace played")
        s = scrape(info["metrics_port"])
    assert total(s, "agenteval_tool_calls_total", agent_name="a1", tool="t") == 1
    assert total(s, "agenteval_trajectories_total") == 1 and total(s, "agenteval_late_spans_total") == 0
