"""Zero-code attach: a real app under ``opentelemetry-instrument`` (opentelemetry-distro's
configurator sets the SDK's providers), the processor attached through our instrumentor entry
point, ``/metrics`` scraped while the app runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from serve_support import free_port, scrape, value

APP = '''
import json, sys
from opentelemetry import trace

tracer = trace.get_tracer("app")
with tracer.start_as_current_span("invoke_agent support",
                                  attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}):
    for _ in range(2):
        with tracer.start_as_current_span("execute_tool create_claim", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "create_claim",
                "gen_ai.tool.call.arguments": json.dumps({"order_id": "88120"})}):
            pass
print("ready", type(trace.get_tracer_provider()).__name__, flush=True)
sys.stdin.readline()  # stay up until the test has scraped
'''


def _instrument() -> str:
    found = shutil.which("opentelemetry-instrument", path=str(Path(sys.executable).parent))
    assert found, "opentelemetry-instrument comes with the test extra (opentelemetry-instrumentation)"
    return found


def _run(tmp_path: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    (tmp_path / "app.py").write_text(APP)
    base = {**os.environ, "OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none",
            "OTEL_LOGS_EXPORTER": "none", "OTEL_SERVICE_NAME": "shop", **env}
    return subprocess.Popen([_instrument(), sys.executable, str(tmp_path / "app.py")], cwd=tmp_path, env=base,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _ready(proc: subprocess.Popen[str]) -> str:
    """The app's "ready" line (the violation log lines come first, on stdout: structlog's default)."""
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("ready"):
            return line
    raise AssertionError("the app ended before it was ready")


def _finish(proc: subprocess.Popen[str]) -> str:
    assert proc.stdin is not None and proc.stderr is not None
    proc.stdin.write("\n")
    proc.stdin.close()
    proc.wait(30)
    return proc.stderr.read()


def test_opentelemetry_instrument_attaches_and_serves_metrics(tmp_path: Path) -> None:
    (tmp_path / "agenteval.yaml").write_text("tools:\n  create_claim: {write: true}\n")
    port = free_port()
    proc = _run(tmp_path, {"OTEL_AGENTEVAL_POLICY": "agenteval.yaml", "OTEL_AGENTEVAL_METRICS_PORT": str(port)})
    try:
        assert _ready(proc).split() == ["ready", "TracerProvider"]
        s = scrape(port)
        assert value(s, "agenteval_violations_total", service_name="shop", agent_name="support",
                     rule="duplicate_write", tool="create_claim", severity="critical") == 1.0
        assert value(s, "agenteval_trajectories_total", service_name="shop", agent_name="support",
                     outcome="unknown") == 1.0
    finally:
        err = _finish(proc)
    assert proc.returncode == 0, err


@pytest.mark.parametrize(("env", "message"), [
    ({"OTEL_AGENTEVAL_POLICY": "missing.yaml"},
     "OTEL_AGENTEVAL_POLICY: missing.yaml: invalid policy; cannot read: No such file or directory"),
    ({"OTEL_AGENTEVAL_POLICY": "agenteval.yaml", "OTEL_AGENTEVAL_METRICS_PORT": "http"},
     "invalid OTEL_AGENTEVAL_METRICS_PORT: 'http' (a port, 0..65535)"),
    ({"OTEL_AGENTEVAL_POLICY": "bad.yaml"}, "OTEL_AGENTEVAL_POLICY: bad.yaml: invalid policy; tools.create_claim.write"),
])
def test_a_bad_setting_is_one_line_and_nothing_attached(tmp_path: Path, env: dict[str, str], message: str,
                                                        monkeypatch: Any, capsys: Any) -> None:
    """In process (an instrumented start-up takes ~5 s of CPU: one subprocess test is enough)."""
    from opentelemetry.sdk.trace import TracerProvider

    from otel_agenteval import zero_code

    (tmp_path / "agenteval.yaml").write_text("tools: {}\n")
    (tmp_path / "bad.yaml").write_text("tools:\n  create_claim: {write: maybe}\n")
    monkeypatch.chdir(tmp_path)
    provider = TracerProvider()
    monkeypatch.setattr(zero_code.trace, "get_tracer_provider", lambda: provider)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    zero_code.AgentEvalInstrumentor()._instrument()
    err = capsys.readouterr().err
    assert err.startswith("otel-agenteval: not attached: " + message) and err.count("\n") == 1, err
    assert zero_code.AgentEvalInstrumentor.processor is None
    assert provider._active_span_processor._span_processors == ()  # nothing added


def test_without_the_policy_setting_nothing_is_attached(monkeypatch: Any, capsys: Any) -> None:
    from otel_agenteval import zero_code

    monkeypatch.delenv("OTEL_AGENTEVAL_POLICY", raising=False)
    monkeypatch.setattr(zero_code, "attach", lambda env: pytest.fail("attached"))
    zero_code.AgentEvalInstrumentor()._instrument()
    assert capsys.readouterr().err == ""
