"""Every framework's captured spans, read with zero configuration, live and on replay alike.

``spans/`` holds what each framework emitted for the scenario of :mod:`scenario` (captured by the
end-to-end tests' drivers with the framework versions in the file names; regenerate with
``OTEL_AGENTEVAL_CAPTURE_DIR=$PWD/tests/frameworks/spans bash .ci/frameworks.sh``; the google-adk 1.39.1 file
came from the same scenario run by hand in a google-adk 1.x environment; the round-2 files of issue 25
were made by the round-2 capture scripts, see ``capture/ROUND2.md``). They run here in the main
environment, compiled and plain, whichever frameworks are installed: the "live" side plays them
as SDK ``ReadableSpan`` objects through a real ``TrajectoryProcessor`` (``on_start`` then
``on_end`` in time order), the replay side through ``replay``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, Status, TraceFlags
from scenario import POLICY, Run, expected, live, policy_for, replayed
from structlog.testing import CapturingLogger

from otel_agenteval import Policy
from otel_agenteval.metrics import blindspots
from otel_agenteval.replay import iter_spans, replay

SPANS = Path(__file__).parent / "spans"

# file -> what the framework records: arguments (False: content capture is off by default),
# model calls and tokens (0 where the instrumentation makes no LLM span for a scripted model)
CASES: dict[str, dict[str, Any]] = {
    "google-adk-2.13.0_default.json": {"arguments": False},
    "google-adk-2.13.0_content.json": {},
    "google-adk-2.13.0_schema1.json": {},
    "google-adk-1.39.1_default.json": {},
    # openinference-instrumentation-google-adk 1.0.5 suppresses ADK 2.13's generate_content spans
    # and its own call_llm wrapper is not reached: no model calls are seen
    "google-adk-2.13.0_openinference.json": {"llm_calls": 0, "tokens": (0, 0)},
    # OpenInference's CrewAI wrappers make no LLM span (that is the model library's instrumentor's job)
    "crewai-1.15.30_openinference-1.1.21_wrappers.json": {"llm_calls": 0, "tokens": (0, 0)},
    "crewai-1.15.30_openinference-1.1.21_events.json": {},
    "smolagents-1.26.0_openinference-0.1.43.json": {},
    "agent-framework-core-1.23.0_default.json": {"arguments": False},
    "agent-framework-core-1.23.0_sensitive.json": {},
    "strands-agents-1.62.0_default.json": {},
    "strands-agents-1.62.0_latest.json": {},
    # --- round 2 (issue 25): made by the round-2 capture scripts, versions in ../capture/ROUND2.md
    "openllmetry-langchain-0.62.4_default.json": {},  # arguments: `inputs` of LangChain's callback envelope
    "traceloop-sdk-0.62.4_default.json": {},  # @agent/@tool: traceloop.span.kind, traceloop.entity.input
    # LlamaIndex names its agent only inside a Python repr (current_agent_name='...'): unknown
    "llama-index-core-0.14.25_openinference-4.6.1.json": {"agent": "unknown"},
    # streaming (the framework's default): the OpenAI integration asks for no usage, no tokens exist
    "llama-index-core-0.14.25_openinference-4.6.1_streaming.json": {"agent": "unknown", "tokens": (0, 0)},
    # AutoGen's own spans: no model calls, never arguments (it has no setting for them)
    "autogen-agentchat-0.7.5_default.json": {"arguments": False, "llm_calls": 0, "tokens": (0, 0)},
    # + OpenInference: each call is two nested tool spans, one step
    "autogen-agentchat-0.7.5_openinference-0.1.22.json": {"llm_calls": 0, "tokens": (0, 0)},
    # zero config: only the tool spans, under a root that names no agent
    "semantic-kernel-1.45.0_default.json": {"arguments": False, "llm_calls": 0, "tokens": (0, 0), "agent": "unknown",
                                            "tool_prefix": "orders-"},
    "semantic-kernel-1.45.0_diagnostics.json": {"arguments": False, "tool_prefix": "orders-"},
    "semantic-kernel-1.45.0_sensitive.json": {"tool_prefix": "orders-"},
    # tokens and arguments only with HAYSTACK_CONTENT_TRACING_ENABLED=true
    "haystack-ai-3.4.1_default.json": {"arguments": False, "tokens": (0, 0)},
    "haystack-ai-3.4.1_content.json": {},
    # ReAct: a sixth model call (its extract step); no agent name; OpenInference's DSPy LM spans carry no tokens
    "dspy-3.4.1_openinference-0.1.48.json": {"agent": "unknown", "llm_calls": 6, "tokens": (0, 0)},
    "agno-3.1.10_openinference-1.0.15.json": {},
    "ag2-1.2.1_default.json": {},
    "vercel-ai-6.0.326_default.otlp.json": {},  # OTLP/JSON as the AI SDK's serializer writes it
    "vercel-ai-6.0.326_no-io.otlp.json": {"arguments": False},  # recordInputs: false
    # --- round 3 (issue 39): the round-3 scenario, versions in ../capture/ROUND3.md
    # call_llm is the model call; the failed tool a bare span (no arguments on it)
    "google-adk-js-2.0.0_default.otlp.json": {"round3": True, "bare_failed_call": True},
    # OpenInference LangChain.js records a one-argument tool's input as the bare value
    "langgraphjs-1.7.3_openinference-4.1.1.otlp.json": {"round3": True, "bare_single_argument": True},
    "openai-agents-js-0.20.0_openinference-0.2.15.otlp.json": {"round3": True},
    "strands-ts-1.16.0_default.otlp.json": {"round3": True},
    "mastra-1.71.0_otel-exporter-1.4.0.otlp.json": {"round3": True},
    "langfuse-5.2.0_default.json": {"round3": True},
    "langfuse-5.2.0_no-io.json": {"round3": True, "arguments": False},
    # OpenLLMetry-JS 0.27 with LangGraph.js: every span a trace of its own (no context across LangChain's
    # callbacks), put back together by time (engine/fragments/, test_captured_fragments). No span states the
    # agent (its name is only inside the messages); the call that threw is named by the ToolMessage of the
    # piece around it that answers its call (engine/fragments/naming.py)
    "langgraphjs-1.7.3_openllmetry-js-0.27.0.otlp.json": {"round3": True, "agent": "unknown"},
}
# a model gateway: model spans only, no agent or tool span -> model calls, not agent runs
GATEWAYS = {"litellm-1.110.2_gateway.json"}


def sdk_span(r: Any) -> ReadableSpan:
    """A recorded span as the SDK's own ``ReadableSpan``: what a processor gets in process."""
    ctx = SpanContext(r._context[0], r._context[1], False, TraceFlags(1))
    parent = None if r._parent is None else SpanContext(r._parent[0], r._parent[1], bool(r._parent[2]),
                                                         TraceFlags(1))
    events = [Event(e.name, dict(e.attributes), e.timestamp) for e in r._events]
    scope = r._instrumentation_scope
    return ReadableSpan(name=r._name, context=ctx, parent=parent, resource=Resource(dict(r._resource.attributes)),
                        attributes=dict(r._attributes), events=events, kind=r.kind,
                        status=Status(r._status._status_code, r._status.description), start_time=r._start_time,
                        end_time=r._end_time,
                        instrumentation_scope=None if scope is None else InstrumentationScope(scope.name, scope.version))


def _depths(spans: list[ReadableSpan]) -> list[int]:
    """Each span's depth in its trace (0: a root, or a parent not in the file)."""
    index = {s.context.span_id: i for i, s in enumerate(spans)}
    parent = [index.get(s.parent.span_id) if s.parent is not None else None for s in spans]
    depths = []
    for i in range(len(spans)):
        d, j = 0, parent[i]
        while j is not None and d < len(spans):
            d, j = d + 1, parent[j]
        depths.append(d)
    return depths


def play_live(path: Path, policy: Policy = POLICY) -> Run:
    return play_spans([sdk_span(r) for r in iter_spans([path])], Run(policy=policy))


def play_spans(spans: list[Any], run: Run) -> Run:
    """``spans`` through a real processor, ``on_start`` and ``on_end`` in time order; at one timestamp
    (JS clocks tick in milliseconds) a parent starts before its children, as in process."""
    depth = _depths(spans)
    timeline = sorted([(s.start_time, 0, depth[i], i) for i, s in enumerate(spans)] +
                      [(s.end_time, 1, 0, i) for i, s in enumerate(spans)])
    for _, is_end, _, i in timeline:
        (run.processor.on_end if is_end else run.processor.on_start)(spans[i])  # type: ignore[operator]
    run.processor.shutdown()
    return run


def expected_of(case: dict[str, Any]) -> dict[str, Any]:
    case = dict(case)
    bare = case.pop("bare_single_argument", False)
    bare_failed = case.pop("bare_failed_call", False)
    want = expected(**{k: v for k, v in case.items() if k != "tool_prefix"}, tool_prefix=case.get("tool_prefix", ""))
    if bare:  # {"order_id": "88120"} recorded as "88120", read back as {"input": "88120"}
        want["arguments"] = [[{"input": next(iter(a.values()))} if len(a) == 1 else a for a in want["arguments"][0]]]
    if bare_failed:
        want["arguments"] = [[a if ok else {} for a, (_, ok) in zip(want["arguments"][0], want["steps"][0])]]
    return want


@pytest.mark.parametrize("name", sorted(CASES))
def test_captured_spans_live_and_replayed(name: str) -> None:
    want = expected_of(CASES[name])
    policy = policy_for(CASES[name].get("tool_prefix", ""))
    path = SPANS / name
    assert live(play_live(path, policy)) == want
    assert replayed(path, policy) == want


@pytest.mark.parametrize("name", sorted(GATEWAYS))
def test_model_gateway_spans_are_not_agent_runs(name: str) -> None:
    path = SPANS / name
    run = play_live(path)
    assert run.trajectories == [] and live(run)["tool_calls"] == {}
    assert run.processor.engine.stats["spans"]["llm"] == 5
    assert replay([path], POLICY).trajectories == []


@pytest.mark.parametrize("name", sorted(CASES))
def test_no_structural_span_of_a_read_framework_counts_as_unread(name: str) -> None:
    run = play_live(SPANS / name, policy_for(CASES[name].get("tool_prefix", "")))
    assert run.processor.engine.stats["unread"] == {}


def test_every_captured_file_has_a_case() -> None:
    assert sorted(p.name for p in SPANS.glob("*.json")) == sorted([*CASES, *GATEWAYS])


# where a framework records no arguments, the warning names its own setting (or says it has none)
SETTINGS = {
    "autogen-agentchat-0.7.5_default.json": ("AutoGen 0.7", "no setting: AutoGen's own tool spans never carry "
                                             "arguments (add openinference-instrumentation-autogen-agentchat)"),
    "semantic-kernel-1.45.0_default.json": ("Semantic Kernel",
                                            "SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE=true"),
    # the marker (sk.available_functions) only on the loop span between the agent and its tools, no scope
    "semantic-kernel-1.45.0_diagnostics.json": ("Semantic Kernel",
                                                "SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE=true"),
    "haystack-ai-3.4.1_default.json": ("Haystack", "HAYSTACK_CONTENT_TRACING_ENABLED=true"),
    "vercel-ai-6.0.326_no-io.otlp.json": ("Vercel AI SDK", "experimental_telemetry: { recordInputs: true } (the default)"),
    "langfuse-5.2.0_no-io.json": ("Langfuse", "LANGFUSE_OBSERVE_DECORATOR_IO_CAPTURE_ENABLED=true (the default; "
                                              "or @observe(capture_input=True))"),
    "agent-framework-core-1.23.0_default.json": (
        "Microsoft Agent Framework", "ENABLE_SENSITIVE_DATA=true (or enable_instrumentation(enable_sensitive_data=True))"),
}


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_no_arguments_warning_names_the_frameworks_setting(name: str, monkeypatch: Any) -> None:
    logs = CapturingLogger()  # the logger itself: CLI commands run in-process configure structlog globally
    monkeypatch.setattr(blindspots, "log", logs)
    play_live(SPANS / name, policy_for(CASES[name].get("tool_prefix", "")))
    said = [(c.kwargs["framework"], c.kwargs["setting"]) for c in logs.calls
            if c.args[0].startswith("agenteval.unchecked") and c.kwargs.get("tool")]
    assert said == [SETTINGS[name]]


@pytest.mark.parametrize("rooted", [True, False])
def test_replay_names_the_setting_from_a_marked_span_of_the_run(rooted: bool, tmp_path: Path) -> None:
    """Semantic Kernel's marker sits on its loop span, neither the tool spans nor the root: replay's
    table and JSON still name its own setting for the unchecked calls, not the generic one (also
    with the root missing: the trace is then played by its ends alone)."""
    import json

    from test_captured_fragments import replay_cli

    policy = tmp_path / "policy.yaml"
    policy.write_text("version: 1\ntools:\n  orders-create_claim: {write: true}\n")
    path = SPANS / "semantic-kernel-1.45.0_diagnostics.json"
    agent = "support_agent"
    if not rooted:
        spans = [s for s in json.loads(path.read_text()) if s["parent_id"] is not None]
        path = tmp_path / "rootless.json"
        path.write_text(json.dumps(spans))
        agent = "unknown"
    framework, setting = SETTINGS["semantic-kernel-1.45.0_diagnostics.json"]
    assert (f"unchecked calls: {agent}/orders-create_claim 2 (no arguments on the spans; {framework} records "
            f"them with {setting})") in replay_cli(str(path), "--policy", str(policy))
    rows = json.loads(replay_cli("--format", "json", str(path), "--policy", str(policy)))["unchecked_calls"]
    assert [(r["tool"], r["calls"], r["framework"], r["setting"]) for r in rows] == [
        ("orders-create_claim", 2, framework, setting)]
