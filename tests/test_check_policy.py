"""``otel-agenteval check-policy``: good files, each kind of error, unknown keys; exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from otel_agenteval.cli.main import main

EXAMPLES = sorted((Path(__file__).parent.parent / "examples" / "policies").glob("*.yaml"))


def write(tmp_path: Path, text: str) -> str:
    p = tmp_path / "policy.yaml"
    p.write_text(text)
    return str(p)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_shipped_example_policies_are_valid(path, capsys):
    assert main(["check-policy", str(path)]) == 0
    assert capsys.readouterr().out.strip() == f"{path}: ok"


def test_examples_exist():
    assert {p.name for p in EXAMPLES} >= {"support-agent.yaml", "claims-intake.yaml"}


@pytest.mark.parametrize("text, expected", [
    ("agents:\n  support:\n    budget: {max_steps: 0}\n",
     "agents.support.budget.max_steps: must be > 0 (line 3)"),
    ("tools:\n  create_claim: {wirte: true}\n",
     "tools.create_claim.wirte: unknown key (check the spelling) (line 2)"),
    ("version: 2\n", "version: Input should be 1 (line 1)"),
    ("pricing:\n  gpt-4o: {input_per_mtok: -1, output_per_mtok: 1}\n",
     "pricing.gpt-4o.input_per_mtok: must be >= 0 (line 2)"),
    ("tools:\n  route: {forbidden_if: [{after: fraud_flags}]}\n",
     "tools.route.forbidden_if.0: needs either `after` with `result_matches`, or `same_subject` (line 2)"),
    ("tools:\n  refund: {arguments: {amount: [decmal]}}\n",
     "tools.refund.arguments: amount: unknown normaliser 'decmal'"),
    ("confirmation:\n  affirm: '(yes'\n", "confirmation.affirm: not a valid regex"),
    ("rules: {dupliate_write: false}\n", "rules: unknown rule 'dupliate_write'"),
    ("custom_rules: [no_colon]\n", "custom_rules: 'no_colon': must be 'module:attr'"),
    ("custom_rules: ['json:no_such_rule']\n", "custom_rules.0: cannot load 'json:no_such_rule'"),
    ("tools: [a, b]\n", "tools: Input should be a valid dictionary"),
    ("tools: {a: {write: true}\n", "not valid YAML"),
    ("- just a list\n", "(top level): must be a mapping, got list"),
])
def test_each_kind_of_error_is_named_with_its_path(tmp_path, capsys, text, expected):
    path = write(tmp_path, text)
    assert main(["check-policy", path]) == 2
    err = capsys.readouterr().err
    assert f"{path}: " in err and expected in err, err


def test_every_error_is_reported_not_only_the_first(tmp_path, capsys):
    path = write(tmp_path, "tools:\n  x: {wirte: true}\nagents:\n  a: {budget: {max_steps: 0}}\nrules: {nope: true}\n")
    assert main(["check-policy", path]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 3
    assert [ln.split(": ")[1] for ln in lines] == ["tools.x.wirte", "agents.a.budget.max_steps", "rules"]


def test_missing_file_and_json_output(tmp_path, capsys):
    good = write(tmp_path, "tools: {create_claim: {write: true}}\n")
    missing = str(tmp_path / "nope.yaml")
    assert main(["check-policy", good, missing, "--format", "json"]) == 2
    report = json.loads(capsys.readouterr().out)
    assert report["files"][0] == {"file": good, "valid": True, "errors": []}
    assert report["files"][1]["valid"] is False and "cannot read" in report["files"][1]["errors"][0]


def test_help_exits_zero(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["check-policy", "--help"])
    assert exc.value.code == 0
    assert "every error with its path" in capsys.readouterr().out
