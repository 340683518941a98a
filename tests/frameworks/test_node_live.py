"""TypeScript agents live under Node (issue 39): Google ADK for TypeScript and LangGraph.js +
OpenInference run the round-3 scenario (``node/``, the round-3 capture scripts with an export
added) and send their spans as OTLP/HTTP JSON to a real ``otel-agenteval serve`` on loopback; the
served metrics must show the one run, its four calls (one failed), its tokens and the duplicate.

The npm packages are installed by ``.ci/frameworks.sh`` (the ``node`` leg) under
``~/.cache/otel-agenteval/node/<name>`` (or ``$OTEL_AGENTEVAL_NODE_DIR``), outside the clone.
Without node, npm or those packages the test skips, except in that leg (``OTEL_AGENTEVAL_NODE_LEG``
set), where it fails: the core suite runs before the leg installs them on a fresh machine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from serve_support import scrape, serve_process, settled, total, wait_until

HERE = Path(__file__).parent / "node"
NODE_DIR = Path(os.environ.get("OTEL_AGENTEVAL_NODE_DIR", Path.home() / ".cache" / "otel-agenteval" / "node"))
SCRIPTS = {"google-adk-js": "google-adk-js_capture.mjs", "langgraphjs": "langgraphjs_capture.mjs"}
POLICY = """\
version: 1
tools:
  create_claim: {write: true}
outcome:
  success_when: [create_claim]
"""


def node_modules(name: str) -> Path:
    where = NODE_DIR / name
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if not missing and not (where / "node_modules").is_dir():
        missing = [f"{where}/node_modules (bash .ci/frameworks.sh installs it)"]
    if missing:
        if os.environ.get("OTEL_AGENTEVAL_NODE_LEG"):
            pytest.fail(f"the TypeScript leg needs {', '.join(missing)}")
        pytest.skip(f"no {', '.join(missing)}")
    return where


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_typescript_agent_live_into_serve(name: str, tmp_path: Path) -> None:
    where = node_modules(name)
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    with serve_process("--policy", str(policy), "--grace", "0.3", "--no-log-violations") as (_, info):
        env = {**os.environ, "NODE_MODULES_DIR": str(where), "FWAUDIT_SPANS_DIR": str(tmp_path),
               "OTEL_AGENTEVAL_OTLP_ENDPOINT": f"http://127.0.0.1:{info['http_port']}/v1/traces"}
        done = subprocess.run(["node", SCRIPTS[name]], cwd=HERE, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and "HTTP 200" in done.stdout, done.stdout + done.stderr
        port = info["metrics_port"]
        wait_until(settled(port, 1), what="the run played")
        s = scrape(port)
    calls = {(dict(ls)["agent_name"], dict(ls)["tool"], dict(ls)["status"]): v for (n, ls), v in s.items()
             if n == "agenteval_tool_calls_total" and v}
    assert calls == {("support_agent", "lookup_order", "ok"): 1, ("support_agent", "create_claim", "ok"): 2,
                     ("support_agent", "issue_refund", "error"): 1}
    runs: dict[Any, float] = {dict(ls)["agent_name"]: v for (n, ls), v in s.items()
                              if n == "agenteval_trajectories_total" and v}
    assert runs == {"support_agent": 1}
    assert (total(s, "agenteval_tokens_total", type="input"), total(s, "agenteval_tokens_total", type="output")) == (600, 35)
    assert total(s, "agenteval_violations_total", rule="duplicate_write") == 1
    assert total(s, "agenteval_unread_spans_total") == 0
