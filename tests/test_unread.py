"""Never silently blind (issue 25): spans that look like agent work but are read as nothing count in
``agenteval_unread_spans_total{scope}`` and are said once per scope."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import Harness
from structlog.testing import CapturingLogger

from otel_agenteval.reading import unread
from otel_agenteval.reading.unread import MAX_SCOPES


@pytest.fixture
def logs(monkeypatch: Any) -> CapturingLogger:
    """The module's logger, captured directly: CLI commands run in-process elsewhere configure
    structlog globally (cached), so ``structlog.testing.capture_logs()`` is not reliable here."""
    captured = CapturingLogger()
    monkeypatch.setattr(unread, "log", captured)
    return captured


def unread_logs(logs: CapturingLogger) -> list[str]:
    return [c.kwargs["scope"] for c in logs.calls if c.args[0].startswith("agenteval.unread")]


def test_genai_span_of_an_unknown_instrumentation_is_counted_and_said_once(make_processor: Any,
                                                                           logs: CapturingLogger) -> None:
    h: Harness = make_processor()
    tracer = h.provider.get_tracer("acme.genai.instrumentation", "0.1")
    for _ in range(3):  # gen_ai.* attributes, no operation the product knows: a model call it cannot read
        span = tracer.start_span("acme.generate", attributes={"gen_ai.system": "acme",
                                                              "gen_ai.request.model": "m-1"})
        span.end()
    root = h.agent("support")
    h.tool(root, "lookup_order", {"order_id": "1"}, at=1)
    h.end(root, 2)
    assert h.value("agenteval_unread_spans_total", scope="acme.genai.instrumentation") == 3.0
    assert unread_logs(logs) == ["acme.genai.instrumentation"]
    assert h.value("agenteval_spans_total", kind="tool") == 1.0


def test_unknown_operation_counts_but_known_structure_and_plain_spans_do_not(make_processor: Any,
                                                                             logs: CapturingLogger) -> None:
    h: Harness = make_processor()
    for name, attrs in [
        ("http GET", {"http.request.method": "GET", "url.full": "http://x"}),  # not agent work
        ("create_agent a", {"gen_ai.operation.name": "create_agent"}),  # known: not a step
        ("Chain.run", {"openinference.span.kind": "CHAIN", "input.value": "{}"}),
        ("haystack.pipeline.run", {"haystack.pipeline.max_runs_per_component": 100}),
        ("raw_gen_ai_request", {"llm.openai.model": "m"}),  # LiteLLM's provider request
        ("finish.__call__", {"openinference.span.kind": "TOOL", "input.value": "{}"}),  # DSPy ReAct's own
        ("plan", {"gen_ai.operation.name": "plan_steps"}),  # an operation the product does not read
        ("retrieve", {"openinference.span.kind": "MYSTERY"}),
    ]:
        h.end(h.start(name, attrs=attrs), 1)
    assert h.value("agenteval_unread_spans_total", scope="tests") == 2.0
    assert unread_logs(logs) == ["tests"]


def test_scope_label_is_made_safe_and_bounded(make_processor: Any, logs: CapturingLogger) -> None:
    h: Harness = make_processor()
    for i in range(MAX_SCOPES + 5):
        tracer = h.provider.get_tracer(f"scope-{i}\n" + "x" * 300)
        tracer.start_span("s", attributes={"llm.model_name": "m"}).end()
    samples = [s for f in h.registry.collect() if f.name == "agenteval_unread_spans" for s in f.samples
               if s.name == "agenteval_unread_spans_total" and s.labels["scope"] != "unknown"]
    assert len(samples) == MAX_SCOPES + 1  # 64 scopes and "other" (and "unknown" at 0, from the start)
    assert all("\n" not in s.labels["scope"] and len(s.labels["scope"]) <= 120 for s in samples)
    assert h.value("agenteval_unread_spans_total", scope="other") == 5.0
    assert len(unread_logs(logs)) == MAX_SCOPES


# --- blindness by shape (issue 39): an agent nobody has told the table about -------------------------
ACME_SPANS = [  # an LLM-ish root and its model call, every fact under a vendor's own prefix
    ("acme.think", "b7ad6b7169203331", "a7ad6b7169203331", [("acme.llm.model", "m-1"), ("acme.usage.prompt_tokens", "12")]),
    ("acme.agent", "a7ad6b7169203331", None, [("acme.agent.input", "hi"), ("acme.llm.model", "m-1")]),
]


def acme_request() -> dict[str, Any]:
    spans = [{"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": sid, "name": name, "kind": 1,
              "startTimeUnixNano": "1000", "endTimeUnixNano": "2000",
              **({"parentSpanId": pid} if pid else {}),
              "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs]}
             for name, sid, pid, attrs in ACME_SPANS]
    return {"resourceSpans": [{"resource": {"attributes": []},
                               "scopeSpans": [{"scope": {"name": "acme.agents", "version": "0.3"}, "spans": spans}]}]}


def test_unknown_vendors_agent_is_counted_unread_with_its_scope_live(make_processor: Any,
                                                                     logs: CapturingLogger) -> None:
    h: Harness = make_processor()
    tracer = h.provider.get_tracer("acme.agents", "0.3")
    root = tracer.start_span("acme.agent", attributes={"acme.agent.input": "hi", "acme.llm.model": "m-1"})
    from opentelemetry import trace
    child = tracer.start_span("acme.think", context=trace.set_span_in_context(root),
                              attributes={"acme.llm.model": "m-1", "acme.usage.prompt_tokens": 12})
    child.end()
    root.end()
    assert h.value("agenteval_unread_spans_total", scope="acme.agents") == 2.0
    said = [c.kwargs for c in logs.calls if c.args[0].startswith("agenteval.unread")]
    assert [(k["scope"], k["attribute_prefixes"]) for k in said] == [("acme.agents", ["acme"])]


def test_unknown_vendors_agent_is_counted_unread_with_its_scope_on_replay(tmp_path: Any, capsys: Any) -> None:
    import json

    from otel_agenteval.cli.main import main

    path = tmp_path / "acme.otlp.json"
    path.write_text(json.dumps(acme_request()) + "\n")
    assert main(["replay", "--quiet", "--format", "json", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["unread_spans"] == {"acme.agents": 2}
    assert main(["replay", "--quiet", str(path)]) == 0
    assert "acme.agents 2" in capsys.readouterr().out


@pytest.mark.parametrize("encoding", ["protobuf", "json"])
def test_unknown_vendors_agent_is_counted_unread_with_its_scope_through_serve(encoding: str) -> None:
    import json

    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from serve_support import post, scrape, serve_process, settled, value, wait_until

    doc = acme_request()
    if encoding == "json":
        body, ctype = json.dumps(doc).encode(), "application/json"
    else:
        req = ParseDict(doc, ExportTraceServiceRequest())
        for span, raw in zip(req.resource_spans[0].scope_spans[0].spans, doc["resourceSpans"][0]["scopeSpans"][0]["spans"]):
            span.trace_id, span.span_id = bytes.fromhex(raw["traceId"]), bytes.fromhex(raw["spanId"])
            span.parent_span_id = bytes.fromhex(raw.get("parentSpanId", ""))  # OTLP/JSON ids are hex, not base64
        body = req.SerializeToString()
        ctype = "application/x-protobuf"
    with serve_process("--grace", "0.2") as (_, info):
        status, _, text = post(f"http://127.0.0.1:{info['http_port']}/v1/traces", body, {"Content-Type": ctype})
        assert status == 200, text
        wait_until(settled(info["metrics_port"], 1), what="the trace played")
        wait_until(lambda: value(scrape(info["metrics_port"]), "agenteval_unread_spans_total", scope="acme.agents") == 2,
                   what="the unread spans counted under their scope")


def test_replay_says_every_unread_scope(tmp_path: Any, capsys: Any, logs: CapturingLogger) -> None:
    import copy
    import json

    from otel_agenteval.cli.main import main

    doc = acme_request()
    other = copy.deepcopy(doc["resourceSpans"][0]["scopeSpans"][0])
    other["scope"] = {"name": "beta.sdk"}
    for span in other["spans"]:
        span["traceId"] = "1" * 32
    doc["resourceSpans"][0]["scopeSpans"].append(other)
    path = tmp_path / "two.otlp.json"
    path.write_text(json.dumps(doc) + "\n")
    assert main(["replay", "--quiet", str(path)]) == 0  # (-v in-process would bind the log to this capture)
    out = capsys.readouterr().out
    assert "unread spans (look like agent work, read as nothing; by instrumentation scope): acme.agents 2, beta.sdk 2" in out
    assert unread_logs(logs) == ["acme.agents", "beta.sdk"]  # the log -v shows: every scope, each once
