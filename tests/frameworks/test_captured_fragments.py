"""Never silently blind, by shape (issue 39): an instrumentation that does not propagate context
sends each piece of a run as a trace of its own (OpenLLMetry-JS 0.27 with LangGraph.js). No run
can be assembled from it, and every front door says so, by instrumentation scope, in
``agenteval_fragmented_spans_total{scope}``; captures that read right, and a model gateway's lone
model calls, are not counted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from scenario import policy_for
from serve_support import post, scrape, serve_process, settled, value, wait_until
from structlog.testing import CapturingLogger
from test_captured_shapes import CASES, GATEWAYS, SPANS, play_live, sdk_span

from otel_agenteval.reading import unread
from otel_agenteval.replay import iter_spans, replay

FRAGMENTED = SPANS / "langgraphjs-1.7.3_openllmetry-js-0.27.0.otlp.json"
SCOPE = "@traceloop/instrumentation-langchain"
SPAN_COUNT = 35  # every span of the file: 4 tool calls, 5 model calls, 26 chains, each a trace


def test_processor_counts_the_pieces_and_says_so_once(monkeypatch: Any) -> None:
    logs = CapturingLogger()
    monkeypatch.setattr(unread, "log", logs)
    run = play_live(FRAGMENTED)
    assert run.registry.get_sample_value("agenteval_fragmented_spans_total", {"scope": SCOPE}) == SPAN_COUNT
    said = [c.kwargs["scope"] for c in logs.calls if c.args[0].startswith("agenteval.fragmented")]
    assert said == [SCOPE]


def replay_cli(*args: str) -> str:
    """``otel-agenteval replay`` as a user runs it (a process: the CLI configures logging for itself)."""
    got = subprocess.run([sys.executable, "-m", "otel_agenteval", "replay", "--quiet", *args], capture_output=True,
                         text=True, timeout=60)
    assert got.returncode in (0, 1), got.stderr
    return got.stdout


def test_replay_says_it_in_the_table_and_in_json() -> None:
    assert (f"fragmented spans (pieces of agent runs, each a trace of its own: the instrumentation does not "
            f"propagate context, no run can be assembled; by instrumentation scope): {SCOPE} {SPAN_COUNT}"
            ) in replay_cli(str(FRAGMENTED))
    assert json.loads(replay_cli("--format", "json", str(FRAGMENTED)))["fragmented_spans"] == {SCOPE: SPAN_COUNT}


def test_serve_counts_them_under_their_scope() -> None:
    spans = [sdk_span(r) for r in iter_spans([FRAGMENTED])]
    traces = len({s.context.trace_id for s in spans})
    with serve_process("--grace", "0.2", "--no-log-violations") as (_, info):
        status, _, body = post(f"http://127.0.0.1:{info['http_port']}/v1/traces",
                               encode_spans(spans).SerializeToString(), {"Content-Type": "application/x-protobuf"})
        assert status == 200, body
        wait_until(settled(info["metrics_port"], traces), what="every trace played")
        got = value(scrape(info["metrics_port"]), "agenteval_fragmented_spans_total", scope=SCOPE)
    assert got == SPAN_COUNT


@pytest.mark.parametrize("name", sorted([*CASES, *GATEWAYS]))
def test_captures_that_read_right_and_a_gateway_are_not_fragments(name: str) -> None:
    path: Path = SPANS / name
    policy = policy_for(CASES.get(name, {}).get("tool_prefix", ""))
    assert play_live(path, policy).processor.engine.stats["fragmented"] == {}
    assert replay([path], policy).engine_stats["fragmented"] == {}
