"""The overhead benchmark still runs every arm and reports what its README says (figures are not
judged here: they belong to the benchmark, on a quiet machine)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "overhead.py"


def test_overhead_reports_every_arm_against_the_sdk_and_the_floor() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--workload", "tool-heavy", "--rounds", "2",
                           "--runs-per-round", "5", "--warmup", "0", "--background", "--deferred-floor", "--in-calls",
                           "--variants", "--rules-floor", "--json"], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    s = json.loads(done.stdout)
    assert s["rounds"] == 2 and s["runs_per_round"] == 5
    arms = {"empty", "processor", "floor", "background", "deferred_floor", "rules_floor", "no_taint", "bare"}
    assert set(s["over_sdk"]) == arms == set(s["ratio_of_totals"]) == set(s["added_us_per_span"])
    # the processor arms (the policy's variants too) are also read against the floor, round by round
    assert set(s["over_floor"]) == {"processor", "background", "rules_floor", "no_taint", "bare"} == set(
        s["over_floor_us_per_span"])
    assert len(s["processor_over_rules_floor"]["rounds"]) == 2  # the processor against the rules' state too
    for x in (*s["over_sdk"].values(), *s["over_floor"].values()):
        assert len(x["rounds"]) == 2
        assert all(r > 0 for r in x["rounds"])
        assert x["range"][0] <= x["median"] <= x["range"][1]
    # every span kind of the mix was timed in place, the floor's calls the same way
    calls = s["in_calls"]
    assert {"start:invoke_agent", "end:invoke_agent", "end:chat", "end:execute_tool"} <= set(calls["processor"]["us_by_kind"])
    assert set(calls["floor"]["us_by_kind"]) == set(calls["processor"]["us_by_kind"])
    assert calls["floor"]["us_per_span"] > 0
    # each call also by its place in the run, and the places add up to every call's time (means)
    for arm in ("processor", "floor"):
        places = calls[arm]["us_a_run_by_place"]
        assert {"end:execute_tool create_claim", "end:chat, the run's first", "end:chat, a later one",
                "start:invoke_agent", "end:invoke_agent"} <= set(places)
        assert abs(sum(places.values()) - calls[arm]["us_a_run_by_mean"]) < 1e-6 * calls[arm]["us_a_run_by_mean"]
        assert {p.split(" ")[0].rstrip(",") for p in places} == set(calls[arm]["us_by_kind"])  # every place of a kind
    assert set(s["in_calls_gap_us_a_run"]) == set(calls["processor"]["us_a_run_by_place"])
    assert s["background_drain_ms"]["max"] >= 0


def test_overhead_takes_the_captured_pydantic_ai_mix_and_measures_cpu() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--workload", "pydantic-ai", "--rounds", "2",
                           "--runs-per-round", "3", "--warmup", "0", "--cpu", "3", "--gc-off", "--otel", "--json"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    s = json.loads(done.stdout)
    assert s["workload"] == "pydantic-ai" and set(s["over_floor"]) == {"processor"}
    assert set(s["cpu"]["over_sdk"]) == {"processor", "floor"} and set(s["cpu"]["over_floor"]) == {"processor"}
    collector = s["cpu"]["collector"]  # the collector's part of each arm's CPU, timed by gc.callbacks
    assert set(collector) == {"sdk", "processor", "floor"}
    assert all(0 <= g["share"] < 1 and g["tracked_objects"] > 1000 for g in collector.values())


def test_the_floor_compiled_with_mypyc_runs_beside_the_plain_floor() -> None:
    # built once into the cache outside the clone (keyed by the floor's source, Python and mypy)
    done = subprocess.run([sys.executable, str(SCRIPT), "--workload", "tool-heavy", "--rounds", "2",
                           "--runs-per-round", "3", "--warmup", "0", "--compiled-floor", "--json"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    s = json.loads(done.stdout)
    assert s["compiled_floor_module"].endswith((".so", ".pyd"))  # native code, not the source beside it
    assert {"processor", "compiled_floor"} == set(s["over_floor"]) and "compiled_floor" in s["over_sdk"]
    assert len(s["over_floor"]["compiled_floor"]["rounds"]) == 2


def test_the_footprint_arms_make_the_same_calls_into_one_function_or_into_210(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the arm pair is only worth its figure if the calls differ in where their code is, not in what
    # they do: native functions of one shape, distinct ones a run against one
    done = subprocess.run([sys.executable, str(SCRIPT), "--workload", "tool-heavy", "--rounds", "2",
                           "--runs-per-round", "3", "--warmup", "0", "--footprint", "--json"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    s = json.loads(done.stdout)
    assert {"processor", "footprint_hot", "footprint_spread"} == set(s["over_floor"])
    assert len(s["footprint_spread_over_hot"]["rounds"]) == 2
    monkeypatch.syspath_prepend(str(SCRIPT.parent))
    import _footprint

    compiled = _footprint.functions()  # built by the run above, into the cache outside the clone
    assert len(compiled) == _footprint.FUNCTIONS == 210
    assert all(type(f).__name__ == "builtin_function_or_method" for f in compiled)  # native code
    spread = _footprint.FootprintFloor(compiled, spread=True)
    hot = _footprint.FootprintFloor(compiled, spread=False)
    assert len({id(f) for g in spread.groups for f in g}) == 210 and len({id(f) for g in hot.groups for f in g}) == 1
    assert [len(g) for g in spread.groups] == [len(g) for g in hot.groups] == [_footprint.CALLS_A_SPAN] * 14
    assert {f({"gen_ai.tool.name": "x"}, 0) for f in compiled} == {0}  # the same outcome in every one
    assert compiled[5]({"k5": 1}, 0) == 6  # each its own constants


def test_every_arm_runs_alone_for_the_instruction_count() -> None:
    for arm in ("sdk", "processor", "floor", "compiled_floor", "footprint_hot", "footprint_spread"):  # under valgrind
        done = subprocess.run([sys.executable, str(SCRIPT), "--callgrind-arm", arm, "--runs-per-round", "3"],
                              capture_output=True, text=True, timeout=180, check=False)  # a first build: ~20-40 s
        assert done.returncode == 0, done.stderr[-2000:]


def test_overhead_says_what_it_needs() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--rounds", "1"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 2
    assert "--rounds must be >= 2" in done.stderr


def test_the_floor_with_the_rules_state_keeps_what_a_later_turn_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    # the arm is only worth its figure if it does the work it names: conversations bound, bounded,
    # and a finished run's writes and tool results handed to its conversation
    monkeypatch.syspath_prepend(str(SCRIPT.parent))
    import _rules_floor
    import _workloads as wl

    workload = wl.make_workload("pydantic-ai")  # a conversation spans three runs
    floor = _rules_floor.RulesFloor()
    arm = wl.Arm("rules_floor", floor, workload)
    for run in workload.prepare(range(6)):
        workload.emit(arm.tracer, run)
    arm.shutdown()
    assert floor.runs == 6 and len(floor.conversations) == 2
    for conv in floor.conversations.values():
        assert len(conv["writes"]) == 3  # one write a run, keyed
        unread = conv["unread"]
        assert len(unread["results"]) == len(unread["tools"]) == len(unread["span_ids"]) > 3 * 4
        assert all(isinstance(r, str) and r for r in unread["results"])
    monkeypatch.setattr(_rules_floor, "MAX_CONVERSATIONS", 2)
    assert floor.conversation("a") is not floor.conversation("b") and len(floor.conversations) == 2
    assert floor.conversation(None) is None and list(floor.conversations) == ["a", "b"]


def test_the_objects_an_arm_makes_are_its_calls_into_the_allocators(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    # callgrind names a function once, then by its id (one table for fn= and cfn=); a call's count
    # is the first number of the calls= line after its cfn=
    monkeypatch.syspath_prepend(str(SCRIPT.parent))
    import _callgrind

    out = tmp_path / "callgrind.out"
    out.write_text("\n".join([
        "events: Ir", "fl=(1) Objects/obmalloc.c", "fn=(1) _PyObject_Malloc", "0 40",
        "fn=(2) PyList_New", "0 10", "cfn=(1)", "calls=30 0", "0 400",
        "fn=(3) CPyDef_engine___Engine___end", "0 12", "cfn=(1)", "calls=12 0", "0 160",
        "cfn=(4) _PyObject_GC_Link", "calls=5 0", "0 50", "cfn=(2)", "calls=7 0", "0 90",
        "fn=(4)", "0 5", "cfn=_PyObject_GC_Link", "calls=1 0", "0 9", ""]))
    assert _callgrind.calls_into(out, {"_PyObject_Malloc", "_PyObject_GC_Link"}) == {
        "_PyObject_Malloc": 42, "_PyObject_GC_Link": 6}
    assert _callgrind.objects_made(out, 3) == {"objects": 14.0, "tracked by the collector": 2.0}
    out.write_text("events: Ir\nfn=(1) main\ncfn=(2) malloc\ncalls=9 0\n0 1\n")
    assert _callgrind.objects_made(out, 1) == {}  # none of CPython's allocators seen: nothing claimed
