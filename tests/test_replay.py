"""Replay: recorded files give the trajectories and violations the live processor gave.

Spans come from the real SDK (``trace_files.record_scenario``), are seen live by a
``TrajectoryProcessor`` and exported in memory, written out in each file format, and replayed.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import trace_files as tf
from conftest import ISSUE_POLICY

from otel_agenteval import Policy, Trajectory, Violation
from otel_agenteval.cli.main import main
from otel_agenteval.replay import replay
from otel_agenteval.replay.feed import GRACE_NS


def view(t: Trajectory) -> dict[str, Any]:
    """What a trajectory says, minus the key (a span id live, the trace id end-only)."""
    return {
        "agent": t.agent_name, "service": t.service_name, "trace": t.trace_hex, "outcome": t.outcome,
        "conversation": t.conversation_id, "started_ns": t.started_ns, "duration_s": t.duration_s,
        "steps": [(s.tool, s.arguments, s.ok, s.error_type, s.call_id, s.raw_result, s.start_ns, s.end_ns)
                  for s in t.steps],
        "llm_calls": t.llm_calls, "tokens": (t.input_tokens, t.output_tokens), "cost": round(t.cost_usd, 9),
        "root_attributes": dict(t.root_attributes),
    }


def microseconds(expected: list[dict[str, Any]], got: list[dict[str, Any]]) -> None:
    """to_json writes times as ISO strings with microseconds, via a float: allow 1 us either way."""
    def near(a: int, b: int) -> bool:
        return abs(a // 1000 - b // 1000) <= 1

    for e, g in zip(expected, got):
        assert near(e["started_ns"], g["started_ns"]) and abs(e["duration_s"] - g["duration_s"]) < 3e-6
        g["started_ns"], g["duration_s"] = e["started_ns"], e["duration_s"]
        if len(e["steps"]) == len(g["steps"]):
            for i, (es, gs) in enumerate(zip(e["steps"], g["steps"])):
                assert near(es[6], gs[6]) and near(es[7], gs[7])
                g["steps"][i] = (*gs[:6], es[6], es[7])


def vviews(vs: list[Violation]) -> list[dict[str, Any]]:
    return [v.model_dump() for v in vs]


@pytest.fixture
def live(make_processor: Any) -> tuple[Any, list[Any]]:
    return tf.recorded(make_processor, ISSUE_POLICY)


def test_scenario_finds_what_it_should(live: Any) -> None:
    h, _ = live
    assert [(v.rule, v.agent) for v in h.violations] == [
        ("write_retried_after_error", "support"), ("duplicate_write", "support"), ("budget_breach", "support")]
    assert [t.agent_name for t in h.trajectories] == ["support", "support", "support", "triage"]


SDK_FORMATS = ("sdk-json-objects", "sdk-json-list")


@pytest.mark.parametrize("fmt", sorted(tf.WRITERS))
def test_replay_equals_live(fmt: str, live: Any, tmp_path: Path) -> None:
    h, spans = live
    write, ext = tf.WRITERS[fmt]
    path = write(spans, tmp_path / f"traces{ext}")
    result = replay([path], Policy.from_yaml(ISSUE_POLICY))
    assert result.counts.spans == len(spans) and result.counts.rejected == 0
    expected, got = [view(t) for t in h.trajectories], [view(t) for t in result.trajectories]
    if fmt in SDK_FORMATS:
        microseconds(expected, got)
    assert got == expected
    assert vviews(result.violations) == vviews(h.violations)


def test_mixed_files_share_conversations(live: Any, tmp_path: Path) -> None:
    """A conversation spread over files of three formats: the duplicate write is still found."""
    h, spans = live
    cut = next(i for i, s in enumerate(spans) if s.name == "invoke_agent support") + 1  # after run 1
    a = tf.otlp_json_lines(spans[:cut], tmp_path / "a.jsonl.gz")
    b = tf.otlp_protobuf(spans[cut:cut + 3], tmp_path / "b.pb")
    c = tf.otlp_json_document(spans[cut + 3:], tmp_path / "c.json")
    result = replay([a, b, c], Policy.from_yaml(ISSUE_POLICY))
    assert [view(t) for t in result.trajectories] == [view(t) for t in h.trajectories]
    assert vviews(result.violations) == vviews(h.violations)
    assert result.counts.files == 3


def test_root_never_seen_finishes_incomplete(live: Any, tmp_path: Path) -> None:
    _, spans = live
    first_run = spans[:next(i for i, s in enumerate(spans) if s.name == "invoke_agent support")]  # root cut off
    result = replay([tf.otlp_json_lines(first_run, tmp_path / "cut.jsonl")], Policy.from_yaml(ISSUE_POLICY))
    assert [(t.outcome, len(t.steps)) for t in result.trajectories] == [("incomplete", 3)]
    assert result.engine_stats["replay"]["traces_end_only"] == 1


def test_held_spans_are_bounded(live: Any, tmp_path: Path) -> None:
    """Past the bound a trace falls back to end-only mode: still replayed, and counted."""
    h, spans = live
    path = tf.otlp_json_lines(spans, tmp_path / "t.jsonl")
    result = replay([path], Policy.from_yaml(ISSUE_POLICY), max_held_spans=3)
    stats = result.engine_stats["replay"]
    assert stats["traces_end_only"] >= 1 and stats["held_max"] == 3
    assert sorted(t.trace_hex for t in result.trajectories) == sorted(t.trace_hex for t in h.trajectories)
    assert [len(t.steps) for t in result.trajectories] == [len(t.steps) for t in h.trajectories]


def test_late_span_after_root_is_counted(live: Any, tmp_path: Path) -> None:
    """A child that ends past the grace after its root (GRACE_NS of span time) is late."""
    _, spans = live
    root_at = next(i for i, s in enumerate(spans) if s.name == "invoke_agent support")
    child = copy.copy(spans[root_at - 1])
    child._end_time = spans[root_at].end_time + 2 * GRACE_NS  # type: ignore[attr-defined]
    moved = [*spans[:root_at - 1], *spans[root_at:], child]
    result = replay([tf.sdk_json_objects(moved, tmp_path / "late.json")], Policy.from_yaml(ISSUE_POLICY))
    assert result.engine_stats["late"] == 1


def test_child_ending_just_after_its_root_belongs_to_the_run(live: Any, tmp_path: Path) -> None:
    """Issue 25: AutoGen + OpenInference end the agent's span a few ms after the run's root; the
    run keeps its steps (it does not lose them as late spans)."""
    h, spans = live
    root_at = next(i for i, s in enumerate(spans) if s.name == "invoke_agent support")
    child = copy.copy(spans[root_at - 1])
    child._end_time = spans[root_at].end_time + 5_000_000  # type: ignore[attr-defined]  # 5 ms after
    moved = [*spans[:root_at - 1], spans[root_at], child, *spans[root_at + 1:]]
    result = replay([tf.sdk_json_objects(moved, tmp_path / "late.json")], Policy.from_yaml(ISSUE_POLICY))
    assert result.engine_stats["replay"]["late"] == 0
    assert [len(t.steps) for t in result.trajectories] == [len(t.steps) for t in h.trajectories]


# --- the command ---------------------------------------------------------------------------------
@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    p = tmp_path / "policy.yaml"
    p.write_text(ISSUE_POLICY)
    return p


def test_cli_table_exit_1_on_critical(live: Any, tmp_path: Path, policy_file: Path, capsys: Any) -> None:
    _, spans = live
    path = tf.otlp_json_lines(spans, tmp_path / "t.jsonl")
    assert main(["replay", str(path), "--policy", str(policy_file)]) == 1
    out, err = capsys.readouterr()
    assert "CRITICAL duplicate_write  agent=support tool=create_claim" in out
    assert "WARNING  budget_breach" in out
    assert "runs" in out and "duplicate_write" in out
    assert f"input: 1 file, {-(-len(spans) // 5)} lines, {len(spans)} spans, 4 trajectories, 0 rejected, 0 late spans" in out
    assert "\r" not in err  # no progress bar when stderr is not a TTY


def test_cli_json(live: Any, tmp_path: Path, policy_file: Path, capsys: Any) -> None:
    h, spans = live
    path = tf.otlp_protobuf(spans, tmp_path / "t.pb.gz")
    assert main(["replay", str(path), "--policy", str(policy_file), "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["violations"] == [v.model_dump(mode="json") for v in h.violations]
    assert doc["summary"]["runs"] == 4 and doc["summary"]["critical_violations"] == 1
    batches = -(-len(spans) // 5)
    assert doc["input"] == {"files": 1, "lines": batches, "records": batches, "spans": len(spans), "rejected": 0,
                            "trajectories": 4, "late_spans": 0, "evicted": 0, "unfinished": 0}


def test_cli_exit_0_without_critical(live: Any, tmp_path: Path, policy_file: Path, capsys: Any) -> None:
    _, spans = live
    clean = [s for s in spans if s.context.trace_id in {spans[-1].context.trace_id, spans[-2].context.trace_id}]
    path = tf.sdk_json_objects(clean, tmp_path / "clean.json")
    assert main(["replay", str(path), "--policy", str(policy_file)]) == 0


def test_cli_bad_lines_reported_and_counted(live: Any, tmp_path: Path, policy_file: Path, capsys: Any) -> None:
    _, spans = live
    path = tf.otlp_json_lines(spans, tmp_path / "t.jsonl")
    lines = path.read_text().splitlines()
    lines.insert(2, '{"resourceSpans": [ truncated')
    path.write_text("\n".join(lines) + "\n")
    assert main(["replay", str(path), "--policy", str(policy_file)]) == 1
    out, err = capsys.readouterr()
    assert f"replay: rejected: {path}:3: not valid JSON" in err
    assert "1 rejected" in out
    assert main(["replay", str(path), "--policy", str(policy_file), "--strict"]) == 2
    out, err = capsys.readouterr()
    assert f"{path}:3: not valid JSON" in err and "--strict" in err


def test_cli_empty_file(tmp_path: Path, policy_file: Path, capsys: Any) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(["replay", str(empty), "--policy", str(policy_file), "--format", "json"]) == 2  # fails closed
    out, err = capsys.readouterr()
    assert out == "" and "replay: no span could be read from the input (1 file, 0 lines, 0 rejected)" in err
    assert main(["replay", str(empty), "--policy", str(policy_file), "--format", "json", "--allow-empty"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["input"]["spans"] == 0 and doc["summary"]["runs"] == 0
    rejected = tmp_path / "rejected.jsonl"
    rejected.write_text("{not json\n{nor this\n")
    assert main(["replay", str(rejected), "--policy", str(policy_file)]) == 2
    assert "(1 file, 2 lines, 2 rejected)" in capsys.readouterr().err


def test_cli_usage_errors(tmp_path: Path, policy_file: Path, capsys: Any) -> None:
    bad_policy = tmp_path / "bad.yaml"
    bad_policy.write_text("tools:\n  create_claim: {wirte: true}\n")
    empty = tmp_path / "e.jsonl"
    empty.write_text("")
    assert main(["replay", str(empty), "--policy", str(bad_policy)]) == 2
    assert "tools.create_claim.wirte: unknown key" in capsys.readouterr().err
    assert main(["replay", str(tmp_path / "missing.jsonl"), "--policy", str(policy_file)]) == 2
    assert "missing.jsonl: no such file" in capsys.readouterr().err
    zst = tmp_path / "t.jsonl.zst"
    zst.write_bytes(b"\x28\xb5\x2f\xfd" + b"\0" * 20)
    assert main(["replay", str(zst), "--policy", str(policy_file)]) == 2
    assert "zstd-compressed" in capsys.readouterr().err
    assert main(["replay", str(empty)]) == 2  # no policy needed (writes inferred); an empty input is still an error
    assert "no span could be read from the input" in capsys.readouterr().err


def test_cli_reads_standard_input(live: Any, tmp_path: Path, policy_file: Path, capsys: Any,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    _, spans = live
    data = tf.otlp_json_lines(spans, tmp_path / "t.jsonl.gz").read_bytes()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BufferedReader(io.BytesIO(data))))
    assert main(["replay", "-", "--policy", str(policy_file), "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["input"]["spans"] == len(spans) and doc["summary"]["runs"] == 4


# --- a real framework: pydantic-ai with a scripted model --------------------------------------
PYDANTIC_POLICY = """\
tools:
  create_claim: {write: true}
agents:
  support_agent: {budget: {max_llm_calls: 3}}
pricing:
  fake-model: {input_per_mtok: 2.5, output_per_mtok: 10.0}
outcome:
  success_when: [create_claim]
"""


def pydantic_ai_runs(make_processor: Any) -> tuple[Any, list[Any]]:
    """Two runs of one conversation: a ModelRetry write then its fix, then the same write again."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from pydantic_ai import Agent, ModelRetry
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.usage import RequestUsage

    h = make_processor(PYDANTIC_POLICY)
    exporter = InMemorySpanExporter()
    h.provider.add_span_processor(SimpleSpanProcessor(exporter))
    script: list[list[tuple[str, dict[str, str]]]] = []

    def model(messages: Any, info: Any) -> ModelResponse:
        usage = RequestUsage(input_tokens=100, output_tokens=10)
        if not script:
            return ModelResponse(parts=[TextPart("done")], usage=usage, model_name="fake-model")
        calls = script.pop(0)
        return ModelResponse(parts=[ToolCallPart(n, a, tool_call_id=f"c{len(script)}_{i}")
                                    for i, (n, a) in enumerate(calls)], usage=usage, model_name="fake-model")

    agent = Agent(FunctionModel(model, model_name="fake-model"), name="support_agent")
    agent.instrument = InstrumentationSettings(tracer_provider=h.provider)

    @agent.tool_plain
    def lookup_order(order_id: str) -> dict[str, str]:
        """Look up an order."""
        return {"order_id": order_id, "status": "delivered"}

    @agent.tool_plain
    def create_claim(order_id: str, reason: str) -> str:
        """Create a claim."""
        if reason == "damaged":
            raise ModelRetry("reason must be damaged_in_transit")
        return "CLM-1"

    ok = {"order_id": "88120", "reason": "damaged_in_transit"}
    script[:] = [[("lookup_order", {"order_id": "88120"})], [("create_claim", {"order_id": "88120", "reason": "damaged"})],
                 [("create_claim", ok)]]
    agent.run_sync("my order arrived damaged", conversation_id="conv-9")
    script[:] = [[("create_claim", ok)]]
    agent.run_sync("did it work?", conversation_id="conv-9")
    h.provider.force_flush()
    return h, list(exporter.get_finished_spans())


@pytest.mark.parametrize("fmt", ["otlp-json-lines", "otlp-protobuf-be32", "sdk-json-objects"])
def test_pydantic_ai_replay_equals_live(fmt: str, make_processor: Any, tmp_path: Path) -> None:
    h, spans = pydantic_ai_runs(make_processor)
    assert sorted({v.rule for v in h.violations}) == ["budget_breach", "duplicate_write"]
    write, ext = tf.WRITERS[fmt]
    result = replay([write(spans, tmp_path / f"t{ext}")], Policy.from_yaml(PYDANTIC_POLICY))
    expected, got = [view(t) for t in h.trajectories], [view(t) for t in result.trajectories]
    if fmt.startswith("sdk-"):
        microseconds(expected, got)
    assert got == expected
    assert vviews(result.violations) == vviews(h.violations)


def test_two_local_roots_open_at_once_in_one_trace(make_processor: Any, tmp_path: Path) -> None:
    """Two entry spans of one trace (remote parent) overlap: each root plays only its own spans."""
    from conftest import ns
    from opentelemetry import trace
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanContext, SpanKind, TraceFlags

    h = make_processor(ISSUE_POLICY)
    exporter = InMemorySpanExporter()
    h.provider.add_span_processor(SimpleSpanProcessor(exporter))
    remote = trace.set_span_in_context(trace.NonRecordingSpan(
        SpanContext(trace_id=0xABC, span_id=0xDEF, is_remote=True, trace_flags=TraceFlags(1))))
    s1 = h.tracer.start_span("POST /a", context=remote, kind=SpanKind.SERVER, start_time=ns(0))
    s2 = h.tracer.start_span("POST /b", context=remote, kind=SpanKind.SERVER, start_time=ns(0.5))
    a1, a2 = h.agent("support", 1.0, parent=s1), h.agent("triage", 1.5, parent=s2)
    h.tool(a1, "create_claim", {"order_id": "1"}, at=2.0)
    h.tool(a2, "lookup_order", {"order_id": "2"}, at=2.5)
    h.tool(a2, "lookup_order", {"order_id": "3"}, at=3.5)
    h.end(a1, 4.0)
    s1.end(end_time=ns(4.5))
    h.tool(a2, "create_claim", {"order_id": "1"}, at=5.0)
    h.end(a2, 6.0)
    s2.end(end_time=ns(6.5))
    spans = list(exporter.get_finished_spans())
    assert len({s.context.trace_id for s in spans}) == 1
    for fmt in ("otlp-json-lines", "sdk-json-objects"):
        write, ext = tf.WRITERS[fmt]
        result = replay([write(spans, tmp_path / f"t{ext}")], Policy.from_yaml(ISSUE_POLICY))
        assert [(t.agent_name, [s.tool for s in t.steps], t.outcome) for t in result.trajectories] == [
            (t.agent_name, [s.tool for s in t.steps], t.outcome) for t in h.trajectories] == [
            ("support", ["create_claim"], "success"), ("triage", ["lookup_order", "lookup_order", "create_claim"],
                                                       "success")]
        assert result.engine_stats["late"] == 0 and result.engine_stats["replay"]["traces_end_only"] == 0


def test_cli_verbose_logs_each_violation_and_quiet_does_not(live: Any, tmp_path: Path, policy_file: Path) -> None:
    import subprocess
    import sys

    _, spans = live
    path = tf.otlp_json_lines(spans, tmp_path / "t.jsonl")

    def stderr(*flags: str) -> str:
        cmd = [sys.executable, "-m", "otel_agenteval.cli", "replay", str(path), "--policy", str(policy_file), *flags]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert done.returncode == 1, done.stderr
        return done.stderr

    assert "agenteval.violation: create_claim called again" in stderr("-v")
    assert "agenteval.violation" not in stderr()
