"""Every ``examples/<framework>/main.py`` runs, offline, and finds the duplicate claim it scripts.

pydantic-ai, OpenAI Agents and LangGraph run in the main environment; Strands and Google ADK in
their own (``.ci/frameworks.sh``), where a missing framework fails instead of skipping.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fw_envs import require

EXAMPLES = Path(__file__).resolve().parent.parent.parent / "examples"
# example -> (environment, modules it imports)
FRAMEWORKS = {
    "pydantic-ai": ("main", ("pydantic_ai",)),
    "openai-agents": ("main", ("agents", "openinference.instrumentation.openai_agents")),
    "langgraph": ("main", ("langgraph", "openinference.instrumentation.langchain")),
    "strands": ("strands", ("strands",)),
    "google-adk": ("google-adk", ("google.adk",)),
}
TRAJECTORY = {"agent": "support_agent", "outcome": "success", "llm_calls": 4, "tokens": [460, 26],
              "tools": [["lookup_order", True], ["create_claim", True], ["create_claim", True]],
              "cost_usd": 0.00141}  # 460 x $2.5 + 26 x $10 per million tokens
FOUND = {"answer": "I filed claim CLM-5531 for order 88120.", "trajectories": [TRAJECTORY],
         "violations": [["duplicate_write", "create_claim", "critical"]], "unchecked": {}}


def run_example(name: str, *args: str, cwd: Path) -> Any:
    env_name, modules = FRAMEWORKS[name]
    require(env_name, *modules)
    out = subprocess.run([sys.executable, str(EXAMPLES / name / "main.py"), "--json", *args], cwd=cwd,
                         capture_output=True, text=True, timeout=240, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])  # the processor's log lines come before


def test_every_example_folder_is_tested() -> None:
    not_frameworks = {"quickstart"}  # the README's first block: tests/test_docs_snippets.py runs it
    assert sorted(p.name for p in EXAMPLES.iterdir() if (p / "main.py").exists()) == sorted([*FRAMEWORKS, *not_frameworks])
    for name in FRAMEWORKS:
        assert (EXAMPLES / name / "README.md").exists() and (EXAMPLES / name / "agenteval.yaml").exists()


@pytest.mark.parametrize("name", sorted(FRAMEWORKS))
def test_example_finds_the_duplicate_claim(name: str, tmp_path: Path) -> None:
    assert run_example(name, cwd=tmp_path) == FOUND


def test_google_adk_example_without_content_capture_says_what_it_cannot_check(tmp_path: Path) -> None:
    got = run_example("google-adk", "--no-content", cwd=tmp_path)
    assert got == {**FOUND, "violations": [], "unchecked": {"create_claim/no_arguments": 2.0}}
