"""After a tool error: retried the same call, tried another, or gave up; online and in score."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from scoring_support import SUPPORT_POLICY, Runner, trajectory
from trace_files import otlp_json_lines

from otel_agenteval import TrajectoryProcessor
from otel_agenteval.cli.main import main
from otel_agenteval.model.recovery import GAVE_UP, RETRIED_SAME, TRIED_OTHER, Recovery, recoveries, recovery_rate

A = ("lookup_order", {"order_id": "1"})
A_OTHER_ARGS = ("lookup_order", {"order_id": "2"})
B = ("get_policy", {"topic": "refunds"})


def fail(call: tuple[str, dict[str, str]]) -> tuple[str, dict[str, str], bool]:
    return (call[0], call[1], False)


@pytest.mark.parametrize("calls, expected", [
    ([A, B], []),
    ([fail(A)], [Recovery(0, "lookup_order", GAVE_UP)]),  # the run ended
    ([fail(A), A], [Recovery(0, "lookup_order", RETRIED_SAME, True)]),
    ([fail(A), fail(A), A], [Recovery(0, "lookup_order", RETRIED_SAME, False),
                             Recovery(1, "lookup_order", RETRIED_SAME, True)]),
    ([fail(A), A_OTHER_ARGS], [Recovery(0, "lookup_order", TRIED_OTHER)]),  # same tool, other arguments
    ([fail(A), B], [Recovery(0, "lookup_order", TRIED_OTHER)]),
    # answered without a successful call after the error: gave up, whatever it tried
    ([B, fail(A), fail(A), fail(B)], [Recovery(1, "lookup_order", GAVE_UP), Recovery(2, "lookup_order", GAVE_UP),
                                      Recovery(3, "get_policy", GAVE_UP)]),
    ([fail(A), fail(B), A], [Recovery(0, "lookup_order", TRIED_OTHER), Recovery(1, "get_policy", TRIED_OTHER)]),
])
def test_classification_on_real_trajectories(calls: list[tuple], expected: list[Recovery]) -> None:
    t, _ = trajectory(calls)
    assert recoveries(t.steps) == expected


def test_rate() -> None:
    t, _ = trajectory([fail(A), fail(A), A, fail(B)])
    found = recoveries(t.steps)
    assert [r.label for r in found] == ["retried_same_failed", "retried_same_ok", "gave_up"]
    assert recovery_rate(found) == pytest.approx(1 / 3)
    assert recovery_rate([]) is None


def test_online_counter() -> None:
    registry = CollectorRegistry()
    r = Runner(processor=False)
    r.provider.add_span_processor(TrajectoryProcessor(SUPPORT_POLICY, registry=registry))
    r.run([fail(A), A, fail(B), A_OTHER_ARGS])
    r.run([fail(B)])

    def got(tool: str, nxt: str) -> float | None:
        return registry.get_sample_value("agenteval_tool_error_recoveries_total", {
            "service_name": "support-svc", "agent_name": "support", "tool": tool, "next": nxt})

    assert got("lookup_order", "retried_same_ok") == 1.0
    assert got("get_policy", "tried_other") == 1.0
    assert got("get_policy", "gave_up") == 1.0
    assert got("lookup_order", "gave_up") is None


def test_score_reports_recovery_efficiency_and_redundancy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "cases.yaml").write_text(
        "cases:\n  - {id: c, reference: {required: [{tool: lookup_order}, {tool: get_policy}]}}\n")
    r = Runner(processor=False)
    r.run([A, B], case="c", trial=1)  # clean: efficiency 1, nothing redundant
    r.run([fail(A), A, A, B, fail(B)], case="c", trial=2)  # a good retry, a repeat, an error it gave up on
    traces = otlp_json_lines(r.spans, tmp_path / "t.jsonl")
    assert main(["score", str(traces), "--cases", str(tmp_path / "cases.yaml"), "--format", "json", "-q"]) == 0
    doc = json.loads(capsys.readouterr().out)
    clean, messy = doc["cases"][0]["runs"]
    got = [(run["recovery"]["rate"], run["step_efficiency"], run["redundant_calls"], run["redundant_call_rate"])
           for run in (clean, messy)]
    # messy: 5 calls + answer = 6 steps against 3; the third lookup and the failed policy call repeat a
    # successful identical call (the retry after the error does not: that is recovery)
    assert got == [(None, 1.0, 0, 0.0), (0.5, 0.5, 2, 0.4)]
    assert messy["recovery"]["next"] == [
        {"step": 1, "tool": "lookup_order", "next": "retried_same", "retry_ok": True},
        {"step": 5, "tool": "get_policy", "next": "gave_up", "retry_ok": False}]
    assert doc["cases"][0]["efficiency"] == {"tool_errors": 2, "recovered": 1, "recovery_rate": 0.5,
                                             "step_efficiency": 0.75, "redundant_calls": 2,
                                             "redundant_call_rate": round(2 / 7, 4)}
    assert doc["summary"]["capability"]["efficiency"] == doc["cases"][0]["efficiency"]
    main(["score", str(traces), "--cases", str(tmp_path / "cases.yaml"), "-q", "-v"])  # -v: every run
    out = capsys.readouterr().out
    assert "  recovery rate 0.50 (1 of 2 tool errors)  step efficiency 0.75  redundant-call rate 0.29 (2 calls)" in out
    assert "recovery 0.50 [step 1 lookup_order: retried_same (ok), step 5 get_policy: gave_up]" in out
    main(["score", str(traces), "--cases", str(tmp_path / "cases.yaml"), "-q", "--format", "markdown"])
    assert "| c | capability | 2/2 | k=1:1.00  k=2:1.00 | 0.50 | 0.75 | 0.29 | ok |" in capsys.readouterr().out


@pytest.mark.parametrize("how", ["copy", "deepcopy", "pickle"])
def test_a_scored_run_with_recoveries_copies_and_pickles(how: str) -> None:
    """Recoveries ride in a RunScore, which copies and pickles in both builds (``rebuild``): so do they."""
    import copy
    import pickle

    from otel_agenteval.scoring.cases.load import cases_from_text
    from otel_agenteval.scoring.score import score_run

    t, _ = trajectory([fail(A), A, B])
    case = cases_from_text("cases: [{id: c, reference: {required: [{tool: get_policy}]}}]")[0]
    run = score_run(t, case, SUPPORT_POLICY)
    assert run.recoveries == [Recovery(0, "lookup_order", RETRIED_SAME, True)]
    twin = {"copy": copy.copy, "deepcopy": copy.deepcopy, "pickle": lambda r: pickle.loads(pickle.dumps(r))}[how](run)
    assert twin.recoveries == run.recoveries and twin.to_dict() == run.to_dict()
