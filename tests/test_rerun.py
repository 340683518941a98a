"""``otel-agenteval rerun`` end to end: a real pydantic-ai agent (scripted model) recorded live,
then rerun unchanged and as candidates that skip a check or write twice, through the command."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("pydantic_ai")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from pydantic_ai.models.instrumented import InstrumentationSettings  # noqa: E402
from rerun_fixtures import support  # noqa: E402

from otel_agenteval.cli.main import main  # noqa: E402
from otel_agenteval.replay import replay  # noqa: E402
from otel_agenteval.replay.write import OTLPJsonLinesExporter  # noqa: E402


def _record(path: Path, n: int, include_content: bool = True, variant: str = "baseline") -> Path:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OTLPJsonLinesExporter(path)))
    agent = support.build(variant, InstrumentationSettings(tracer_provider=provider, include_content=include_content))
    for i in range(n):
        agent.run_sync(f"Please refund {i % 7 + 1}.5 for order {1000 + i}.")
    provider.shutdown()
    return path


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("rerun")
    (d / "policy.yaml").write_text(yaml.safe_dump(support.POLICY))
    return {"traces": _record(d / "live.jsonl", 100), "few": _record(d / "few.jsonl", 3),
            "parallel": _record(d / "parallel.jsonl", 3, variant="parallel"),
            "policy": d / "policy.yaml", "dir": d}


def _rerun(recorded: dict[str, Path], agent: str, *extra: str, traces: str = "traces") -> tuple[int, dict[str, Any]]:
    out = recorded["dir"] / "report.json"
    support.CALLS.clear()
    code = main(["rerun", str(recorded[traces]), "--agent", f"rerun_fixtures.support:{agent}",
                 "--policy", str(recorded["policy"]), "--format", "json", "-o", str(out), *extra])
    assert support.CALLS == [], "a tool really ran during the rerun"
    return code, json.loads(out.read_text())


def test_an_unchanged_agent_reruns_every_conversation_on_the_same_path(recorded: dict[str, Path]) -> None:
    code, doc = _rerun(recorded, "baseline")
    assert (code, doc["summary"]["conversations"], doc["summary"]["counts"]["identical"]) == (0, 100, 100)
    assert doc["summary"]["identical_share"] == 1.0
    assert doc["summary"]["steps"] == {"old": 300, "new": 300}


def test_a_candidate_that_skips_the_check_diverges_at_that_step(recorded: dict[str, Path]) -> None:
    code, doc = _rerun(recorded, "skip_check")
    assert doc["summary"]["counts"]["diverged"] == 100 and doc["summary"]["divergence_steps"] == {"2": 100}
    # the write it tried (not executed: the recording has no answer) had no confirmation: critical, as live
    assert code == 1 and doc["summary"]["violations_new"] == {"write_without_confirmation": 100}
    first = doc["conversations"][0]["divergence"]
    assert (first["kind"], first["recorded"]["tool"], first["new"]["tool"]) == ("other_tool", "ask_user_confirmation",
                                                                              "issue_refund")
    assert {c["divergence"]["new"]["tool"] for c in doc["conversations"]} == {"issue_refund"}


@pytest.mark.parametrize(("agent", "step", "kind", "new"), [("wrong_amount", 3, "other_arguments", "issue_refund"),
                                                             ("answer_early", 2, "not_made", None)])
def test_other_arguments_and_a_call_never_made_are_divergences(recorded: dict[str, Path], agent: str, step: int,
                                                               kind: str, new: str | None) -> None:
    code, doc = _rerun(recorded, agent, traces="few")
    d = doc["conversations"][0]["divergence"]
    assert doc["summary"]["divergence_steps"] == {str(step): 3}
    assert (d["kind"], d["recorded"]["tool"], (d["new"] or {}).get("tool")) == (kind, ["lookup_order", "ask_user_confirmation", "issue_refund"][step - 1], new)
    assert "arguments" not in d["recorded"] and d["recorded"]["arguments_hash"]  # values only with --show-arguments


def test_calls_recorded_in_parallel_match_in_either_order(recorded: dict[str, Path]) -> None:
    """Two tool calls of one model response run concurrently: the recording's order is not the agent's."""
    code, doc = _rerun(recorded, "parallel_reversed", traces="parallel")
    assert doc["summary"]["counts"]["identical"] == 3, doc["conversations"][0]
    code, doc = _rerun(recorded, "baseline", traces="parallel")  # the same calls, one after the other: same path
    assert doc["summary"]["counts"]["identical"] == 3


def test_a_candidate_that_writes_twice_gets_duplicate_write_and_fails_the_gate(recorded: dict[str, Path]) -> None:
    code, doc = _rerun(recorded, "write_twice")
    # as live: the second write repeats the first, and the one confirmation was spent on the first
    assert code == 1 and doc["summary"]["violations_new"] == {"duplicate_write": 100, "write_without_confirmation": 100}
    d = doc["conversations"][0]["divergence"]
    assert (d["step"], d["kind"], d["recorded"], d["new"]["tool"]) == (4, "not_recorded", None, "issue_refund")


def test_stub_mode_continues_past_the_divergence_and_marks_it(recorded: dict[str, Path]) -> None:
    out = recorded["dir"] / "candidate.jsonl.gz"
    code, doc = _rerun(recorded, "skip_check", "--on-divergence", "stub", "--stubs", "rerun_fixtures.stubs",
                       "--traces-out", str(out))
    assert doc["summary"]["counts"]["stubbed"] == 100
    c = doc["conversations"][0]
    assert (c["stubbed_calls"], c["steps"]["new"], c["divergence"]["step"]) == (1, 2, 2)
    assert doc["summary"]["violations_new"] == {"write_without_confirmation": 100}
    lines = gzip.decompress(out.read_bytes()).decode()
    assert lines.count('"stubbed"') == 100
    assert len(replay([out]).trajectories) == 100  # the candidate's runs read back like any recording


def test_capture_off_is_reported_as_not_rerunnable_with_the_setting(recorded: dict[str, Path]) -> None:
    recorded["dark"] = _record(recorded["dir"] / "dark.jsonl", 2, include_content=False)
    code, doc = _rerun(recorded, "baseline", traces="dark")
    assert doc["summary"]["counts"]["not_rerunnable"] == 2
    assert "pydantic-ai" in doc["conversations"][0]["detail"] and "include_content" in doc["conversations"][0]["detail"]


STUB = ("--on-divergence", "stub", "--stubs", "rerun_fixtures.stubs")  # a loop goes on past the recording only stubbed


@pytest.mark.parametrize(("agent", "status", "extra"), [("raises", "raised", ()), ("hangs", "timed_out", ()),
                                                       ("loops", "looped", STUB)])
def test_a_failing_agent_is_reported_and_the_rerun_goes_on(recorded: dict[str, Path], agent: str, status: str,
                                                           extra: tuple[str, ...]) -> None:
    code, doc = _rerun(recorded, agent, "--timeout", "0.2", "--max-steps", "5", *extra, traces="few")
    assert [c["status"] for c in doc["conversations"]] == [status] * 3


def test_a_timed_out_agent_is_abandoned_and_its_thread_ends(recorded: dict[str, Path]) -> None:
    import threading
    import time

    code, doc = _rerun(recorded, "slow_loop", "--timeout", "0.2", "--max-steps", "100000", *STUB, traces="parallel")
    assert [c["status"] for c in doc["conversations"]] == ["timed_out"] * 3
    time.sleep(0.2)
    ours = {f"rerun {c['conversation_id']}" for c in doc["conversations"]}  # ("hangs" above sleeps on, unasked)
    assert [t.name for t in threading.enumerate() if t.name in ours] == []


def test_jobs_run_in_processes_with_the_same_answer(recorded: dict[str, Path], capfd: pytest.CaptureFixture[str]) -> None:
    """``--jobs 2``: worker processes, and the JSON on standard output is the report alone (a
    worker's violation log lines would land there too if it logged them)."""
    assert main(["rerun", str(recorded["few"]), "--agent", "rerun_fixtures.support:skip_check", "--policy",
                 str(recorded["policy"]), "--format", "json", "--jobs", "2"]) == 1
    doc = json.loads(capfd.readouterr().out)
    assert doc["summary"]["counts"]["diverged"] == 3 and doc["summary"]["divergence_steps"] == {"2": 3}


def test_a_bad_agent_name_is_a_usage_error(recorded: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rerun", str(recorded["few"]), "--agent", "rerun_fixtures.support:nope"]) == 2
    assert "invalid --agent" in capsys.readouterr().err


def test_the_html_report_reads_right_in_a_real_browser(recorded: dict[str, Path]) -> None:
    """``--format html`` opened in headless Chromium (as tests/test_scoring_html.py drives it)."""
    from test_scoring_html import CHROMIUM_ARGS, _chromium

    exe = _chromium()
    from playwright.sync_api import sync_playwright

    page_file = recorded["dir"] / "report.html"
    assert main(["rerun", str(recorded["few"]), "--agent", "rerun_fixtures.support:write_twice", "--policy",
                 str(recorded["policy"]), "--format", "html", "-o", str(page_file)]) == 1
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        page = browser.new_page()
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(page_file.as_uri())
        gate = page.inner_text("#gate")
        rows = page.locator("#conversations tr").count()
        new = page.inner_text("#violations_new")
        bar = page.locator("#histogram .bar").first.bounding_box()
        browser.close()
    assert gate.lower() == "fail: the candidate adds 6 critical violation(s)"  # shown upper-case (.badge)
    assert (rows, new, errors) == (4, "duplicate_write 3, write_without_confirmation 3", [])
    assert bar is not None and bar["width"] > 100  # the histogram's bar is drawn


def test_the_worked_example_on_the_demo_says_what_docs_rerun_md_says(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """docs/rerun.md's example, run: the demo's 100 runs (seed 7) and examples/rerun/candidate.py."""
    root = Path(__file__).resolve().parent.parent
    traces = tmp_path / "demo.jsonl.gz"
    assert main(["demo", "--runs", "100", "--no-serve", "--quiet", "--traces-out", str(traces)]) == 0
    capsys.readouterr()
    assert main(["rerun", str(traces), "--agent", str(root / "examples/rerun/candidate.py") + ":agent",
                 "--policy", str(root / "examples/policies/support-agent.yaml")]) == 0
    table = capsys.readouterr().out
    assert "identical 56  diverged 22  raised 8" in table and "identical 56  diverged 22  raised 8" in (
        root / "docs/rerun.md").read_text()


def test_jobs_need_what_pickles(recorded: dict[str, Path]) -> None:
    from otel_agenteval.rerun import rerun

    with pytest.raises(ValueError, match="the agent is sent to worker processes"):
        rerun([recorded["few"]], lambda turn, tools: None, jobs=2)


def test_input_it_cannot_read_is_exit_2_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"resourceSpans": 5}\n')
    assert main(["rerun", str(bad), "--agent", "rerun_fixtures.support:baseline"]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:1: resourceSpans is a JSON int, expected a list" in err and f"no agent run could be read from {bad}" in err
    assert main(["rerun", str(tmp_path / "missing.jsonl"), "--agent", "rerun_fixtures.support:baseline"]) == 2
    assert "missing.jsonl: cannot read" in capsys.readouterr().err
