"""Fail closed: a case no run names fails the gate, empty input exits 2, unbound runs are listed everywhere."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from scoring_support import WORKED_RUN, Runner
from trace_files import otlp_json_lines

from otel_agenteval.cli.main import main

CLEAN = [WORKED_RUN[0], WORKED_RUN[3], WORKED_RUN[4]]

CASES = """
cases:
  - id: claim-new
    set: capability
    reference: {required: [{tool: lookup_order}, {tool: create_claim}]}
  - id: status-new
    set: capability
    reference: {required: [{tool: lookup_order}]}
"""


def score(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    code = main(["score", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def traces(tmp_path: Path) -> tuple[Path, Path, list[str]]:
    """One run of claim-new; one naming a misspelt case; one with no case id at all."""
    (tmp_path / "cases.yaml").write_text(CASES)
    r = Runner(processor=False)
    r.run(CLEAN, case="claim-new", trial=1)
    r.run(CLEAN, case="status_new", trial=1)
    r.run(CLEAN)
    roots = [format(s.context.trace_id, "032x") for s in r.spans if s.parent is None]
    return otlp_json_lines(r.spans, tmp_path / "t.jsonl"), tmp_path / "cases.yaml", roots


def test_a_capability_case_without_runs_fails_the_gate(traces: tuple[Path, Path, list[str]],
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    path, cases, roots = traces
    code, out, err = score(capsys, path, "--cases", cases, "--format", "json", "-q")
    assert code == 1  # no regression case at all, yet a case went unevaluated
    gate = json.loads(out)["summary"]["gate"]
    assert gate["failed"] is True and gate["failed_regression_cases"] == []
    assert gate["cases_without_runs"] == [{
        "id": "status-new", "set": "capability", "closest_unbound": ["status_new"],
        "reason": "no run named this case; closest unbound case ids: status_new"}]
    assert gate["failed_cases"] == ["status-new"]
    unbound = json.loads(out)["summary"]["unbound"]
    assert unbound == {"not_listed": 0, "listed": [
        {"trace_id": roots[1], "case_id": "status_new", "agent": "support", "tool_calls": 3, "outcome": "unknown"},
        {"trace_id": roots[2], "case_id": None, "agent": "support", "tool_calls": 3, "outcome": "unknown"}]}

    code, out, err = score(capsys, path, "--cases", cases, "-v")  # -v: every run, every unbound run
    assert code == 1
    assert "case status-new: no run named this case; closest unbound case ids: status_new (fails the gate" in err
    assert "gate: pass^1 >= 1; no regression case fails; cases with no runs: status-new [FAILED]" in out
    assert f"unbound run {roots[1]}  names case 'status_new', which the cases file does not have" in out
    assert f"unbound run {roots[2]}  carries no case id" in out

    code, out, _ = score(capsys, path, "--cases", cases, "--allow-empty", "--format", "json", "-q")
    gate = json.loads(out)["summary"]["gate"]
    assert code == 0 and gate["failed"] is False and gate["cases_without_runs"][0]["id"] == "status-new"


def test_unbound_runs_in_markdown_and_junit(traces: tuple[Path, Path, list[str]],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    path, cases, roots = traces
    _, out, _ = score(capsys, path, "--cases", cases, "--format", "markdown", "-q")
    assert "## Runs bound to no case" in out
    assert f"| `{roots[1]}` | status_new | names case 'status_new', which the cases file does not have |" in out
    assert "| status-new | capability | 0/0 | - | n/a | n/a | n/a | **FAILED** (no run named this case; closest unbound case ids: status_new) |" in out
    _, out, _ = score(capsys, path, "--cases", cases, "--format", "junit", "-q")
    root = ET.fromstring(out)
    [failure] = root.findall(".//testcase[@name='status-new']/failure")
    assert failure.get("message") == "no run named this case; closest unbound case ids: status_new"
    skipped = {tc.get("name"): tc.find("skipped").get("message")  # type: ignore[union-attr]
               for tc in root.findall(".//testsuite[@name='unbound runs']/testcase")}
    assert set(skipped) == {roots[1], roots[2]}


def test_no_span_read_exits_2_for_score_and_replay(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "cases.yaml").write_text(CASES)
    (tmp_path / "policy.yaml").write_text("tools: {}\n")
    # a file of valid OTLP requests holding no span, and a file whose every line is rejected
    (tmp_path / "nospans.jsonl").write_text('{"resourceSpans": []}\n{"resourceSpans": []}\n')
    (tmp_path / "bad.jsonl").write_text("{oops\n{oops\n")
    for name in ("nospans.jsonl", "bad.jsonl"):
        f = tmp_path / name
        code, out, err = score(capsys, f, "--cases", tmp_path / "cases.yaml", "-q")
        assert (code, out) == (2, "") and "score: no span could be read from the input" in err
        assert main(["replay", str(f), "--policy", str(tmp_path / "policy.yaml"), "-q"]) == 2
        out, err = capsys.readouterr()
        assert "replay: no span could be read from the input" in err
        assert main(["replay", str(f), "--policy", str(tmp_path / "policy.yaml"), "-q", "--allow-empty"]) == 0
        capsys.readouterr()


def test_a_run_that_cannot_be_scored_fails_the_command(traces: tuple[Path, Path, list[str]],
                                                      capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine counts a callback's exception and carries on; score must not pass a lost run."""
    import otel_agenteval.cli.score as command

    def broken(*a: object, **k: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(command, "score_run", broken)
    path, cases, roots = traces
    code, out, err = score(capsys, path, "--cases", cases, "-q")
    assert (code, out) == (2, "")
    assert f"score: 1 runs could not be scored (an internal error; please report it): trace {roots[0]}: RuntimeError: boom" in err
