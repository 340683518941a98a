"""The README's walk-through, run as written: demo --traces-out, replay, score with demo-cases.yaml.

The commands are read out of README.md and examples/scoring/README.md, so the docs cannot drift
from what runs. "Clean" means every run binds to a case, every case has runs, nothing is rejected.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from otel_agenteval.cli.main import main

ROOT = Path(__file__).resolve().parent.parent


def commands(readme: Path, heading: str | None = None) -> list[list[str]]:
    text = readme.read_text(encoding="utf-8")
    if heading is not None:
        text = text[text.index(heading):]
        text = text[: text.index("\n## ", 1)] if "\n## " in text[1:] else text
    block = re.search(r"```sh\n(.*?)```", text, re.S)
    assert block is not None, f"{readme}: no sh block"
    lines = block.group(1).replace("\\\n", " ").splitlines()
    out = []
    for line in lines:
        argv = shlex.split(line, comments=True)
        if argv:
            assert argv[0] == "otel-agenteval", line
            out.append([str(ROOT / a) if a.startswith("examples/") else a for a in argv[1:]])
    return out


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _check_score(argv: list[str], code: int, err: str, tmp: Path) -> None:
    # the demo injects duplicate writes into regression cases, so the gate fails: exit 1, not 2
    assert code == 1, err
    noise = [line for line in err.splitlines()
             if not line.startswith(("score: report written to", "score: verdict: FAILED (exit 1); gate: "))]
    assert noise == [], f"score printed warnings: {noise}"
    doc_argv = [a for a in argv if a not in ("--format", "html", "markdown", "--output", "report.html")]
    assert main([*doc_argv, "--format", "json", "--quiet"]) == 1


@pytest.mark.parametrize("readme, heading", [(ROOT / "README.md", "## Replay and score recorded traces"),
                                             (ROOT / "examples/scoring/README.md", None)])
def test_walkthrough_runs_clean(readme: Path, heading: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    cmds = commands(readme, heading)
    assert [c[0] for c in cmds][:1] == ["demo"] and "score" in [c[0] for c in cmds]
    for argv in cmds:
        if argv[0] == "demo":
            argv = [*argv, "--quiet"]
        code, out, err = _run(argv, capsys)
        if argv[0] == "demo":
            assert code == 0, err
        elif argv[0] == "replay":
            assert code in (0, 1) and "rejected" not in err, err
        else:
            _check_score(argv, code, err, tmp_path)
            doc = json.loads(capsys.readouterr().out)
            summary = doc["summary"]
            assert (summary["unbound_runs"], summary["unknown_cases"], summary["gate"]["cases_without_runs"]) == (0, {}, [])
            assert summary["input"]["rejected"] == 0
            assert all(c["trials"] > 0 for c in doc["cases"])
            if "--output" in argv:
                assert Path(argv[argv.index("--output") + 1]).stat().st_size > 0
            if "--format" not in argv:  # the default: a summary read at a glance
                _check_summary(out, doc)
            for case in doc["cases"]:  # "duplicate writes 0" never stands next to a duplicate_write
                for run in case["runs"]:
                    if any("duplicate_write" in r or "duplicate write" in r for r in run["reasons"]):
                        assert run["duplicate_writes"] > 0, run["reasons"]


def _check_summary(out: str, doc: dict) -> None:
    lines = out.splitlines()
    assert len(lines) <= 60, f"{len(lines)} lines"
    assert lines[1].startswith("verdict: FAILED (exit 1); gate: pass^1 >= 1; regression cases failing: ")
    meanings = {line.split("  ")[0].strip(): line for line in lines if line and not line.startswith(" ")}
    for label in ("pass rate", "coverage", "argument accuracy", "extra steps", "duplicate writes"):
        assert label in meanings, label
    reg = doc["summary"]["regression"]
    assert meanings["pass rate"].split()[2] == f"{reg['pass_rate']:.2f}"
    assert "mean over cases of a case's share of runs that pass or warn" in meanings["pass rate"]
    assert meanings["duplicate writes"].split()[2] == str(reg["numbers"]["duplicate_writes"])
    dup = sum(r["duplicate_writes"] for c in doc["cases"] if c["set"] == "regression" for r in c["runs"])
    assert dup == reg["numbers"]["duplicate_writes"] > 0
    worst = [line for line in lines if line.startswith("  ") and not line.startswith("    ") and " trace " in line]
    failing = {r["trace_id"] for c in doc["cases"] for r in c["runs"] if r["verdict"] == "fail"}
    assert 0 < len(worst) <= 5 and all(line.split(" trace ")[1].split()[0] in failing for line in worst)
