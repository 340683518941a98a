"""Pieces of runs, each a trace of its own (issue 39): OpenLLMetry-JS 0.27 with LangGraph.js sends
every span as the root of its own trace (no context across LangChain's callbacks). The graph's
workflow span starts first, ends last and holds every other piece's window, so every front door
puts the run back together (engine/fragments/) and counts it in
``agenteval_fragments_stitched_total{scope}``. Two runs at once cannot be told apart: their
pieces stay apart, as fragments, counted with the reason in
``agenteval_fragments_unstitched_total{scope,reason}``; so are pieces past the held bound.
Captures that read right, and a model gateway's lone model calls, hold and count nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags
from scenario import POLICY, Run, live, policy_for, replayed
from serve_support import post, scrape, serve_process, settled, total, value, wait_until
from structlog.testing import CapturingLogger
from test_captured_serve import POLICY as POLICY_YAML
from test_captured_serve import served_figures
from test_captured_shapes import CASES, GATEWAYS, SPANS, expected_of, play_live, play_spans, sdk_span

from otel_agenteval.reading import unread
from otel_agenteval.replay import iter_spans, replay

NAME = "langgraphjs-1.7.3_openllmetry-js-0.27.0.otlp.json"
FRAGMENTED = SPANS / NAME
SCOPE = "@traceloop/instrumentation-langchain"
SPAN_COUNT = 35  # every span of the file: 4 tool calls, 5 model calls, 26 chains, each a trace
WANT = expected_of(CASES[NAME])  # one run: 4 tool calls (1 error), 5 model calls, the duplicate


def capture() -> list[ReadableSpan]:
    return [sdk_span(r) for r in iter_spans([FRAGMENTED])]


def copy_of(spans: list[ReadableSpan], shift_ns: int, salt: int) -> list[ReadableSpan]:
    """The capture again, ``shift_ns`` later, under new trace and span ids: a second run of the app."""
    out = []
    for s in spans:
        ctx = SpanContext(s.context.trace_id ^ salt, s.context.span_id ^ salt, False, TraceFlags(1))
        out.append(ReadableSpan(name=s.name, context=ctx, parent=None, resource=s.resource,
                                attributes=dict(s.attributes or {}), events=list(s.events), kind=s.kind,
                                status=s.status, start_time=(s.start_time or 0) + shift_ns,
                                end_time=(s.end_time or 0) + shift_ns, instrumentation_scope=s.instrumentation_scope))
    return out


def sample(run: Run, name: str, **labels: str) -> float | None:
    return run.registry.get_sample_value(name, labels)


# --- one run, put back together in every front door -----------------------------------------------
def test_processor_reads_one_run_and_counts_the_pieces_stitched(monkeypatch: Any) -> None:
    logs = CapturingLogger()
    monkeypatch.setattr(unread, "log", logs)
    run = play_live(FRAGMENTED)
    assert live(run) == WANT
    assert sample(run, "agenteval_fragments_stitched_total", scope=SCOPE) == SPAN_COUNT
    assert run.processor.engine.stats["fragmented"] == {} and run.processor.engine.fragments.size == 0
    assert sum(run.processor.engine.stats["spans"].values()) == SPAN_COUNT  # a held piece counted once, when played
    assert [c for c in logs.calls if c.args[0].startswith("agenteval.fragmented")] == []


def replay_cli(*args: str) -> str:
    """``otel-agenteval replay`` as a user runs it (a process: the CLI configures logging for itself)."""
    got = subprocess.run([sys.executable, "-m", "otel_agenteval", "replay", "--quiet", *args], capture_output=True,
                         text=True, timeout=60)
    assert got.returncode in (0, 1), got.stderr
    return got.stdout


def test_replay_reads_one_run_and_says_it_stitched() -> None:
    assert replayed(FRAGMENTED) == WANT
    assert (f"stitched fragments (pieces of runs, a trace each, put back together by their time windows; by "
            f"instrumentation scope): {SCOPE} {SPAN_COUNT}") in replay_cli(str(FRAGMENTED))
    doc = json.loads(replay_cli("--format", "json", str(FRAGMENTED)))
    assert (doc["fragmented_spans"], doc["stitched_fragments"], doc["unstitched_fragments"]) == (
        {}, {SCOPE: SPAN_COUNT}, {})
    assert doc["summary"]["runs"] == 1


def test_serve_reads_one_run_and_counts_the_pieces_stitched(tmp_path: Path) -> None:
    spans = capture()
    traces = len({s.context.trace_id for s in spans})
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY_YAML)
    with serve_process("--grace", "0.2", "--fragment-linger", "0.3", "--policy", str(policy),
                       "--no-log-violations") as (_, info):
        status, _, body = post(f"http://127.0.0.1:{info['http_port']}/v1/traces",
                               encode_spans(spans).SerializeToString(), {"Content-Type": "application/x-protobuf"})
        assert status == 200, body
        wait_until(settled(info["metrics_port"], traces), what="every trace played")
        s = scrape(info["metrics_port"])
    assert value(s, "agenteval_fragments_stitched_total", scope=SCOPE) == SPAN_COUNT
    assert total(s, "agenteval_fragmented_spans_total") == 0
    assert served_figures(s, "support-svc") == {"trajectories": WANT["trajectories"], "tool_calls": WANT["tool_calls"],
                                                "tokens": WANT["tokens"][0], "duplicate_write": 1.0}


# --- two runs at once: not stitched, counted with why ---------------------------------------------
OVERLAP_NS = 100_000_000  # the second run starts 100 ms into the first (which lasts 567 ms)


def two_runs_at_once() -> list[ReadableSpan]:
    spans = capture()
    return spans + copy_of(spans, OVERLAP_NS, 0x5A5A)


def test_two_runs_at_once_stay_apart_and_say_why_in_the_processor() -> None:
    run = play_spans(two_runs_at_once(), Run(policy=POLICY))
    assert sample(run, "agenteval_fragments_unstitched_total", scope=SCOPE, reason="concurrent") == 2 * SPAN_COUNT
    assert sample(run, "agenteval_fragmented_spans_total", scope=SCOPE) == 2 * SPAN_COUNT  # as before stitching
    assert sample(run, "agenteval_fragments_stitched_total", scope=SCOPE) is None
    assert len(run.trajectories) == 8  # each tool call a run of its own, as the pieces came


def test_two_runs_at_once_stay_apart_in_replay_and_serve(tmp_path: Path) -> None:
    spans = two_runs_at_once()
    path = tmp_path / "two.pb"
    path.write_bytes(encode_spans(spans).SerializeToString())
    got = replay([path], POLICY).engine_stats
    assert (got["fragments_unstitched"], got["fragments_stitched"], got["fragmented"]) == (
        {(SCOPE, "concurrent"): 2 * SPAN_COUNT}, {}, {SCOPE: 2 * SPAN_COUNT})
    with serve_process("--grace", "0.2", "--fragment-linger", "0.3", "--no-log-violations") as (_, info):
        status, _, body = post(f"http://127.0.0.1:{info['http_port']}/v1/traces",
                               encode_spans(spans).SerializeToString(), {"Content-Type": "application/x-protobuf"})
        assert status == 200, body
        wait_until(settled(info["metrics_port"], 2 * SPAN_COUNT), what="every trace played")
        s = scrape(info["metrics_port"])
    assert value(s, "agenteval_fragments_unstitched_total", scope=SCOPE, reason="concurrent") == 2 * SPAN_COUNT
    assert value(s, "agenteval_fragmented_spans_total", scope=SCOPE) == 2 * SPAN_COUNT


def test_runs_one_after_the_other_are_each_put_back_together() -> None:
    spans = capture()
    run = play_spans(spans + copy_of(spans, 600_000_000, 0x5A5A), Run(policy=POLICY))
    assert len(run.trajectories) == 2 and [t.llm_calls for t in run.trajectories] == [5, 5]
    assert sample(run, "agenteval_fragments_stitched_total", scope=SCOPE) == 2 * SPAN_COUNT


# --- the held pieces are bounded, and what the bound drops is counted -----------------------------
def test_pieces_past_the_bound_are_played_as_they_came_and_counted() -> None:
    run = Run(policy=POLICY)
    run.processor.engine.fragments.max_pieces = 5
    play_spans(capture(), run)
    assert sample(run, "agenteval_fragments_unstitched_total", scope=SCOPE, reason="buffer_full") == SPAN_COUNT
    assert sample(run, "agenteval_fragments_stitched_total", scope=SCOPE) is None
    assert run.processor.engine.fragments.size == 0


# --- captures that read right, and a gateway, hold and count nothing ------------------------------
@pytest.mark.parametrize("name", sorted([*CASES, *GATEWAYS]))
def test_captures_that_read_right_and_a_gateway_are_not_fragments(name: str) -> None:
    path: Path = SPANS / name
    policy = policy_for(CASES.get(name, {}).get("tool_prefix", ""))
    stats = play_live(path, policy).processor.engine.stats
    replayed_stats = replay([path], policy).engine_stats
    assert stats["fragmented"] == {} and replayed_stats["fragmented"] == {}
    assert stats["fragments_unstitched"] == {} and replayed_stats["fragments_unstitched"] == {}
    if name != NAME:
        assert stats["fragments_stitched"] == {} and replayed_stats["fragments_stitched"] == {}


# --- the call that threw: named by the piece around it, when one answer fits -----------------------
def _tools(spans: list[ReadableSpan]) -> list[str]:
    return [step.tool for step in play_spans(spans, Run(policy=POLICY)).trajectories[0].steps]


def test_the_failed_call_is_named_by_the_piece_around_it_only_when_one_answer_fits() -> None:
    spans = capture()
    assert _tools(spans) == ["lookup_order", "create_claim", "create_claim", "issue_refund"]
    failed = next(s for s in spans if s.name.startswith("execute_tool") and not s.status.is_ok)
    around = min((s for s in spans if s.name == "workflow RunnableSequence" and s.start_time <= failed.start_time
                  and s.end_time >= failed.end_time), key=lambda s: s.end_time - s.start_time)
    attrs = dict(around.attributes)
    inp, out = json.loads(attrs["traceloop.entity.input"]), json.loads(attrs["traceloop.entity.output"])
    call = inp["messages"][-1]["kwargs"]["tool_calls"][0]
    # the same arguments asked of another tool in the same turn, and answered: which one threw cannot be told
    inp["messages"][-1]["kwargs"]["tool_calls"].append({**call, "name": "hold_refund", "id": "call_9"})
    out["messages"].append({**out["messages"][0], "kwargs": {**out["messages"][0]["kwargs"], "name": "hold_refund",
                                                             "tool_call_id": "call_9"}})
    attrs.update({"traceloop.entity.input": json.dumps(inp), "traceloop.entity.output": json.dumps(out)})
    around._attributes = attrs
    assert _tools(spans)[-1] == "DynamicStructuredTool"
