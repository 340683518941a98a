"""One exit-code rule for every command, through the real CLI in a child process.

0 ok, 1 a finding (critical violation, failing gate), 2 usage or input error with one line
naming the file (and line and field where there is one), no traceback unless ``--debug``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from scoring_support import WORKED_CASES, WORKED_RUN, Runner
from trace_files import otlp_json_lines

ROOT = Path(__file__).resolve().parent.parent
POLICY = ROOT / "examples/policies/support-agent.yaml"
CASES = ROOT / "examples/scoring/demo-cases.yaml"


def cli(*argv: object, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "otel_agenteval", *map(str, argv)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env={**os.environ, "PYTHONWARNINGS": "ignore"})


def one_line(out: subprocess.CompletedProcess[str], *needles: str) -> str:
    """Exit 2, stdout empty, exactly one stderr line holding every needle, no traceback."""
    lines = out.stderr.splitlines()
    assert (out.returncode, out.stdout, len(lines)) == (2, "", 1), out.stderr
    assert "Traceback" not in out.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def bad(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("bad")
    files = {
        "binary.yaml": bytes(range(256)) * 4,
        "deep.yaml": ("tools: " + "[" * 5000 + "]" * 5000 + "\n").encode(),
        "custom.yaml": b"tools:\n  create_claim: {write: true}\ncustom_rules:\n  - no_such_module_here:rule\n",
        "deep.json": ('{"resourceSpans":' + "[" * 100_000 + "]" * 100_000 + "}\n").encode(),
        "huge.json": (b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0000000000000000000000000000000a",'
                      b'"spanId":"000000000000000a","name":"x","startTimeUnixNano":1e400,"endTimeUnixNano":"2"}]}]}]}\n'),
        "binary.bin": bytes(range(7, 256)) * 64,
    }
    for name, data in files.items():
        (d / name).write_bytes(data)
    return {name: d / name for name in files}


@pytest.mark.parametrize("name, why", [("binary.yaml", "not a text file"),
                                       ("deep.yaml", "nested too deeply"),
                                       ("custom.yaml", "custom_rules.0: cannot load 'no_such_module_here:rule'")])
def test_a_bad_policy_is_one_line_and_exit_2_in_check_policy_and_serve(bad: dict[str, Path], name: str,
                                                                       why: str) -> None:
    path = str(bad[name])
    one_line(cli("check-policy", path), path, why)
    one_line(cli("serve", "--policy", path, "--grpc-port", "-1", "--http-port", "0", "--metrics-port", "0"), path, why)
    one_line(cli("replay", ROOT / "README.md", "--policy", path), path, why)
    if name == "custom.yaml":
        assert "(line 4)" in cli("check-policy", path).stderr  # the entry's line in the file


def test_debug_shows_the_traceback(bad: dict[str, Path]) -> None:
    out = cli("--debug", "replay", ROOT / "README.md", "--policy", bad["deep.yaml"])
    assert out.returncode == 2 and "Traceback" in out.stderr and "nested too deeply" in out.stderr
    out = cli("replay", ROOT / "README.md", "--policy", bad["deep.yaml"], "--debug")
    assert out.returncode == 2 and "Traceback" in out.stderr


@pytest.mark.parametrize("path", [ROOT / "README.md", ROOT / "examples/policies/support-agent.yaml", "binary.bin"])
def test_a_file_that_is_not_traces_is_one_line_naming_it(bad: dict[str, Path], path: Path | str) -> None:
    target = bad[path] if isinstance(path, str) else path
    one_line(cli("replay", target, "--policy", POLICY), str(target), "not trace data")
    one_line(cli("score", target, "--cases", CASES, "--policy", POLICY), str(target), "not trace data")


@pytest.mark.parametrize("name, why", [("deep.json", "nested too deep"), ("huge.json", "startTimeUnixNano: 1e400 is out of range")])
def test_bad_json_is_exit_2_naming_the_line_never_a_traceback(bad: dict[str, Path], name: str, why: str) -> None:
    for command in (["replay", bad[name], "--policy", POLICY], ["score", bad[name], "--cases", CASES]):
        out = cli(*command)
        assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
        assert f"{bad[name]}:1: " in out.stderr and why in out.stderr
        assert "no span could be read" in out.stderr.splitlines()[-1]


@pytest.mark.parametrize("argv, flag", [
    (["serve", "--idle-timeout", "nan"], "--idle-timeout"),
    (["serve", "--grace", "nan"], "--grace"),
    (["serve", "--grace=-1"], "--grace"),
    (["serve", "--grace", "inf"], "--grace"),
    (["serve", "--body-timeout", "0"], "--body-timeout"),
    (["serve", "--drain-timeout", "-5"], "--drain-timeout"),
    (["serve", "--shutdown-delay", "nan"], "--shutdown-delay"),
    (["serve", "--high-water", "nan"], "--high-water"),
    (["demo", "--linger", "nan"], "--linger"),
    (["demo", "--rate", "-1"], "--rate"),
])
def test_durations_are_checked_when_parsed(argv: list[str], flag: str) -> None:
    started = time.monotonic()
    line = one_line(cli(*argv), f"invalid {flag}")
    assert line.startswith(f"otel-agenteval {argv[0]}: ")
    assert time.monotonic() - started < 30  # refused before anything starts


def test_usage_errors_are_one_line() -> None:
    one_line(cli("score"), "required", "--cases")
    one_line(cli("replay", "no-such-file.jsonl", "--policy", POLICY), "no-such-file.jsonl", "no such file")
    one_line(cli("check-policy", "no-such-policy.yaml"), "no-such-policy.yaml", "cannot read")


def test_a_finding_is_exit_1_and_a_clean_input_exit_0(tmp_path: Path) -> None:
    """The CI gate: 1 only for a finding (here a duplicate write, a failing regression case)."""
    (tmp_path / "policy.yaml").write_text("tools:\n  create_claim: {write: true}\n")
    (tmp_path / "cases.yaml").write_text(WORKED_CASES)
    dup, clean = Runner(processor=False), Runner(processor=False)
    dup.run(WORKED_RUN, case="refund-damaged", trial=1)
    clean.run([WORKED_RUN[0], WORKED_RUN[3], WORKED_RUN[4]], case="refund-damaged", trial=1)
    dup_file = otlp_json_lines(dup.spans, tmp_path / "dup.jsonl")
    clean_file = otlp_json_lines(clean.spans, tmp_path / "clean.jsonl")
    policy = tmp_path / "policy.yaml"
    assert cli("replay", dup_file, "--policy", policy).returncode == 1
    assert cli("replay", clean_file, "--policy", policy).returncode == 0
    assert cli("score", dup_file, "--cases", tmp_path / "cases.yaml", "--policy", policy).returncode == 1
    assert cli("score", clean_file, "--cases", tmp_path / "cases.yaml", "--policy", policy).returncode == 0
    assert cli("check-policy", policy).returncode == 0


def test_an_internal_error_is_exit_3_not_1(tmp_path: Path) -> None:
    """A bug must not look like a finding to a CI job: 3, one line, the traceback with --debug."""
    r = Runner(processor=False)
    r.run([WORKED_RUN[0]], case="refund-damaged", trial=1)
    traces = otlp_json_lines(r.spans, tmp_path / "t.jsonl")
    script = ("import sys; import otel_agenteval.cli.replay as c; from otel_agenteval.cli.main import main; "
              "c.replay = lambda *a, **k: (_ for _ in ()).throw(SystemError('boom')); sys.exit(main(sys.argv[1:]))")
    argv = [sys.executable, "-c", script, "replay", str(traces), "--policy", str(POLICY)]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert (out.returncode, len(out.stderr.splitlines())) == (3, 1), out.stderr
    assert "internal error: SystemError: boom" in out.stderr and "Traceback" not in out.stderr
    out = subprocess.run([*argv, "--debug"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 3 and "Traceback" in out.stderr


def test_serve_logs_json_on_stderr_without_null_fields(tmp_path: Path) -> None:
    """Violations are logged as JSON lines on stderr; stdout holds only the 'listening' line."""
    from serve_support import post, serve_process, settled, wait_until
    from test_serve_input import PB, _body

    r = Runner(processor=False)
    r.run(WORKED_RUN, case="refund-damaged", trial=1)  # a duplicate create_claim: a critical violation
    policy = tmp_path / "policy.yaml"
    policy.write_text("tools:\n  create_claim: {write: true}\n")
    with serve_process("--policy", str(policy), "--grace", "0.1") as (proc, info):
        assert post(f"http://127.0.0.1:{info['http_port']}/v1/traces", _body(r.spans), PB)[0] == 200
        wait_until(settled(info["metrics_port"], 1), what="played")
        time.sleep(0.3)
    out, err = proc.communicate(timeout=30)
    assert out == ""  # nothing after the 'listening' line
    logged = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert len(logged) == len(err.splitlines()), err  # every line is JSON
    [violation] = [line for line in logged if line.get("rule") == "duplicate_write"]
    assert violation["event"].startswith("agenteval.violation: ") and violation["level"] == "warning"
    assert violation["tool"] == "create_claim" and violation["severity"] == "critical"
    assert all(v is not None for line in logged for v in line.values())
    assert "conversation" not in violation and "None" not in err
