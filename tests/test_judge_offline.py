"""``replay --judge`` and ``score --judge``: the judge section in the report, the exit status the rules' alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from scoring_support import WORKED_CASES, WORKED_RUN, Runner
from trace_files import otlp_json_lines

from otel_agenteval.cli.main import main

POLICY = """\
tools: {create_claim: {write: true}, issue_refund: {write: true}}
judge: {rate: 1.0, dimensions: {helpfulness: {rubric: "Did the agent help?"}}}
"""


@pytest.fixture
def recorded(tmp_path: Path) -> dict[str, Any]:
    r = Runner(processor=False)
    r.run(WORKED_RUN, case="refund-damaged", trial=1)
    (tmp_path / "policy.yaml").write_text(POLICY)
    (tmp_path / "cases.yaml").write_text(WORKED_CASES)
    return {"traces": str(otlp_json_lines(r.spans, tmp_path / "traces.jsonl")), "policy": str(tmp_path / "policy.yaml"),
            "cases": str(tmp_path / "cases.yaml"), "trace": format(r.spans[0].context.trace_id, "032x"),
            "dir": tmp_path}


def test_score_judge_adds_a_judge_section_and_leaves_the_gate_alone(recorded: dict[str, Any], capsys: Any) -> None:
    base = ["score", recorded["traces"], "--cases", recorded["cases"], "--policy", recorded["policy"], "-q"]
    assert main([*base, "--format", "json"]) == 1  # the duplicate write fails the regression case
    without = json.loads(capsys.readouterr().out)
    assert "judge" not in without
    out_file = recorded["dir"] / "j.jsonl"
    assert main([*base, "--format", "json", "--judge", "judge_support:fixed_judge", "--judgements", str(out_file)]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"]["gate"] == without["summary"]["gate"]
    [j] = doc["judge"]["judgements"]
    assert (j["trace_id"], j["dimension"], j["score"], j["label"], j["verdict"], j["reason"]) == (
        recorded["trace"], "helpfulness", 0.5, "pass", "fail", "flagged")  # the duplicate write is critical
    assert [json.loads(line) for line in out_file.read_text().splitlines()] == [j]
    assert main([*base, "--judge", "judge_support:fixed_judge"]) == 1
    table = capsys.readouterr().out
    assert "judge: 1 runs sampled (rate 1 by trace id, 1 flagged), 1 judgements, 0 timed out, 0 failed" in table
    assert f"{recorded['trace']}  support" in table


def test_replay_judge_needs_a_judge_section(recorded: dict[str, Any], capsys: Any) -> None:
    empty = recorded["dir"] / "empty.yaml"
    empty.write_text("tools: {create_claim: {write: true}}\n")
    assert main(["replay", recorded["traces"], "--policy", str(empty), "--judge", "-q"]) == 2
    assert "the policy has no judge section with dimensions" in capsys.readouterr().err
    assert main(["replay", recorded["traces"], "--policy", recorded["policy"], "--judge", "-q"]) == 2
    assert "the policy's judge section has no endpoint (or give --judge MODULE:ATTR)" in capsys.readouterr().err
    assert main(["replay", recorded["traces"], "--policy", recorded["policy"], "--judge", "nope", "-q"]) == 2
    assert "'nope': must be 'module:attr'" in capsys.readouterr().err
