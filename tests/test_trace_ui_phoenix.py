"""Findings in a trace UI: a real Arize Phoenix on 127.0.0.1 (its own environment, built by
``bash .ci/phoenix.sh``, which runs this file), a real pydantic-ai agent run (scripted model,
offline) whose spans go to Phoenix through the SDK's OTLP/HTTP exporter, with the processor
attached and its ``gen_ai.evaluation.result`` records going to Phoenix as span annotations
(``PhoenixAnnotationExporter``). Read back through Phoenix's REST API (the finding is on the
second ``create_claim`` span, and on no other) and in its trace view in headless Chromium.

``OTEL_AGENTEVAL_SCREENSHOTS=docs/img`` keeps the trace view's screenshot (docs/otel.md shows it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from serve_support import free_port, get
from test_scoring_html import CHROMIUM_ARGS, _chromium

from otel_agenteval import Policy, TrajectoryProcessor, Violation
from otel_agenteval.metrics.phoenix_annotations import PhoenixAnnotationExporter

pytestmark = pytest.mark.timeout(240)

PROJECT = "support-agents"
POLICY = """\
tools:
  create_claim: {write: true}
outcome:
  success_when: [create_claim]
outputs:
  evaluation_runs: true
"""
MODEL = "scripted-model"
TURNS = [("lookup_order", {"order_id": "88120"}),
         ("create_claim", {"order_id": "88120", "reason": "damaged"}),
         ("create_claim", {"order_id": "88120", "reason": "damaged"})]  # the same claim again
STARTUP_S = 150  # an import of ~140 packages on a loaded two-core machine; seconds with bytecode


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Phoenix's base URL: ``phoenix serve`` from its own environment, on free loopback ports."""
    venv = os.environ.get("OTEL_AGENTEVAL_PHOENIX_VENV")
    if not venv:
        pytest.skip("Arize Phoenix is not set up here: `bash .ci/phoenix.sh` builds its environment (cached "
                    "outside the clone) and runs this test with OTEL_AGENTEVAL_PHOENIX_VENV set")
    exe = Path(venv) / "bin" / "phoenix"
    if not exe.exists():
        pytest.fail(f"OTEL_AGENTEVAL_PHOENIX_VENV={venv} has no bin/phoenix: run `bash .ci/phoenix.sh`")
    work = tmp_path_factory.mktemp("phoenix")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PHOENIX_", "OTEL_"))}
    env.update(PHOENIX_HOST="127.0.0.1", PHOENIX_PORT=str(port), PHOENIX_GRPC_PORT=str(free_port()),
               PHOENIX_WORKING_DIR=str(work), PHOENIX_TELEMETRY_ENABLED="false")
    log = (work / "phoenix.log").open("wb")
    proc = subprocess.Popen([str(exe), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_S
        while not _healthy(base):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = (work / "phoenix.log").read_text(errors="replace")[-3000:]
                pytest.fail(f"Phoenix did not start (exit {proc.poll()}) in {STARTUP_S}s:\n{tail}")
            time.sleep(0.5)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _healthy(base: str) -> bool:
    try:
        return get(f"{base}/healthz", timeout=2)[0] == 200
    except OSError:
        return False


def _agent_run(base: str) -> tuple[list[Violation], PhoenixAnnotationExporter]:
    """One pydantic-ai run that files the same claim twice, traced to Phoenix with the processor on."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.usage import RequestUsage

    def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        n = sum(isinstance(m, ModelResponse) for m in messages)
        usage = RequestUsage(input_tokens=100 + 10 * n, output_tokens=5 + n)
        if n < len(TURNS):
            name, args = TURNS[n]
            return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"call_{n}")], usage=usage,
                                 model_name=MODEL)
        return ModelResponse(parts=[TextPart("I filed claim CLM-5531.")], usage=usage, model_name=MODEL)

    # the project Phoenix files the spans under: a resource attribute (OpenInference's)
    resource = Resource.create({"service.name": "support-svc", "openinference.project.name": PROJECT})
    exporter = PhoenixAnnotationExporter(base)
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(exporter))
    violations: list[Violation] = []
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(TrajectoryProcessor(Policy.from_yaml(POLICY), logger_provider=logger_provider,
                                                           on_violation=[violations.append]))
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(f"{base}/v1/traces")))

    agent = Agent(FunctionModel(scripted, model_name=MODEL), name="support_agent",
                  instructions="You are a support agent for order claims.")
    agent.instrument = InstrumentationSettings(tracer_provider=tracer_provider)

    @agent.tool_plain
    def lookup_order(order_id: str) -> dict[str, str]:
        """Look up an order by its id."""
        return {"order_id": order_id, "status": "delivered"}

    @agent.tool_plain
    def create_claim(order_id: str, reason: str) -> dict[str, str]:
        """Create a damage claim for an order."""
        return {"claim_id": "CLM-5531", "order_id": order_id}

    agent.run_sync("My order 88120 arrived damaged, please file a claim.")
    # the annotations first, then the spans: as in an app, where the SDK's log batch goes out after
    # 1 s and the span batch after 5 s; Phoenix keeps an annotation until its span is in
    logger_provider.shutdown()
    tracer_provider.shutdown()
    return violations, exporter


@pytest.fixture(scope="module")
def traced(phoenix: str) -> dict[str, Any]:
    """The run, and what Phoenix holds of it once the annotations are in: spans and annotations."""
    violations, exporter = _agent_run(phoenix)
    assert (exporter.sent, exporter.failed) == (2, 0)  # the duplicate write, and the run's verdict
    deadline = time.monotonic() + 60  # Phoenix retries an early annotation every 10 s
    spans: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    while len(annotations) < 2 and time.monotonic() < deadline:  # Phoenix inserts in the background
        time.sleep(0.5)
        spans = _json(phoenix, f"/v1/projects/{PROJECT}/spans?limit=100")
        ids = "".join(f"&span_ids={s['context']['span_id']}" for s in spans)
        annotations = _json(phoenix, f"/v1/projects/{PROJECT}/span_annotations?limit=100{ids}") if spans else []
    return {"base": phoenix, "violations": violations, "spans": spans, "annotations": annotations}


def _json(base: str, path: str) -> list[dict[str, Any]]:
    """A list endpoint's ``data``; empty while Phoenix has not inserted the project or spans (404)."""
    status, body = get(base + path)
    if status == 404:
        return []
    assert status == 200, (path, status, body[:500])
    return list(json.loads(body)["data"])


def test_phoenix_holds_the_finding_on_the_offending_span(traced: dict[str, Any]) -> None:
    [v] = traced["violations"]
    by_id = {s["context"]["span_id"]: s for s in traced["spans"]}
    claims = sorted((s for s in traced["spans"] if s["name"] == "execute_tool create_claim"),
                    key=lambda s: s["start_time"])
    [root] = [s for s in traced["spans"] if s["parent_id"] is None]
    assert [s["context"]["span_id"] for s in claims][1] == v.span_id  # the second claim broke the rule
    found = {(a["span_id"], a["name"]): a for a in traced["annotations"]}
    assert set(found) == {(v.span_id, "duplicate_write"), (root["context"]["span_id"], "agenteval.trajectory")}
    finding = found[v.span_id, "duplicate_write"]
    assert (finding["annotator_kind"], finding["identifier"], finding["result"]) == (
        "CODE", "otel-agenteval", {"label": "fail", "score": None, "explanation": v.message})
    assert by_id[v.span_id]["context"]["trace_id"] == finding["metadata"]["trace_id"] == v.trace_id
    assert found[root["context"]["span_id"], "agenteval.trajectory"]["result"]["label"] == "pass"
    assert "88120" not in json.dumps(traced["annotations"])  # argument values only as hashes


def test_the_trace_view_shows_it_on_that_span(traced: dict[str, Any], tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    [v] = traced["violations"]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium(), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1920, "height": 1000})
            page.goto(f"{traced['base']}/redirects/spans/{v.span_id}")  # Phoenix's link to a span in its trace
            # the trace tree: the finding's badge is in the row of the second create_claim, and in no other
            rows = page.locator("li[style*='--trace-tree-nesting-level']")
            rows.filter(has_text="duplicate_write").wait_for(timeout=60_000)
            texts = [rows.nth(i).inner_text().splitlines() for i in range(rows.count())]
            claims = [t for t in texts if t[0] == "execute_tool create_claim"]
            assert [("duplicate_write" in t, "fail" in t) for t in claims] == [(False, False), (True, True)]
            assert [t[0] for t in texts if "duplicate_write" in t] == ["execute_tool create_claim"]
            # the span's details: its id, and the annotation with the rule's explanation
            page.get_by_text(v.span_id).wait_for()
            page.get_by_role("button", name="Annotations", exact=True).click()
            page.get_by_role("radio", name="Table").click()  # the list shows name and label only
            page.get_by_text(v.message).wait_for()
            shot = tmp_path / "phoenix-trace-finding.png"
            page.screenshot(path=str(shot))
        finally:
            browser.close()
    keep = os.environ.get("OTEL_AGENTEVAL_SCREENSHOTS")
    if keep:
        shutil.copy(shot, Path(keep) / shot.name)
