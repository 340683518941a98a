"""``init`` proposes what recorded traces cannot tell (``outcome:`` and ``pricing:``, commented), and
``replay``'s summary says when outcome or cost had no source; ``score`` without ``--policy`` says
what ``replay`` does (writes inferred from tool names)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from otel_agenteval import Policy
from otel_agenteval.cli.main import main


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("quickstart") / "runs.jsonl.gz"
    assert main(["demo", "--runs", "60", "--no-serve", "--quiet", "--traces-out", str(path)]) == 0
    return path


def _uncommented(text: str, section: str) -> str:
    """The stub for ``section`` with its ``# `` taken off, as a user would."""
    lines = text.splitlines()
    start = lines.index(f"# {section}:")
    stub = [lines[start]]
    for line in lines[start + 1:]:
        if not line.startswith("#   "):
            break
        stub.append(line)
    return "\n".join(line[2:] for line in stub)


def test_init_proposes_outcome_and_pricing_and_replay_says_what_had_no_source(
        runs: Path, tmp_path: Path, capsys: Any) -> None:
    policy_file = tmp_path / "agenteval.yaml"
    assert main(["init", "--from", str(runs), "-o", str(policy_file)]) == 0
    text = policy_file.read_text()
    assert re.search(r"^# outcome:\n#   success_when: \[create_claim, ", text, re.M), text
    assert "# pricing:\n#   gpt-4o: {input_per_mtok: " in text
    assert Policy.from_file(policy_file).outcome.success_when == []  # commented: nothing decided for the user
    capsys.readouterr()
    assert main(["replay", str(runs), "--policy", str(policy_file), "--quiet"]) == 1
    out = capsys.readouterr().out
    assert "(and no outcome: in the policy)" in out and "$0.0000 (no pricing: in the policy)" in out

    edited = text + "\n" + _uncommented(text, "outcome") + "\n" + _uncommented(text, "pricing") + "\n"
    policy_file.write_text(edited)
    policy = Policy.from_file(policy_file)
    assert "create_claim" in policy.outcome.success_when and "gpt-4o" in policy.pricing
    assert main(["replay", str(runs), "--policy", str(policy_file), "--quiet"]) == 1
    out = capsys.readouterr().out
    assert "no outcome: in the policy" not in out and "no pricing" not in out
    assert re.search(r"^  success +\d+ ", out, re.M) and not re.search(r"cost total +\$0\.0000", out)
    own = tmp_path / "own.yaml"  # a policy of the user's with both: merged into, no stub beside them
    own.write_text(_uncommented(text, "outcome") + "\n" + _uncommented(text, "pricing") + "\n")
    assert main(["init", "--from", str(runs), "-o", str(own)]) == 0
    merged = Policy.from_file(own)
    assert merged.outcome.success_when == policy.outcome.success_when and merged.pricing == policy.pricing
    assert "# outcome:" not in own.read_text() and "# pricing:" not in own.read_text()


def test_score_without_a_policy_says_writes_are_inferred_as_replay_does(runs: Path, capsys: Any) -> None:
    cases = Path(__file__).resolve().parent.parent / "examples" / "scoring" / "demo-cases.yaml"
    main(["score", str(runs), "--cases", str(cases)])
    out, err = capsys.readouterr()
    assert "duplicate writes are not checked" not in err
    assert "no --policy: writes inferred from tool names, as replay does" in err
    assert re.search(r"^duplicate writes +[1-9]", out, re.M)  # and they are counted, as the note says
