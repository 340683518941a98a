"""Argument match modes (superset, exact, subset, ignore, dotted keys), per call and per tool,
with normalisers in every mode; and score's --match and --max-steps-factor."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from scoring_support import Runner
from trace_files import otlp_json_lines

from otel_agenteval.cli.main import main
from otel_agenteval.scoring import CasesError, cases_from_dict
from otel_agenteval.scoring.cases.load import ExpectedCall


def expected(args: dict[str, Any], mode: str | None = None, normalise: dict[str, Any] | None = None,
             overrides: dict[str, Any] | None = None, call_mode: str | None = None) -> ExpectedCall:
    call: dict[str, Any] = {"tool": "t", "args": args, "normalise": normalise or {}}
    if call_mode:
        call["args_match"] = call_mode
    reference: dict[str, Any] = {"required": [call], "args_match_overrides": overrides or {}}
    if mode:
        reference["args_match"] = mode
    return cases_from_dict({"cases": [{"id": "c", "reference": reference}]})[0].paths[0].calls[0]


REF = {"order_id": "A-1", "reason": "damaged"}


@pytest.mark.parametrize("mode, call, accepted", [
    ("superset", {"order_id": "A-1", "reason": "damaged"}, True),
    ("superset", {"order_id": "A-1", "reason": "damaged", "note": "x"}, True),  # may carry more
    ("superset", {"order_id": "A-1"}, False),
    ("exact", {"order_id": "A-1", "reason": "damaged"}, True),
    ("exact", {"order_id": "A-1", "reason": "damaged", "note": "x"}, False),  # an extra key: no match
    ("exact", {"order_id": "A-1"}, False),
    ("subset", {"order_id": "A-1"}, True),  # may carry fewer
    ("subset", {}, True),
    ("subset", {"order_id": "A-1", "note": "x"}, False),
    ("subset", {"order_id": "A-2"}, False),
    ("ignore", {"anything": 1}, True),
])
def test_modes(mode: str, call: dict[str, Any], accepted: bool) -> None:
    exp = expected(REF, mode)
    assert exp.accepts(call) is accepted
    assert (exp.wrong(call) == []) is accepted


def test_default_is_superset_and_wrong_names_the_keys() -> None:
    assert expected(REF).mode == "superset"
    assert expected(REF, "exact").wrong({"order_id": "A-2", "reason": "damaged", "note": "x"}) == ["order_id", "+note"]
    assert expected(REF, "subset").wrong({"order_id": "A-1", "note": "x"}) == ["+note"]


def test_normalisers_apply_in_every_mode() -> None:
    norm = {"order_id": ["case"], "note": ["ignore"]}
    call = {"order_id": "a-1", "reason": "damaged", "note": "retry"}
    assert expected(REF, "exact", norm).accepts(call)  # case folded; an ignored name may be there or not
    assert expected(REF, "exact", norm).accepts({"order_id": "a-1", "reason": "damaged"})
    assert expected(REF, "subset", norm).accepts({"order_id": "a-1", "note": "retry"})
    assert not expected(REF, "exact").accepts(call)


def test_per_call_and_per_tool_modes() -> None:
    assert expected(REF, "exact", overrides={"t": "superset"}).mode == "superset"  # the tool's override wins
    assert expected(REF, "exact", overrides={"t": "superset"}, call_mode="subset").mode == "subset"  # the call's
    assert expected(REF, "superset", overrides={"other": "exact"}).mode == "superset"


def test_dotted_keys_compare_only_those() -> None:
    ref = {"query": "upgrades", "time": {"start": "S", "end": "E"}}
    exp = expected(ref, overrides={"t": ["time.start", "time.zone"]})
    assert exp.accepts({"query": "foo", "time": {"start": "S", "end": "baz"}})  # time.zone missing on both: fine
    assert not exp.accepts({"query": "upgrades", "time": {"start": "T", "end": "E"}})
    assert not exp.accepts({"query": "upgrades", "time": {"start": "S", "zone": "UTC"}})  # present on one side
    assert exp.wrong({"time": "flat"}) == ["time.start"]
    normed = expected({"a": {"b": "X "}}, normalise={"a.b": ["case", "whitespace"]}, overrides={"t": ["a.b"]})
    assert normed.accepts({"a": {"b": "x"}})


def test_bad_settings_name_the_field() -> None:
    with pytest.raises(CasesError, match=r"cases\.0\.reference\.args_match"):
        cases_from_dict({"cases": [{"id": "c", "reference": {"args_match": "loose", "required": [{"tool": "t"}]}}]})
    with pytest.raises(CasesError, match="a list of dotted argument keys"):
        cases_from_dict({"cases": [{"id": "c", "reference": {"args_match_overrides": {"t": ["a..b"]},
                                                             "required": [{"tool": "t"}]}}]})
    with pytest.raises(CasesError, match="order 'sideways'"):
        cases_from_dict({"cases": [{"id": "c", "reference": {"required": [{"tool": "t"}]}}]}, order="sideways")


# --- score --match and --max-steps-factor ------------------------------------------------------------

CASES = """
cases:
  - id: c
    reference:
      order: exact
      required: [{tool: a}, {tool: b}]
"""


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "cases.yaml").write_text(CASES)
    r = Runner(processor=False)
    r.run([("b", {}), ("a", {})], case="c", trial=1)  # swapped
    r.run([("a", {}), ("x", {}), ("b", {})], case="c", trial=2)  # an extra call
    r.run([("a", {})] + [("x", {})] * 4 + [("b", {})], case="c", trial=3)  # 7 steps against 3
    return otlp_json_lines(r.spans, tmp_path / "t.jsonl"), tmp_path / "cases.yaml"


def _verdicts(files: tuple[Path, Path], capsys: pytest.CaptureFixture[str], *extra: str) -> list[str]:
    code = main(["score", str(files[0]), "--cases", str(files[1]), "--format", "json", "-q", *extra])
    out = capsys.readouterr().out
    assert code in (0, 1), out
    return [run["verdict"] for run in json.loads(out)["cases"][0]["runs"]]


def test_match_overrides_every_case(files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert _verdicts(files, capsys) == ["fail", "fail", "fail"]
    assert _verdicts(files, capsys, "--match", "in_order", "--max-steps-factor", "0") == ["fail", "pass", "pass"]
    assert _verdicts(files, capsys, "--match", "ANY_ORDER", "--max-steps-factor", "0") == ["pass", "pass", "pass"]
    # the default ceiling is twice the reference (6 steps): the 7-step run fails on it
    assert _verdicts(files, capsys, "--match", "any_order") == ["pass", "pass", "fail"]
    assert _verdicts(files, capsys, "--match", "any_order", "--max-steps-factor", "2.5") == ["pass", "pass", "pass"]


def test_bad_flags_exit_2(files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["score", str(files[0]), "--cases", str(files[1]), "--max-steps-factor", "-1"]) == 2
    assert "--max-steps-factor must be 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["score", str(files[0]), "--cases", str(files[1]), "--match", "sideways"])
