"""Hardening round 4 (#40): inputs that are obviously wrong get a clear error and exit 2 in under
a second, naming the field, flag or file: a TTL of 1e400 (B6), ``serve --wal-dir ''`` (B8), a huge
policy file (B9), an all-zero trace file (B10)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from otel_agenteval import Policy, TrajectoryProcessor
from otel_agenteval.cli.main import main

REPO = Path(__file__).resolve().parent.parent


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "otel_agenteval", *args], capture_output=True, text=True,
                          timeout=60, cwd=cwd, env={**os.environ, "PYTHONPATH": str(REPO)})


# --- B6: a TTL no clock can hold -----------------------------------------------------------------
@pytest.mark.parametrize("field", ["trajectory_ttl_s", "conversation_ttl_s"])
@pytest.mark.parametrize("value, says", [("1e400", "finite number"), (".inf", "finite number"),
                                         (".nan", "finite number"), ("1e300", "must be <= 31622400")])
def test_check_policy_names_a_ttl_no_clock_can_hold(tmp_path, capsys, field, value, says):
    path = tmp_path / "policy.yaml"
    path.write_text(f"version: 1\nlimits:\n  {field}: {value}\n")
    assert main(["check-policy", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"limits.{field}: " in err and says in err and "(line 3)" in err, err


def test_serve_and_replay_exit_2_naming_the_field_and_the_processor_never_overflows(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text("version: 1\nlimits:\n  conversation_ttl_s: 1e400\n")
    trace = tmp_path / "empty.jsonl"
    trace.write_text("{}\n")
    for args in (["serve", "--policy", str(path), "--grpc-port", "0", "--http-port", "0", "--metrics-port", "0"],
                 ["replay", str(trace), "--policy", str(path)]):
        got = _cli(*args)
        assert got.returncode == 2 and "limits.conversation_ttl_s" in got.stderr, (args, got.stderr)
        assert "internal error" not in got.stderr
    with pytest.raises(ValueError, match="conversation_ttl_s"):  # at build time, never OverflowError in the host
        TrajectoryProcessor(Policy(limits={"conversation_ttl_s": float("inf")}))


# --- B8: serve --wal-dir '' ----------------------------------------------------------------------
def test_serve_with_an_empty_wal_dir_exits_2_naming_the_flag_and_writes_nothing(tmp_path):
    got = _cli("serve", "--wal-dir", "", "--grpc-port", "0", "--http-port", "0", "--metrics-port", "0", cwd=tmp_path)
    assert got.returncode == 2 and "--wal-dir" in got.stderr and "empty" in got.stderr, got.stderr
    assert list(tmp_path.iterdir()) == []  # no log written into the current directory


# --- B9: a policy file of many megabytes -----------------------------------------------------------
def test_a_huge_policy_file_is_refused_at_once_with_its_name(tmp_path, capsys):
    path = tmp_path / "policy.yaml"
    tools = "".join(f"  tool_{i}: {{write: true, requires_before: [a, b]}}\n" for i in range(120_000))
    path.write_text("version: 1\ntools:\n" + tools)  # 5 MB: 30 s and 692 MB before
    t0 = time.monotonic()
    assert main(["check-policy", str(path)]) == 2
    took = time.monotonic() - t0
    err = capsys.readouterr().err
    assert f"{path}: " in err and "larger than 256 KiB" in err, err
    assert took < 1.0, took
    with pytest.raises(ValueError, match="larger than 256 KiB"):  # the same bound through the API
        Policy.from_yaml(path.read_text())


def test_a_policy_just_under_the_bound_is_read_in_about_a_second(tmp_path, capsys):
    path = tmp_path / "policy.yaml"
    tools = "".join(f"  tool_{i}: {{write: true, requires_before: [a, b]}}\n" for i in range(4_800))
    path.write_text("version: 1\ntools:\n" + tools)
    assert path.stat().st_size < 256 << 10
    t0 = time.monotonic()
    assert main(["check-policy", str(path)]) == 0
    assert time.monotonic() - t0 < 3.0  # libyaml's parser, one pass (was 3.7 s with two pure-Python passes)


# --- B10: an all-zero trace file -------------------------------------------------------------------
@pytest.mark.parametrize("name", ["zeros.bin", "zeros.pb", "zeros.jsonl"])
def test_a_zero_filled_trace_file_is_refused_at_once_naming_it(tmp_path, name):
    path = tmp_path / name
    with open(path, "wb") as f:
        f.truncate(256 << 20)  # sparse: 256 MiB of zeros, 101 s before the fix
    t0 = time.monotonic()
    got = _cli("replay", str(path))
    took = time.monotonic() - t0
    assert got.returncode == 2 and str(path) in got.stderr and "all zero" in got.stderr, got.stderr
    assert took < 5.0, took  # interpreter start included; the refusal itself reads 1 MiB
