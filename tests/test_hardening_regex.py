"""Hardening round 4 (#40), B2: a regex in the policy that backtracks (``^(a+)+$``) never stalls
the host's thread: RE2 runs it in linear time (or, without RE2, ``check-policy`` refuses it naming
the field); and ``serve``'s ``/readyz`` says so while the engine is stuck on one batch."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import serve_support
from serve_support import get, post, wait_until
from test_serve_input import PB, _body
from wal_support import duplicate_spans

from otel_agenteval.cli.main import main
from otel_agenteval.model import patterns
from otel_agenteval.policy.policy import Policy

EVIL = "^(a+)+$"
POLICY = f"""\
version: 1
tools:
  check_fraud: {{}}
  update_payment:
    write: true
    forbidden_if: [{{after: check_fraud, result_matches: '{EVIL}'}}]
"""
HOSTILE_RESULT = "a" * 27 + "!"  # 2**27 steps of backtracking for Python's re: seconds


def _policy_file(tmp_path: Path, text: str) -> str:
    p = tmp_path / "policy.yaml"
    p.write_text(text)
    return str(p)


@pytest.mark.skipif(patterns.RE2 is None, reason="google-re2 is not installed: the vetted subset is tested below")
def test_a_backtracking_regex_costs_the_host_nothing_as_a_span_ends(make_processor):
    h = make_processor(POLICY)
    root = h.agent("support", 0)
    h.tool(root, "check_fraud", {"account": "A-1"}, at=1, result=HOSTILE_RESULT)
    h.tool(root, "check_fraud", {"account": "A-2"}, at=2, result="a" * 100_000)  # matches: forbids what follows
    span = h.start("execute_tool update_payment", root, 3, {"gen_ai.operation.name": "execute_tool",
                                                             "gen_ai.tool.name": "update_payment"})
    t0 = time.monotonic()
    h.end(span, 3.1)
    took = time.monotonic() - t0
    h.end(root, 4)
    assert took < 0.5, f"span.end() took {took:.2f}s on the host's thread"
    assert h.rules() == ["conditional_forbidden"]


@pytest.mark.skipif(patterns.RE2 is None, reason="google-re2 is not installed")
def test_a_backtracking_regex_costs_the_guard_nothing(make_processor):
    h = make_processor(POLICY)
    guard = h.processor.guard(tracer_provider=h.provider)
    from opentelemetry import trace

    root = h.agent("support", 0)
    h.tool(root, "check_fraud", {"account": "A-1"}, at=1, result=HOSTILE_RESULT)
    with trace.use_span(root, end_on_exit=False):
        t0 = time.monotonic()
        decision = guard.check("update_payment", {"account": "A-1"})
        took = time.monotonic() - t0
    h.end(root, 2)
    assert decision.allowed and took < 0.5, (decision, took)


@pytest.mark.parametrize("field, text", [
    ("tools.update_payment.forbidden_if.0: result_matches", POLICY.replace(EVIL, r"(a)\1")),
    ("confirmation.affirm", "version: 1\nconfirmation:\n  affirm: '(?=yes)y'\n"),
    ("tools.refund.arguments: order_id", "version: 1\ntools:\n  refund: {arguments: {order_id: ['regex:(x)\\1']}}\n"),
])
def test_check_policy_refuses_what_the_linear_engine_cannot_run_naming_the_field(tmp_path, capsys, field, text):
    path = _policy_file(tmp_path, text)
    t0 = time.monotonic()
    assert main(["check-policy", path]) == 2
    err = capsys.readouterr().err
    assert field in err and "regex" in err, err
    assert time.monotonic() - t0 < 1.0


def test_without_re2_check_policy_refuses_a_backtracking_regex_naming_the_field(tmp_path):
    """The vetted subset on Python's re (a platform with no google-re2 wheel): ``re2`` made unimportable."""
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "re2.py").write_text("raise ImportError('no re2 here')\n")
    path = _policy_file(tmp_path, POLICY)
    repo = Path(__file__).resolve().parent.parent
    env_path = f"{blocker}:{repo}"
    for evil, why in ((EVIL, "a repeat inside a repeat"), ("(a|aa)*$", "an alternation inside a repeat"),
                      (r"(a)\1", "a backreference")):
        Path(path).write_text(POLICY.replace(EVIL, evil))
        got = subprocess.run([sys.executable, "-m", "otel_agenteval", "check-policy", path], capture_output=True,
                             text=True, timeout=60, env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"})
        assert got.returncode == 2, got
        assert "tools.update_payment.forbidden_if.0: result_matches" in got.stderr and why in got.stderr, got.stderr
    Path(path).write_text(POLICY.replace(EVIL, r'"flagged":\s*true'))
    got = subprocess.run([sys.executable, "-m", "otel_agenteval", "check-policy", path], capture_output=True,
                         text=True, timeout=60, env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"})
    assert got.returncode == 0, got.stderr


def test_readyz_is_not_ready_while_the_engine_is_stuck_on_one_batch(started_receivers):
    policy = Policy.from_yaml("version: 1\ncustom_rules: ['serve_support:gate_rule']\n")
    r = started_receivers(policy, engine_stuck_s=0.5)
    ready = f"http://127.0.0.1:{r.ports.metrics}/readyz"
    assert get(ready)[0] == 200
    serve_support.GATE.clear()  # the rule blocks, as a backtracking regex or a slow custom rule would
    try:
        assert post(f"http://127.0.0.1:{r.ports.http}/v1/traces", _body(duplicate_spans(1)), PB)[0] == 200
        wait_until(lambda: get(ready)[0] == 503, timeout=10, what="/readyz to fail")
        status, answer = get(ready)
        assert any("engine stuck" in p for p in json.loads(answer)["problems"]), answer
    finally:
        serve_support.GATE.set()
    wait_until(lambda: get(ready)[0] == 200, timeout=10, what="/readyz to recover")
