"""``otel-agenteval score`` end to end: real SDK spans written to trace files, read back, scored."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest
from scoring_support import WORKED_CASES, WORKED_RUN, Runner
from trace_files import otlp_json_lines

from otel_agenteval.cli.main import main
from otel_agenteval.scoring.report import document as report

POLICY = """\
tools:
  create_claim: {write: true}
pricing:
  gpt-4o: {input_per_mtok: 2.50, output_per_mtok: 10.00}
"""

CLEAN = [WORKED_RUN[0], WORKED_RUN[3], WORKED_RUN[4]]
MISSING = [WORKED_RUN[0], WORKED_RUN[3]]  # no claim: fails coverage


def score(capsys: pytest.CaptureFixture[str], *argv: Any) -> tuple[int, str, str]:
    code = main(["score", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "policy.yaml").write_text(POLICY)
    (tmp_path / "cases.yaml").write_text(WORKED_CASES)
    return {"dir": tmp_path, "policy": tmp_path / "policy.yaml", "cases": tmp_path / "cases.yaml"}


def test_worked_example_from_an_otlp_json_file(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    r = Runner(processor=False)
    r.run(WORKED_RUN, case="refund-damaged", trial=3)
    traces = otlp_json_lines(r.spans, files["dir"] / "traces.jsonl")
    code, out, _ = score(capsys, traces, "--cases", files["cases"], "--policy", files["policy"], "--format", "json")
    assert code == 1  # a regression case fails
    doc = json.loads(out)
    [case] = doc["cases"]
    assert (case["id"], case["pass_hat_k"]) == ("refund-damaged", {"1": 0.0})
    [run] = case["runs"]
    assert run["trace_id"] == format(r.spans[0].context.trace_id, "032x")
    got = {k: run[k] for k in ("coverage", "argument_accuracy", "extra_steps", "duplicate_writes", "verdict")}
    assert got == {"coverage": True, "argument_accuracy": 0.8, "extra_steps": 3, "duplicate_writes": 1, "verdict": "fail"}
    assert [s["mark"] for s in run["steps"]] == ["matches step 1", "extra", "wrong argument", "matches step 2",
                                                 "matches step 3", "DUPLICATE WRITE"]
    assert run["reasons"][0].startswith("duplicate write: step 6 create_claim")
    assert (run["run_steps"], run["reference_steps"], run["trial"]) == (7, 4, 3)
    assert doc["summary"]["gate"]["failed_regression_cases"] == ["refund-damaged"]
    assert doc["summary"]["input"]["rejected"] == 0
    assert "88120" not in json.dumps(run["steps"])  # argument values only with --show-arguments

    code, out, _ = score(capsys, traces, "--cases", files["cases"], "--policy", files["policy"], "-v")
    assert code == 1
    assert "   6  create_claim              DUPLICATE WRITE" in out
    assert "   7  final answer" in out
    _, out, _ = score(capsys, traces, "--cases", files["cases"], "--policy", files["policy"], "--show-arguments", "-v")
    assert "   3  get_policy(topic='returns')                       wrong argument (wrong: topic)" in out
    assert "   6  create_claim(order_id='88120', reason='damaged')  DUPLICATE WRITE" in out


FOUR = """
cases:
  - {id: always,    reference: {required: [{tool: create_claim, args: {order_id: "88120", reason: damaged}}]}}
  - {id: mostly,    reference: {required: [{tool: create_claim, args: {order_id: "88120", reason: damaged}}]}}
  - {id: half,      reference: {required: [{tool: create_claim, args: {order_id: "88120", reason: damaged}}]}}
  - {id: never,     reference: {required: [{tool: create_claim, args: {order_id: "88120", reason: damaged}}]}}
"""


@pytest.fixture
def four_items(files: dict[str, Path]) -> Path:
    """Four capability items, eight trials each, passing 8, 7, 4 and 0 times."""
    r = Runner(processor=False)
    for case, passes in (("always", 8), ("mostly", 7), ("half", 4), ("never", 0)):
        for trial in range(8):
            r.run(CLEAN if trial < passes else MISSING, case=case, trial=trial)
    (files["dir"] / "four.yaml").write_text(FOUR)
    return otlp_json_lines(r.spans, files["dir"] / "four.jsonl", batch=7)


def test_pass_hat_k_over_four_items(files: dict[str, Path], four_items: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = score(capsys, four_items, "--cases", files["dir"] / "four.yaml", "--policy", files["policy"],
                         "--format", "json")
    assert code == 0  # capability cases never fail the command
    doc = json.loads(out)
    curve = doc["summary"]["capability"]["pass_hat_k"]
    assert (round(curve["1"], 2), round(curve["4"], 2), round(curve["8"], 2)) == (0.59, 0.38, 0.25)
    assert sorted(curve, key=int) == [str(k) for k in range(1, 9)]
    assert "regression" not in doc["summary"]
    assert [(c["id"], c["passes"], c["trials"]) for c in doc["cases"]] == [
        ("always", 8, 8), ("mostly", 7, 8), ("half", 4, 8), ("never", 0, 8)]
    assert [r["trial"] for r in doc["cases"][1]["runs"]] == list(range(8))

    code, _, err = score(capsys, four_items, "--cases", files["dir"] / "four.yaml", "--k-max", "9")
    assert code == 2 and "case always: 8 trials, fewer than k=9" in err


def test_big_reports_stream_the_same_json(files: dict[str, Path], four_items: Path,
                                          capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    argv = (four_items, "--cases", files["dir"] / "four.yaml", "--policy", files["policy"], "--format", "json")
    _, pretty, _ = score(capsys, *argv)
    monkeypatch.setattr(report, "PRETTY_UP_TO", 5)  # 32 runs: now compact and streamed run by run
    _, streamed, _ = score(capsys, *argv)
    assert streamed.count("\n") == 1 and pretty.count("\n") > 100
    assert json.loads(streamed) == json.loads(pretty)


def test_streamed_json_holds_one_run_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past PRETTY_UP_TO, each run is written before the next one is read from the spool."""
    written: list[str] = []
    produced: list[int] = []

    class Out:
        def write(self, text: str) -> None:
            written.append(text)

    class Spooled:
        def json_texts(self) -> Any:
            for i in range(3):
                assert sum('"run"' in w for w in written) == i, "runs were collected before writing"
                produced.append(i)
                yield json.dumps({"run": i})

        def __len__(self) -> int:
            return 3

    monkeypatch.setattr(report, "PRETTY_UP_TO", 1)
    doc = {"cases": [{"id": "c", "runs": Spooled()}], "summary": {}}
    report.write_json(doc, Out())  # type: ignore[arg-type]
    assert produced == [0, 1, 2]
    assert json.loads("".join(written)) == {"cases": [{"id": "c", "runs": [{"run": 0}, {"run": 1}, {"run": 2}]}],
                                            "summary": {}}


def test_indented_and_streamed_json_write_odd_values_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run detail holding a value JSON has no type for (a set among a step's arguments, say) is
    written as its text by both the indented report and the streamed one (store.run_json)."""
    from otel_agenteval.scoring.score import RunScore, StepMark
    from otel_agenteval.scoring.store import RunStore

    def run() -> RunScore:
        step = StepMark(0, "lookup_order", True, "match", 0, {"ids": {7}})
        return RunScore("c", "t", None, "support", "pass", [], True, 1.0, 0, 0, 2, 2, 0, [step], None)

    def render(runs: Any) -> Any:
        out: list[str] = []

        class Out:
            def write(self, text: str) -> None:
                out.append(text)

        doc = {"cases": [{"id": "c", "runs": report.Runs(runs, True)}], "summary": {}}
        report.write_json(doc, Out())  # type: ignore[arg-type]
        return json.loads("".join(out))["cases"][0]["runs"]

    pretty = render([run()])
    store = RunStore(show_arguments=True)
    try:
        spooled = [store.add(run())]
        monkeypatch.setattr(report, "PRETTY_UP_TO", 0)
        streamed = render(spooled)
    finally:
        store.close()
    assert pretty == streamed
    assert streamed[0]["steps"][0]["arguments"] == {"ids": "{7}"}


def test_junit_one_testcase_per_case(files: dict[str, Path], four_items: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = score(capsys, four_items, "--cases", files["dir"] / "four.yaml", "--policy", files["policy"],
                         "--format", "junit", "--k", "4", "--threshold", "0.5")
    root = ET.fromstring(out.split("\n", 1)[1])
    cases = {tc.get("name"): tc.find("failure") for tc in root.iter("testcase")}
    assert list(cases) == ["always", "mostly", "half", "never"]
    assert [name for name, f in cases.items() if f is not None] == ["half", "never"]  # 1/70 and 0 < 0.5
    assert cases["half"].get("message") == "pass^4 0.01 below 0.5"  # type: ignore[union-attr]
    assert root.get("failures") == "2" and code == 0


def test_markdown(files: dict[str, Path], four_items: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = score(capsys, four_items, "--cases", files["dir"] / "four.yaml", "--format", "markdown")
    assert code == 0 and out.startswith("# Trajectory scores")
    assert "## Capability set" in out and "| half | capability | 4/8 |" in out
    assert "required call create_claim(order_id='88120', reason='damaged') is missing" in out


def test_binding_by_mapping_and_by_agentevals_attribute(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    r = Runner(processor=False)
    r.run(CLEAN, case="refund-damaged", attr="agentevals.eval.case.id")
    r.run(CLEAN)  # no case attribute: bound through the mapping
    r.run(CLEAN)  # bound to nothing: counted, never dropped silently
    r.run(CLEAN, case="no-such-case")
    traces = otlp_json_lines(r.spans, files["dir"] / "t.jsonl")
    roots = [s for s in r.spans if s.parent is None]
    mapping = files["dir"] / "map.txt"
    mapping.write_text(f"# trace case\n{format(roots[1].context.trace_id, '032x')} refund-damaged\n")
    code, out, err = score(capsys, traces, "--cases", files["cases"], "--policy", files["policy"],
                           "--mapping", mapping, "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["cases"][0]["trials"] == 2
    assert (doc["summary"]["unbound_runs"], doc["summary"]["unknown_cases"]) == (1, {"no-such-case": 1})
    assert "1 runs carry no case id" in err and "'no-such-case'" in err


def test_adk_evalset_as_cases_file(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    evalset = {"eval_set_id": "s", "eval_cases": [{"eval_id": "refund-damaged", "conversation": [
        {"invocation_id": "1", "user_content": {"parts": [{"text": "88120 arrived damaged"}]},
         "intermediate_data": {"tool_uses": [{"name": t, "args": a} for t, a in CLEAN]}}]}]}
    cases = files["dir"] / "support.evalset.json"
    cases.write_text(json.dumps(evalset))
    r = Runner(processor=False)
    r.run(CLEAN, case="refund-damaged", attr="agentevals.eval.case.id")
    r.run(WORKED_RUN, case="refund-damaged", attr="agentevals.eval.case.id")
    traces = otlp_json_lines(r.spans, files["dir"] / "t.jsonl")
    code, out, _ = score(capsys, traces, "--cases", cases, "--policy", files["policy"], "--format", "json")
    doc = json.loads(out)
    assert [run["verdict"] for run in doc["cases"][0]["runs"]] == ["pass", "fail"]
    assert "step 2 search_orders is not in the reference (order: exact)" in doc["cases"][0]["runs"][1]["reasons"]
    assert code == 0  # EvalSet cases are capability cases


def _two_candidates(files: dict[str, Path]) -> tuple[Path, Path]:
    a, b = Runner(processor=False), Runner(processor=False)
    for trial in range(4):
        a.run(CLEAN, case="refund-damaged", trial=trial, input_tokens=1000)
        b.run(CLEAN if trial % 2 else MISSING, case="refund-damaged", trial=trial, input_tokens=400)
    return otlp_json_lines(a.spans, files["dir"] / "a.jsonl"), otlp_json_lines(b.spans, files["dir"] / "b.jsonl")


def test_compare_side_by_side_with_a_plot(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    a, b = _two_candidates(files)
    png = files["dir"] / "plane.png"
    code, out, err = score(capsys, a, "--cases", files["cases"], "--policy", files["policy"], "--compare", b,
                           "--labels", "big,small", "--plot", png, "--format", "json")
    assert code == 0  # the gate is the first candidate's
    rows = {r["candidate"]: r for r in json.loads(out)["compare"]["sets"]["regression"]}
    assert (rows["big"]["pass_rate"], rows["small"]["pass_rate"]) == (1.0, 0.5)
    assert rows["big"]["cost_per_success"] == 0.0045 and rows["small"]["cost_per_success"] == 0.006
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"plot written to {png}" in err


def test_compare_without_matplotlib_skips_the_plot(files: dict[str, Path], capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    a, b = _two_candidates(files)
    png = files["dir"] / "plane.png"
    code, out, err = score(capsys, a, "--cases", files["cases"], "--policy", files["policy"], "--compare", b,
                           "--labels", "big,small", "--plot", png)
    assert code == 0
    assert "score: plot skipped: matplotlib is not installed" in err
    assert not png.exists()
    assert "big" in out and "small" in out and "cost/success" in out


def test_input_errors_exit_2(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    bad = files["dir"] / "bad.yaml"
    bad.write_text("cases:\n  - id: a\n    reference: {order: sideways}\n")
    traces = files["dir"] / "t.jsonl"
    traces.write_text("")
    code, _, err = score(capsys, traces, "--cases", bad)
    assert code == 2 and "bad.yaml: invalid cases file" in err and "cases.0.reference.order" in err
    code, _, err = score(capsys, files["dir"] / "missing.jsonl", "--cases", files["cases"])
    assert code == 2 and "no such file" in err
    code, _, err = score(capsys, traces, "--cases", files["cases"], "--threshold", "2")
    assert code == 2
    code, out, err = score(capsys, traces, "--cases", files["cases"], "--format", "json")
    assert (code, out) == (2, "")  # nothing read: the job is pointed at the wrong input
    assert "no span could be read from the input (1 file, 0 lines, 0 rejected)" in err
    code, out, err = score(capsys, traces, "--cases", files["cases"], "--format", "json", "--allow-empty")
    assert code == 0
    assert json.loads(out)["summary"]["gate"]["cases_without_runs"][0]["id"] == "refund-damaged"
    assert "case refund-damaged: no run named this case" in err
    traces.write_text("{not json\n{}\n")
    code, out, err = score(capsys, traces, "--cases", files["cases"])
    assert code == 2 and "no span could be read from the input (1 file, 2 lines, 1 rejected)" in err


def test_mapping_file_forms_and_errors(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    from otel_agenteval.scoring.bind import MappingError, load_mapping

    yaml_map = files["dir"] / "map.yaml"
    yaml_map.write_text("ABC123: refund-damaged\n'00000000000000000000000000000def': other\n")
    assert load_mapping(yaml_map) == {"abc123".rjust(32, "0"): "refund-damaged", "def".rjust(32, "0"): "other"}
    bad = files["dir"] / "bad.txt"
    bad.write_text("abc123 refund-damaged\nnot-hex case\n")
    with pytest.raises(MappingError, match="bad.txt:2: 'not-hex' is not a hex trace id"):
        load_mapping(bad)
    traces = files["dir"] / "t.jsonl"
    traces.write_text("")
    code, _, err = score(capsys, traces, "--cases", files["cases"], "--mapping", bad)
    assert code == 2 and "bad.txt:2" in err


def test_policy_argument_normalisers_reach_the_reference(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    policy = files["dir"] / "ids.yaml"
    policy.write_text(POLICY.replace("  create_claim: {write: true}\n", "  create_claim: {write: true}\n"
                                     "  lookup_order: {arguments: {order_id: [id]}}\n"))
    r = Runner(processor=False)
    r.run([("lookup_order", {"order_id": "ORD-88120"}), *CLEAN[1:]], case="refund-damaged")
    traces = otlp_json_lines(r.spans, files["dir"] / "t.jsonl")
    code, out, _ = score(capsys, traces, "--cases", files["cases"], "--policy", policy, "--format", "json")
    assert code == 0 and json.loads(out)["cases"][0]["runs"][0]["verdict"] == "pass"
    code, out, _ = score(capsys, traces, "--cases", files["cases"], "--policy", files["policy"], "--format", "json")
    assert code == 1 and json.loads(out)["cases"][0]["runs"][0]["steps"][0]["mark"] == "wrong argument"
