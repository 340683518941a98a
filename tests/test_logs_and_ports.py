"""stdout is for data: the product's log lines (violations, a stopped call) go to stderr; a port
that is taken or out of range is one line and exit 2 (or the script's own exit), no traceback."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry

from otel_agenteval import Policy, TrajectoryProcessor
from otel_agenteval.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "examples" / "quickstart" / "main.py"


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def _quickstart(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(QUICKSTART), *args], capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, check=False)


def test_the_quickstart_logs_to_stderr_and_prints_only_its_url() -> None:
    run = _quickstart("--port", "0", "--seconds", "0")
    assert run.returncode == 0, run.stderr
    assert [line.split(" on ")[0] for line in run.stdout.splitlines()] == ["metrics"]
    assert "agenteval.violation: create_claim called again" in run.stderr


def test_the_quickstart_on_a_busy_port_says_so_without_a_traceback(busy_port: int) -> None:
    run = _quickstart("--port", str(busy_port), "--seconds", "0")
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert f"cannot serve /metrics on 127.0.0.1:{busy_port}" in run.stderr


def test_serve_on_a_busy_port_names_it_and_nothing_else(busy_port: int, capsys: Any) -> None:
    code = main(["serve", "--metrics-port", str(busy_port), "--grpc-port", "0", "--http-port", "0"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert [line for line in err.splitlines() if line.strip()] == \
        [f"otel-agenteval serve: cannot listen on 127.0.0.1:{busy_port}: Address already in use"]


@pytest.mark.parametrize("port", ["80000", "-1", "http"])
def test_demo_port_out_of_range_is_a_usage_error(port: str, capsys: Any) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["demo", "--runs", "1", "--port", port])
    assert exit_.value.code == 2
    assert "internal error" not in capsys.readouterr().err


def test_a_stopped_call_writes_one_log_line_to_stderr(capsys: Any) -> None:
    structlog.reset_defaults()  # as an app that configured nothing (a command run before may have)
    processor = TrajectoryProcessor(Policy.from_yaml("tools: {create_claim: {write: true}}\n", "<test>"),
                                    registry=CollectorRegistry())
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer, guard = provider.get_tracer("app"), processor.guard(tracer_provider=provider)
    claim = {"order_id": "88120", "reason": "damaged"}
    with tracer.start_as_current_span("invoke_agent support", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support",
            "gen_ai.conversation.id": "conv-secret-1"}):
        decisions = []
        for _ in range(2):
            with tracer.start_as_current_span("execute_tool create_claim", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "create_claim",
                    "gen_ai.tool.call.arguments": json.dumps(claim)}):
                decisions.append(guard.check("create_claim", claim).allowed)
    provider.shutdown()
    out, err = capsys.readouterr()
    assert decisions == [True, False] and out == ""
    [line] = [line for line in err.splitlines() if "agenteval.blocked" in line]
    assert "agenteval.blocked: create_claim stopped before it ran: create_claim called again" in line
    assert "rule=duplicate_write" in line and "mode=enforce" in line and "conversation=" in line
    assert "88120" not in line and "conv-secret-1" not in line  # values and ids hashed, as a violation's line


@pytest.mark.parametrize("traces_out", [None, "a/directory/with/a/long/name/for/the/recorded/runs.jsonl.gz"])
def test_the_demo_s_next_hint_keeps_each_comment_apart(traces_out: str | None, tmp_path: Path, capsys: Any) -> None:
    argv = ["demo", "--runs", "2", "--no-serve"]
    if traces_out:
        (tmp_path / traces_out).parent.mkdir(parents=True)
        argv += ["--traces-out", str(tmp_path / traces_out)]
    assert main(argv) == 0
    err = capsys.readouterr().err
    hint = err[err.index("next:\n") + 6:].splitlines()[:3]
    assert len(hint) == 3 and all("  # " in line for line in hint), hint
    assert len({line.index("  # ") for line in hint}) == 1  # the comments in one column
