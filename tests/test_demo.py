"""The demo, as a user runs it: summary, JSON, exit codes, and its recording replays to the same result."""

from __future__ import annotations

import json

import pytest

from otel_agenteval.cli import main


def test_demo_json_summary_is_seeded_and_complete(capsys):
    assert main(["demo", "--runs", "120", "--seed", "3", "--no-serve", "--format", "json", "--quiet"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert main(["demo", "--runs", "120", "--seed", "3", "--no-serve", "--format", "json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out) == first
    assert first["runs"] == 120
    assert set(first["outcomes"]) <= {"success", "failure", "unknown", "incomplete"}
    assert first["violations"].get("duplicate_write", 0) > 0 and first["violations"].get("budget_breach", 0) > 0
    assert first["tool_errors"] > 0 and first["cost_per_success_usd"] > 0


def test_demo_recording_replays_to_the_same_findings(tmp_path, capsys):
    traces = tmp_path / "demo.jsonl.gz"
    policy = tmp_path / "policy.yaml"
    import yaml

    from otel_agenteval._demo_world import DEMO_POLICY

    policy.write_text(yaml.safe_dump(DEMO_POLICY))
    assert main(["demo", "--runs", "80", "--seed", "5", "--no-serve", "--format", "json", "--quiet",
                 "--traces-out", str(traces)]) == 0
    live = json.loads(capsys.readouterr().out)
    code = main(["replay", str(traces), "--policy", str(policy), "--format", "json", "--quiet"])
    replayed = json.loads(capsys.readouterr().out)
    assert code == (1 if live["critical_violations"] else 0)
    summary = replayed.get("summary", replayed)
    for key in ("runs", "outcomes", "steps", "tokens_total", "violations", "critical_violations"):
        assert summary[key] == live[key], key


def test_demo_rejects_bad_options(capsys):
    assert main(["demo", "--runs", "-1", "--no-serve"]) == 2
    assert "must be >= 0" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--bogus"])
    assert exc.value.code == 2
