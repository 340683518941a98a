"""``otel-agenteval agreement``: the kappa a person computes by hand, no figure from too few labels;
and the policy trusts a dimension only on a recorded agreement above the team's threshold."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from otel_agenteval import Policy
from otel_agenteval.cli.main import main
from otel_agenteval.policy import PolicyError

# judge/human label pairs: 30 pass/pass, 5 pass/fail, 10 fail/pass, 15 fail/fail (60 runs)
CELLS = [("pass", "pass", 30), ("pass", "fail", 5), ("fail", "pass", 10), ("fail", "fail", 15)]
# by hand: p_o = 45/60 = 0.75; p_e = (35*40 + 25*20) / 60^2 = 19/36; kappa = (3/4 - 19/36) / (1 - 19/36) = 8/17
KAPPA = 8 / 17


def _files(tmp_path: Path, cells: list[tuple[str, str, int]]) -> tuple[Path, Path]:
    judged, human = [], []
    i = 0
    for judge_label, human_label, n in cells:
        for _ in range(n):
            trace = format(i, "032x")
            verdict = "fail" if i % 4 == 0 else "pass"
            judged.append({"trace_id": trace, "agent": "support", "dimension": "helpfulness", "score": i % 7 / 6,
                           "label": judge_label, "explanation": "", "reason": "sampled", "verdict": verdict,
                           "trusted": False})
            human.append({"trace_id": trace, "dimension": "helpfulness", "label": human_label, "score": i % 7 / 6})
            i += 1
    j, h = tmp_path / "judgements.jsonl", tmp_path / "labels.jsonl"
    j.write_text("".join(json.dumps(x) + "\n" for x in judged))
    h.write_text("".join(json.dumps(x) + "\n" for x in human))
    return j, h


def test_agreement_gives_the_kappa_computed_by_hand(tmp_path: Path, capsys: Any) -> None:
    j, h = _files(tmp_path, CELLS)
    assert main(["agreement", "--judgements", str(j), "--labels", str(h), "--format", "json"]) == 0
    [(name, got)] = json.loads(capsys.readouterr().out)["dimensions"].items()
    assert name == "helpfulness" and got["measurement"] is True and got["labelled"] == 60
    assert got["kappa"]["value"] == round(KAPPA, 4)
    low, high = got["kappa"]["interval"]
    assert low < KAPPA < high
    assert got["spearman"]["value"] == 1.0 and got["mean_abs_diff"]["value"] == 0.0  # scores identical here
    # the judge's label against the rules' verdict on the same runs
    # --threshold gates on the low end of the interval, and that low end is what the policy records
    assert main(["agreement", "--judgements", str(j), "--labels", str(h), "--threshold", "0.4"]) == 1
    assert f"below --threshold 0.4 (the interval's low end, {low})" in capsys.readouterr().out
    assert main(["agreement", "--judgements", str(j), "--labels", str(h), "--threshold", "0.2"]) == 0
    assert f"agreement: {{kappa: {low}, labels: 60, " in capsys.readouterr().out
    assert got["rules"]["of"] == 60
    assert got["rules"]["same"] == sum(1 for i, (a, _, n) in enumerate(
        [c for c in CELLS for _ in range(c[2])]) if a == ("fail" if i % 4 == 0 else "pass"))


def test_ten_labels_are_not_a_measurement(tmp_path: Path, capsys: Any) -> None:
    j, h = _files(tmp_path, [("pass", "pass", 6), ("fail", "fail", 4)])
    assert main(["agreement", "--judgements", str(j), "--labels", str(h)]) == 1
    out = capsys.readouterr().out
    assert "too few labels to measure agreement: 10 is fewer than 50; no figure is given" in out
    assert "kappa 1.00" not in out and "Cohen" not in out
    assert main(["agreement", "--judgements", str(j), "--labels", str(h), "--format", "json"]) == 1
    got = json.loads(capsys.readouterr().out)["dimensions"]["helpfulness"]
    assert got["measurement"] is False and "kappa" not in got


def test_a_bad_labels_line_is_named(tmp_path: Path, capsys: Any) -> None:
    j, h = _files(tmp_path, CELLS)
    h.write_text(h.read_text() + '{"trace_id": 7}\n')
    assert main(["agreement", "--judgements", str(j), "--labels", str(h)]) == 2
    err = capsys.readouterr().err
    assert "line 61: field 'trace_id' missing or not a string" in err and str(h) in err


TRUSTED = "judge: {{trust_threshold: {t}, dimensions: {{q: {{rubric: r, trusted: true{a}}}}}}}"


@pytest.mark.parametrize(("yaml", "error"), [
    (TRUSTED.format(t="null", a=", agreement: {kappa: 0.8, labels: 100}"),
     "judge: dimensions.q.trusted: set judge.trust_threshold (the agreement your team requires) first"),
    (TRUSTED.format(t=0.6, a=""), "judge: dimensions.q.trusted: needs a recorded agreement"),
    (TRUSTED.format(t=0.6, a=", agreement: {kappa: 0.5, labels: 100}"),
     "judge: dimensions.q.trusted: its agreement (kappa 0.5) is below judge.trust_threshold (0.6)"),
    (TRUSTED.format(t=0.6, a=", agreement: {kappa: 0.9, labels: 10}"),
     "judge: dimensions.q.trusted: its agreement rests on 10 labels, fewer than judge.min_labels (50)"),
    ("judge: {rate: 1.5}", "judge.rate: must be <= 1"),
    ("judge: {agents: {billing: 2}}", "judge.agents: rate of 'billing': must be between 0 and 1"),
    ("judge: {dimensions: {Bad Name: {rubric: r}}}", "judge.dimensions: 'Bad Name': a dimension is named"),
    ("judge: {endpoint: {base_url: ftp://x, model: m}}", "judge.endpoint.base_url: 'ftp://x': must be an http"),
    ("judge: {sample: 0.1}", "judge.sample: unknown key"),
])
def test_the_judge_section_is_validated_with_the_field_named(yaml: str, error: str) -> None:
    with pytest.raises(PolicyError) as exc:
        Policy.from_yaml(yaml)
    assert error in str(exc.value)


def test_a_dimension_is_trusted_on_a_measured_agreement_over_the_threshold() -> None:
    policy = Policy.from_yaml(TRUSTED.format(t=0.6, a=", agreement: {kappa: 0.72, labels: 140}"))
    assert policy.judge.dimensions["q"].trusted
