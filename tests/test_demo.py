"""The demo, as a user runs it: summary, JSON, exit codes, and its recording replays to the same result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from otel_agenteval.cli.main import main

SUPPORT_POLICY = Path(__file__).parent.parent / "examples" / "policies" / "support-agent.yaml"


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

    from otel_agenteval.cli.demo_world import DEMO_POLICY

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


def test_demo_ends_with_the_next_three_commands(capsys):
    """Run non-interactively (as here) it ends: no waiting for Ctrl-C, the next steps printed last."""
    assert main(["demo", "--runs", "5", "--no-serve", "--traces-out", "/dev/null"]) == 0
    err = capsys.readouterr().err
    steps = err[err.index("next:"):].strip().splitlines()[1:]
    assert [s.split()[:2] for s in steps] == [["ls", "-l"], ["otel-agenteval", "init"], ["otel-agenteval", "replay"]]


def test_the_readme_replay_walkthrough_finds_only_true_violations(tmp_path, capsys):
    """The demo's refunds name the order its lookup returned: grounded, so no ungrounded_argument (was 57)."""
    traces = tmp_path / "runs.jsonl.gz"
    assert main(["demo", "--runs", "200", "--no-serve", "--quiet", "--traces-out", str(traces)]) == 0
    capsys.readouterr()
    main(["replay", str(traces), "--policy", str(SUPPORT_POLICY), "--format", "json", "--quiet"])
    found = json.loads(capsys.readouterr().out)["violations"]
    assert {v["rule"] for v in found} == {"budget_breach", "duplicate_write", "write_retried_after_error",
                                          "write_without_confirmation"}
    assert all(v["details"].get("first_trace_id") for v in found if v["rule"] == "duplicate_write")


def test_demo_in_a_terminal_keeps_serving_until_ctrl_c(tmp_path):
    """stdout a TTY: after the summary /metrics stays up (the URL is live) until SIGINT, then exit 0."""
    import os
    import pty
    import signal
    import subprocess
    import sys
    import time
    import urllib.request

    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "otel_agenteval", "demo", "--runs", "30", "--port", "0"],
                            stdout=follower, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    os.close(follower)
    try:
        url = None
        assert proc.stderr is not None
        for line in proc.stderr:
            if line.startswith("still serving "):
                url = line.split()[2]
                break
        assert url is not None, "the demo did not say it keeps serving"
        time.sleep(1.0)  # the old demo's URL was dead 0.8 s after it was printed
        body = urllib.request.urlopen(url, timeout=5).read().decode()
        assert 'agenteval_violations_total{' in body and "duplicate_write" in body
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(leader)
