"""The overhead benchmark still runs and reports what its README says (figures are not judged here:
they belong to the benchmark, on a quiet machine)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "overhead_by_run.py"


def test_overhead_by_run_reports_every_arm_round_by_round() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--workload", "tool-heavy", "--rounds", "2",
                           "--runs-per-round", "5", "--warmup", "0", "--background", "--floor", "--in-calls", "--json"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    s = json.loads(done.stdout)
    assert s["rounds"] == 2 and s["runs_per_round"] == 5
    for arm in ("processor", "empty", "background", "floor", "deferred_floor"):
        assert len(s[arm]["rounds"]) == 2
        assert all(r > 0 for r in s[arm]["rounds"])
        assert s[arm]["range"][0] <= s[arm]["median"] <= s[arm]["range"][1]
    assert set(s["ratio_of_totals"]) == {"empty", "agenteval", "background", "floor", "deferred_floor"}
    # every span kind of the mix was timed in place, and the checks' thread kept up
    assert {"start:invoke_agent", "end:invoke_agent", "end:chat", "end:execute_tool"} <= set(s["in_calls_us_by_kind"])
    # and the floor's calls, timed the same way, for the comparison call by call
    assert set(s["floor_in_calls_us_by_kind"]) == set(s["in_calls_us_by_kind"])
    assert s["floor_in_calls_us_per_span"] > 0
    assert s["background_drain_ms"]["max"] >= 0


def test_overhead_by_run_says_what_it_needs() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--rounds", "1"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 2
    assert "--rounds must be >= 2" in done.stderr
