"""The C wire reader (``replay/formats/_wire_c.c``) fuzzed for a few seconds under AddressSanitizer and
UBSan, as ``benchmarks/fuzz_wire_c.py`` runs it for longer: libFuzzer's mutations (atheris) of
real captures and malformed bodies, each read also by protobuf, any difference or sanitizer
report a failure. The canary shows the sanitizer is live in the child (a use-after-free there
must be reported), so a run that finds nothing means something."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import fuzz_wire_c  # noqa: E402


@pytest.fixture(autouse=True)
def _tools() -> None:
    why = fuzz_wire_c.missing()
    if why is not None:
        installed_by_ci = sys.version_info >= (3, 11) and platform.machine() == "x86_64" and sys.platform == "linux"
        if os.environ.get("OTEL_AGENTEVAL_EXPECT_BUILD") and installed_by_ci:  # make test: install-tools + the extra
            pytest.fail(why)
        pytest.skip(why)


def run(*args: str) -> tuple[int, dict, str]:
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "fuzz_wire_c.py"), "--json", *args],
                         capture_output=True, text=True, timeout=240, cwd=ROOT)
    return out.returncode, json.loads(out.stdout), out.stderr


def test_the_sanitizer_is_live_in_the_fuzzing_child() -> None:
    code, result, _ = run("--canary")
    assert code != 0 and "AddressSanitizer: heap-use-after-free" in (result["finding"] or "")


def test_a_short_fuzz_run_under_asan_and_ubsan_finds_nothing() -> None:
    code, result, log = run("--seconds", "12", "--max-len", "8192")
    assert code == 0, log[-4000:]
    assert result["crashes"] == [] and result["finding"] is None
    assert result["seeds"] >= 20 and result["execs"] > 200 and result["edges_covered"] > 100, result
