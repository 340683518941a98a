"""The README's "Record your own agent's runs, and score them", run as written: a pydantic-ai agent
(a scripted model in place of a real one) recorded to a file with the one documented line, each
run inside the app's own span carrying its case id, then ``score`` on the file."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from otel_agenteval.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
HEADING = "### Record your own agent's runs, and score them"

# the user's agent: two tools and a model that calls them in turn (the README says "given your agent")
AGENT = '''
import json
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import FunctionModel


def scripted(messages, info):
    turn = len(messages) // 2  # the user's prompt, then a call and its result per turn
    if turn == 0:
        return ModelResponse(parts=[ToolCallPart("lookup_order", {"order_id": "88120"}, tool_call_id="c1")])
    if turn == 1:
        return ModelResponse(parts=[ToolCallPart("issue_refund", {"order_id": "88120", "amount": 25}, tool_call_id="c2")])
    return ModelResponse(parts=[TextPart("Refunded 25 euros.")])


agent = Agent(FunctionModel(scripted), name="support")


@agent.tool_plain
def lookup_order(order_id: str) -> str:
    return json.dumps({"order_id": order_id, "status": "delivered"})


@agent.tool_plain
def issue_refund(order_id: str, amount: int) -> str:
    return "ok"
'''


def _blocks(lang: str) -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index(HEADING):]
    section = section[: section.index("\n## ")]
    return re.findall(rf"```{lang}\n(.*?)```", section, re.S)


def test_the_readme_records_an_agent_and_scores_its_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("pydantic_ai")
    [script], [cases], [commands] = _blocks("python"), _blocks("yaml"), _blocks("sh")
    (tmp_path / "app.py").write_text(AGENT + "\n" + script)
    (tmp_path / "cases.yaml").write_text(cases)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "app.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "runs.jsonl").stat().st_size > 0
    monkeypatch.chdir(tmp_path)
    [argv] = [shlex.split(line, comments=True) for line in commands.splitlines() if line.strip()]
    assert argv[0] == "otel-agenteval"
    code = main(argv[1:])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert out.startswith("score: 3 runs of 1 cases"), out
    assert "carry no case id" not in err
