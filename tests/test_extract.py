"""Normalisation: every span shape of span-shapes.md, classified and read with no configuration.

Spans are real SDK spans from a real tracer, with the attributes each framework sets.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import Harness
from opentelemetry.sdk.trace import Span
from opentelemetry.trace import StatusCode

from otel_agenteval.model.trajectory import AgentSpan, LLMCall, ToolStep, parse_arguments
from otel_agenteval.reading import extract


@pytest.fixture
def h(make_processor: Any) -> Harness:
    return make_processor()


def finished(h: Harness, name: str, attrs: dict[str, Any], *, events: Any = (), error: str | None = None,
             start_attrs: dict[str, Any] | None = None, parent: Span | None = None) -> Span:
    """A span started with ``start_attrs`` and ended with ``attrs`` set (as most frameworks do)."""
    span = h.start(name, parent, 1.0, start_attrs)
    return h.end(span, 1.5, attrs, events=events, error=error)


def tool_expected(span: Span, **fields: Any) -> ToolStep:
    return ToolStep(start_ns=span.start_time, end_ns=span.end_time, span_id=span.context.span_id,
                    trace_id=span.context.trace_id, **fields)


def llm_expected(span: Span, **fields: Any) -> LLMCall:
    return LLMCall(start_ns=span.start_time, end_ns=span.end_time, span_id=span.context.span_id,
                   trace_id=span.context.trace_id, **fields)


def agent_expected(span: Span, **fields: Any) -> AgentSpan:
    return AgentSpan(start_ns=span.start_time, end_ns=span.end_time, span_id=span.context.span_id,
                     trace_id=span.context.trace_id, **fields)


# --- GenAI semantic conventions (pydantic-ai v5/v6, util-genai) --------------------------------

def test_genai_tool_span(h: Harness) -> None:
    span = finished(h, "execute_tool lookup_order", {"gen_ai.tool.call.result": '{"status": "delivered"}'},
                    start_attrs={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order",
                                 "gen_ai.tool.call.id": "call_lookup_1",
                                 "gen_ai.tool.call.arguments": '{"order_id":"88120"}',
                                 "gen_ai.agent.name": "support_agent", "gen_ai.conversation.id": "conv-1"})
    assert extract.classify(span) == "tool"
    step = extract.tool_step(span)
    assert step == tool_expected(span, tool="lookup_order", ok=True, error_type=None, call_id="call_lookup_1",
                                 raw_arguments='{"order_id":"88120"}', raw_result='{"status": "delivered"}',
                                 conversation_id="conv-1", agent_name="support_agent")
    assert step.arguments == {"order_id": "88120"}


def test_genai_tool_attributes_only_at_end(h: Harness) -> None:
    """util-genai sets call id, arguments and result only at end: read at end."""
    span = finished(h, "execute_tool create_claim",
                    {"gen_ai.tool.call.id": "c1", "gen_ai.tool.call.arguments": '{"order_id": "88120"}',
                     "gen_ai.tool.call.result": "claim CL-1", "gen_ai.agent.name": "support_agent"},
                    start_attrs={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "create_claim",
                                 "gen_ai.tool.type": "function"})
    step = extract.tool_step(span)
    assert (step.tool, step.call_id, step.arguments, step.raw_result) == (
        "create_claim", "c1", {"order_id": "88120"}, "claim CL-1")


def test_genai_chat_span(h: Harness) -> None:
    span = finished(h, "chat fake-gpt-4o",
                    {"gen_ai.response.model": "gpt-4o-2024-08-06", "gen_ai.usage.input_tokens": 120,
                     "gen_ai.usage.output_tokens": 30},
                    start_attrs={"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                                 "gen_ai.conversation.id": "conv-1"})
    assert extract.classify(span) == "llm"
    assert extract.llm_call(span) == llm_expected(span, model="gpt-4o-2024-08-06", input_tokens=120,
                                                  output_tokens=30, ok=True, conversation_id="conv-1")


@pytest.mark.parametrize("op", ["chat", "text_completion", "generate_content"])
def test_every_genai_llm_operation_is_llm(h: Harness, op: str) -> None:
    assert extract.classify(finished(h, op, {}, start_attrs={"gen_ai.operation.name": op})) == "llm"


def test_genai_agent_span_pydantic_ai(h: Harness) -> None:
    span = finished(h, "invoke_agent support_agent",
                    {"gen_ai.aggregated_usage.input_tokens": 900, "gen_ai.aggregated_usage.output_tokens": 80,
                     "final_result": "done"},
                    start_attrs={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support_agent",
                                 "agent_name": "support_agent", "model_name": "gpt-4o",
                                 "gen_ai.conversation.id": "conv-9"})
    assert extract.classify(span) == "agent"
    assert extract.is_agent_at_start(span)
    assert extract.agent_span(span) == agent_expected(span, name="support_agent", ok=True, conversation_id="conv-9",
                                                      outcome=None, model="gpt-4o", input_tokens=900,
                                                      output_tokens=80)


@pytest.mark.parametrize("op", ["embeddings", "create_agent", "execute_event_loop_cycle", "something_new"])
def test_other_genai_operations_are_nothing(h: Harness, op: str) -> None:
    """Strands' per-turn cycle span and non-step operations are walked through, not counted."""
    span = finished(h, f"execute_tool {op}", {"gen_ai.tool.name": "x", "event_loop.cycle_id": "c1"},
                    start_attrs={"gen_ai.operation.name": op})
    assert extract.classify(span) is None


# --- OpenInference (OpenAI Agents SDK, LangGraph) ---------------------------------------------

def test_openinference_tool_span_without_call_id(h: Harness) -> None:
    span = finished(h, "lookup_order",
                    {"tool.name": "lookup_order", "tool.description": "Look up an order",
                     "input.value": '{"order_id":"88120"}', "input.mime_type": "application/json",
                     "output.value": '{"status": "delivered"}'},
                    start_attrs={"openinference.span.kind": "TOOL"})
    assert extract.classify(span) == "tool"
    assert extract.tool_step(span) == tool_expected(span, tool="lookup_order", ok=True, error_type=None,
                                                    call_id=None, raw_arguments='{"order_id":"88120"}',
                                                    raw_result='{"status": "delivered"}')


def test_openinference_tool_named_by_span_when_no_tool_name(h: Harness) -> None:
    span = finished(h, "get_policy", {"input.value": "{}"}, start_attrs={"openinference.span.kind": "TOOL"})
    assert extract.tool_step(span).tool == "get_policy"


def test_openinference_llm_span(h: Harness) -> None:
    span = finished(h, "response",
                    {"llm.model_name": "gpt-4o-2024-08-06", "llm.system": "openai", "llm.token_count.prompt": 210,
                     "llm.token_count.completion": 12, "llm.token_count.total": 222, "session.id": "sess-1"},
                    start_attrs={"openinference.span.kind": "LLM"})
    assert extract.classify(span) == "llm"
    assert extract.llm_call(span) == llm_expected(span, model="gpt-4o-2024-08-06", input_tokens=210,
                                                  output_tokens=12, ok=True, conversation_id="sess-1")


def test_openinference_agent_span(h: Harness) -> None:
    span = finished(h, "support_agent", {"agent.name": "support_agent", "graph.node.id": "support_agent"},
                    start_attrs={"openinference.span.kind": "AGENT"})
    assert extract.classify(span) == "agent"
    assert extract.is_agent_at_start(span)
    assert extract.agent_span(span).name == "support_agent"


@pytest.mark.parametrize("name", ["turn", "support_workflow", "RunnableSequence", "tools"])
def test_openinference_chain_is_walked_through(h: Harness, name: str) -> None:
    span = finished(h, name, {"input.value": "{}", "output.value": "{}"},
                    start_attrs={"openinference.span.kind": "CHAIN"})
    assert extract.classify(span) is None


# --- pydantic-ai legacy (instrumentation version 2) -----------------------------------------------

def test_legacy_running_tool(h: Harness) -> None:
    span = finished(h, "running tool", {"tool_response": "claim CL-7"},
                    start_attrs={"gen_ai.tool.name": "create_claim", "gen_ai.tool.call.id": "call_2",
                                 "tool_arguments": '{"order_id": "88120", "reason": "damaged"}'})
    assert extract.classify(span) == "tool"
    step = extract.tool_step(span)
    assert (step.tool, step.call_id, step.raw_result, step.arguments) == (
        "create_claim", "call_2", "claim CL-7", {"order_id": "88120", "reason": "damaged"})


def test_legacy_agent_run(h: Harness) -> None:
    span = finished(h, "agent run", {}, start_attrs={"agent_name": "support_agent", "model_name": "gpt-4o"})
    assert extract.classify(span) == "agent"
    assert extract.is_agent_at_start(span)
    assert extract.agent_span(span).name == "support_agent"


# --- Strands default mode ----------------------------------------------------------------------------

STRANDS_ARGS = '{"order_id": "88120", "reason": "damaged"}'


def test_strands_default_tool_reads_events(h: Harness) -> None:
    """Arguments only in the ``gen_ai.tool.message`` event, result only in ``gen_ai.choice``."""
    span = h.start("execute_tool create_claim", None, 1.0)  # on_start sees nothing in Strands
    h.end(span, 1.2,
          {"gen_ai.operation.name": "execute_tool", "gen_ai.system": "strands-agents",
           "gen_ai.tool.name": "create_claim", "gen_ai.tool.call.id": "tooluse_1", "gen_ai.tool.status": "success",
           "session.id": "s-1"},
          events=[("gen_ai.tool.message", {"role": "tool", "content": STRANDS_ARGS, "id": "tooluse_1"}),
                  ("gen_ai.choice", {"message": '[{"text": "claim CL-3 created"}]', "id": "tooluse_1"})])
    assert extract.classify(span) == "tool"
    step = extract.tool_step(span)
    assert step == tool_expected(span, tool="create_claim", ok=True, error_type=None, call_id="tooluse_1",
                                 raw_arguments=STRANDS_ARGS, raw_result='[{"text": "claim CL-3 created"}]',
                                 conversation_id="s-1")
    assert step.arguments == {"order_id": "88120", "reason": "damaged"}
    assert extract.result_text(step.raw_result) == "claim CL-3 created"


def test_strands_tool_status_error(h: Harness) -> None:
    """``gen_ai.tool.status=error`` marks a failure even when the status code says nothing."""
    span = finished(h, "execute_tool create_claim", {"gen_ai.operation.name": "execute_tool",
                                                     "gen_ai.tool.name": "create_claim",
                                                     "gen_ai.tool.status": "error"})
    step = extract.tool_step(span)
    assert (step.ok, step.error_type) == (False, "error")


def test_strands_error_with_exception_event(h: Harness) -> None:
    span = finished(h, "execute_tool create_claim",
                    {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "create_claim",
                     "gen_ai.tool.status": "error"},
                    events=[("exception", {"exception.type": "ValueError", "exception.message": "carrier down"})],
                    error="carrier down")
    step = extract.tool_step(span)
    assert (step.ok, step.error_type) == (False, "ValueError")


def test_strands_chat_tokens_in_both_names_count_once(h: Harness) -> None:
    span = finished(h, "chat", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "claude",
                                "gen_ai.usage.prompt_tokens": 300, "gen_ai.usage.input_tokens": 300,
                                "gen_ai.usage.completion_tokens": 40, "gen_ai.usage.output_tokens": 40,
                                "gen_ai.usage.total_tokens": 340})
    call = extract.llm_call(span)
    assert (call.input_tokens, call.output_tokens, call.model) == (300, 40, "claude")


def test_older_token_names_alone(h: Harness) -> None:
    span = finished(h, "chat", {"gen_ai.operation.name": "chat", "gen_ai.usage.prompt_tokens": 11,
                                "gen_ai.usage.completion_tokens": 7})
    call = extract.llm_call(span)
    assert (call.input_tokens, call.output_tokens, call.model) == (11, 7, None)


def test_strands_agent_span_carries_aggregates(h: Harness) -> None:
    span = finished(h, "invoke_agent support_agent",
                    {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support_agent",
                     "gen_ai.usage.input_tokens": 1200, "gen_ai.usage.prompt_tokens": 1200,
                     "gen_ai.usage.output_tokens": 160, "session.id": "s-1"})
    info = extract.agent_span(span)
    assert (info.name, info.input_tokens, info.output_tokens, info.conversation_id) == (
        "support_agent", 1200, 160, "s-1")


# --- LangGraph + OpenInference -------------------------------------------------------------------------

TOOL_MESSAGE = json.dumps({"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "ToolMessage"],
                           "kwargs": {"content": "order 88120: delivered", "type": "tool", "name": "lookup_order",
                                      "tool_call_id": "call_1", "status": "success"}})


def test_langchain_bare_one_argument_input(h: Harness) -> None:
    span = finished(h, "lookup_order", {"openinference.span.kind": "TOOL", "tool.name": "lookup_order",
                                        "input.value": "88120", "output.value": TOOL_MESSAGE,
                                        "session.id": "lg-1"})
    step = extract.tool_step(span)
    assert (step.tool, step.raw_arguments, step.arguments, step.call_id, step.conversation_id) == (
        "lookup_order", "88120", {"input": "88120"}, None, "lg-1")
    assert extract.result_text(step.raw_result) == "order 88120: delivered"


def test_langchain_two_argument_input_is_json(h: Harness) -> None:
    span = finished(h, "create_claim", {"openinference.span.kind": "TOOL", "tool.name": "create_claim",
                                        "input.value": '{"order_id": "88120", "reason": "damaged"}'})
    assert extract.tool_step(span).arguments == {"order_id": "88120", "reason": "damaged"}


# --- errors ----------------------------------------------------------------------------------------------

def test_error_status_with_error_type(h: Harness) -> None:
    span = finished(h, "execute_tool create_claim", {"gen_ai.operation.name": "execute_tool",
                                                     "gen_ai.tool.name": "create_claim",
                                                     "error.type": "ValueError"}, error="carrier down")
    step = extract.tool_step(span)
    assert (step.ok, step.error_type, step.raw_result) == (False, "ValueError", None)


def test_error_status_without_error_type_reads_exception_event(h: Harness) -> None:
    span = finished(h, "execute_tool lookup_order",
                    {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order",
                     "gen_ai.tool.call.result": "Order id must be numeric"},
                    events=[("exception", {"exception.type": "pydantic_ai.exceptions.ToolRetryError",
                                           "exception.message": "retry"})],
                    error="")
    step = extract.tool_step(span)
    assert (step.ok, step.error_type) == (False, "ToolRetryError")


def test_error_status_alone(h: Harness) -> None:
    """OpenInference: ERROR with a description, no exception event, no error.type."""
    span = finished(h, "create_claim", {"openinference.span.kind": "TOOL", "tool.name": "create_claim",
                                        "output.value": "Tool execution failed."},
                    error="Error running tool (non-fatal)")
    step = extract.tool_step(span)
    assert (step.ok, step.error_type) == (False, "error")


@pytest.mark.parametrize("status", ["unset", "ok"])
def test_success_is_ok_or_unset(h: Harness, status: str) -> None:
    span = h.start("execute_tool a", None, 0, {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "a"})
    h.end(span, 1, status=StatusCode.OK if status == "ok" else None)
    assert extract.tool_step(span).ok is True


def test_llm_and_agent_error_status(h: Harness) -> None:
    chat = finished(h, "chat m", {"gen_ai.operation.name": "chat"}, error="boom")
    agent = finished(h, "invoke_agent a", {"gen_ai.operation.name": "invoke_agent"}, error="boom")
    assert (extract.llm_call(chat).ok, extract.agent_span(agent).ok) == (False, False)


# --- conversation --------------------------------------------------------------------------------------

@pytest.mark.parametrize("attrs,expected", [
    ({"gen_ai.conversation.id": "conv-1"}, "conv-1"),
    ({"session.id": "sess-1"}, "sess-1"),
    ({"gen_ai.conversation.id": "conv-1", "session.id": "sess-1"}, "conv-1"),
    ({}, None),
])
def test_conversation_id(h: Harness, attrs: dict[str, str], expected: str | None) -> None:
    base = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "a"}
    assert extract.tool_step(finished(h, "execute_tool a", {**base, **attrs})).conversation_id == expected
    assert extract.llm_call(finished(h, "chat", {"gen_ai.operation.name": "chat", **attrs})).conversation_id \
        == expected


# --- never by name alone ------------------------------------------------------------------------------

@pytest.mark.parametrize("name,attrs", [
    ("execute_tool create_claim", {}),
    ("execute_tool create_claim", {"http.method": "POST"}),
    ("running tool", {}),
    ("running tool", {"something": "else"}),
    ("agent run", {"model_name": "gpt-4o"}),
    ("invoke_agent support", {"http.route": "/x"}),
    ("chat gpt-4o", {"http.method": "POST"}),
])
def test_span_name_alone_is_not_enough(h: Harness, name: str, attrs: dict[str, str]) -> None:
    assert extract.classify(finished(h, name, attrs)) is None


def test_execute_tool_name_with_tool_name_attribute_is_a_tool(h: Harness) -> None:
    """The name fallback applies when the attribute set agrees (no operation name set)."""
    span = finished(h, "execute_tool lookup_order", {"gen_ai.tool.name": "lookup_order"})
    assert extract.classify(span) == "tool"


def test_agent_name_from_span_name(h: Harness) -> None:
    span = finished(h, "invoke_agent support_agent", {"gen_ai.operation.name": "invoke_agent"})
    assert extract.agent_span(span).name == "support_agent"
    assert extract.agent_name_at_start(span) == "support_agent"


# --- result text --------------------------------------------------------------------------------------

@pytest.mark.parametrize("raw,expected", [
    (None, None),
    ("claim CL-1", "claim CL-1"),
    ('[{"text": "a"}, {"text": "b"}]', "a\nb"),
    ('  [{"text": "padded"}]  ', "padded"),
    (TOOL_MESSAGE, "order 88120: delivered"),
    ('{"type": "tool", "content": "done", "tool_call_id": "x"}', "done"),
    ('{"status": "delivered"}', '{"status": "delivered"}'),
    ("[not json", "[not json"),
    ("[]", "[]"),
    ('[{"text": "a"}, {"other": 1}]', '[{"text": "a"}, {"other": 1}]'),
    (42, "42"),
])
def test_result_text(raw: Any, expected: str | None) -> None:
    assert extract.result_text(raw) == expected


# --- arguments ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("raw,expected", [
    (None, {}),
    ('{"b": " x ", "a": 1}', {"a": 1, "b": "x"}),
    ("  88120 ", {"input": "88120"}),
    ("{not json", {"input": "{not json"}),
    ("[1, 2]", {"input": [1, 2]}),
    (b'{"a": "1"}', {"a": "1"}),
    (("a", "b"), {"input": ("a", "b")}),
])
def test_parse_arguments(raw: Any, expected: dict[str, Any]) -> None:
    assert parse_arguments(raw) == expected


def test_garbage_token_types_read_as_zero(h: Harness) -> None:
    span = finished(h, "chat", {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": "lots",
                                "gen_ai.usage.output_tokens": [1, 2]})
    call = extract.llm_call(span)
    assert (call.input_tokens, call.output_tokens) == (0, 0)


def test_numeric_string_tokens_are_read(h: Harness) -> None:
    span = finished(h, "chat", {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": "12",
                                "gen_ai.usage.output_tokens": 3.0})
    call = extract.llm_call(span)
    assert (call.input_tokens, call.output_tokens) == (12, 3)


@pytest.mark.parametrize("value", [-5, float("inf"), float("nan"), -1.5])
def test_impossible_token_counts_read_as_zero(h: Harness, value: Any) -> None:
    """A negative or infinite count would break the tokens counter (or extraction): read as 0."""
    span = finished(h, "chat", {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": value,
                                "gen_ai.usage.output_tokens": 7})
    call = extract.llm_call(span)
    assert (call.input_tokens, call.output_tokens) == (0, 7)


@pytest.mark.parametrize("how", ["copy", "deepcopy", "pickle"])
def test_steps_and_trajectories_copy_and_pickle(h: Harness, how: str) -> None:
    """A finished trajectory (its steps read lazily from spans) can be copied or pickled by an
    ``on_trajectory`` callback, in the compiled build as in plain Python."""
    import copy
    import pickle

    root = h.start("invoke_agent support", None, 1.0, {"gen_ai.operation.name": "invoke_agent",
                                                        "gen_ai.agent.name": "support"})
    tool = h.start("execute_tool lookup_order", root, 1.1, None)
    h.end(tool, 1.2, {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order",
                      "gen_ai.tool.call.arguments": '{"order_id": "88120"}', "gen_ai.tool.call.id": "c1"})
    h.end(root, 2.0, {})
    [t] = h.trajectories
    again = {"copy": copy.copy, "deepcopy": copy.deepcopy,
             "pickle": lambda x: pickle.loads(pickle.dumps(x))}[how]
    step = t.steps[0]
    got = again(step)
    assert got == step and got.arguments == {"order_id": "88120"} and got.call_id == "c1"
    traj = again(t)
    assert traj.steps[0] == step and traj.trace_hex == t.trace_hex and traj.outcome == t.outcome


def test_tool_step_can_be_subclassed() -> None:
    """ToolStep is public: a subclass works in the compiled build as in plain Python."""

    class Labelled(ToolStep):
        def label(self) -> str:
            return f"{self.tool}({self.arguments['order_id']})"

    step = Labelled("lookup_order", 1, 2, 3, 4, raw_arguments='{"order_id": " 88120 "}')
    assert step.label() == "lookup_order(88120)" and step.call_key == ("lookup_order", '{"order_id":"88120"}')


@pytest.mark.parametrize("how", ["copy", "deepcopy", "pickle"])
def test_records_copy_and_pickle(how: str) -> None:
    """The domain records a callback or a report may keep: equal after copy, deepcopy and pickle."""
    import copy
    import pickle

    from otel_agenteval.scoring.score import RunScore, StepMark

    again = {"copy": copy.copy, "deepcopy": copy.deepcopy,
             "pickle": lambda x: pickle.loads(pickle.dumps(x))}[how]
    mark = StepMark(1, "lookup_order", True, "matches step 1", 1, '{"order_id": "88120"}')
    records = [
        LLMCall("gpt-4o", 10, 2, 1, 2, 3, 4, cost_usd=0.5),
        AgentSpan("support", 1, 2, 3, end_ns=4, outcome="success", input_tokens=7),
        mark,
        RunScore("case", "ab" * 16, 0, "support", "pass", [], True, 1.0, 0, 0, 2, 2, 0, [mark], None,
                 violations=[("budget_breach", "warning", None)], cost_usd=0.1),
    ]
    for record in records:
        assert again(record) == record


# --- Google ADK, CrewAI, smolagents, Agent Framework (issue 13) ---------------------------------

ADK_ARGS = '{"order_id": "88120", "reason": "damaged"}'
ADK_RESULT = '{"claim_id": "CLM-5531", "order_id": "88120", "reason": "damaged"}'


def adk_tool(name: str, response: str, **more: Any) -> dict[str, Any]:
    """A google-adk 1.x tool span's attributes (2.x with ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1 likewise)."""
    return {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.type": "FunctionTool",
            "gcp.vertex.agent.llm_request": "{}", "gcp.vertex.agent.llm_response": "{}",
            "gcp.vertex.agent.tool_call_args": ADK_ARGS, "gen_ai.tool.call.id": "call_2_0",
            "gcp.vertex.agent.event_id": "e-1", "gcp.vertex.agent.tool_response": response, **more}


def test_adk_arguments_and_result_from_its_own_names(h: Harness) -> None:
    span = finished(h, "execute_tool create_claim", adk_tool("create_claim", ADK_RESULT))
    step = extract.tool_step(span)
    assert (step.ok, step.raw_arguments, step.raw_result, step.call_id) == (True, ADK_ARGS, ADK_RESULT, "call_2_0")
    assert step.arguments == {"order_id": "88120", "reason": "damaged"}


def test_adk_1x_error_only_in_the_response_is_a_failed_call(h: Harness) -> None:
    """ADK 1.x: status UNSET, no error.type; the error is the response ``{"error": "Type: message"}``."""
    span = finished(h, "execute_tool get_policy",
                    adk_tool("get_policy", '{"error": "RuntimeError: policy service unavailable"}'))
    step = extract.tool_step(span)
    assert (step.ok, step.error_type) == (False, "RuntimeError")


def test_adk_2x_error_keeps_its_error_type(h: Harness) -> None:
    span = finished(h, "execute_tool get_policy", adk_tool("get_policy", '{"error": "policy down"}',
                                                           **{"error.type": "TOOL_ERROR"}), error="TOOL_ERROR")
    step = extract.tool_step(span)
    assert (step.ok, step.error_type) == (False, "TOOL_ERROR")


@pytest.mark.parametrize("response", [
    '{"error": ""}',  # no message: nothing failed
    '{"error": "late", "order_id": "88120"}',  # a result that has an error field among others
    '{"error": not json',
    '{"status": "ok"}',
])
def test_adk_response_that_is_not_an_error(h: Harness, response: str) -> None:
    step = extract.tool_step(finished(h, "execute_tool get_policy", adk_tool("get_policy", response)))
    assert step.ok is True


def test_crewai_agent_named_by_graph_node_id(h: Harness) -> None:
    """CrewAI + OpenInference: the AGENT span is named after the method (wrappers) or the task text
    (event listener); ``graph.node.id`` holds the role, and ``agent.name`` is not set."""
    for name in ("support_agent._execute_core", "support_agent.My order 88120 arrived damaged, please fi.execute"):
        span = finished(h, name, {"openinference.span.kind": "AGENT", "graph.node.id": "support_agent",
                                  "input.value": '{"agent": {"role": "support_agent"}}'})
        assert extract.agent_span(span).name == "support_agent"
        assert extract.agent_name_at_start(span) == "support_agent"


def test_crewai_wrapper_agent_named_at_start_from_the_span_name(h: Harness) -> None:
    """CrewAI's wrappers set only the span kind at start: the role comes from ``<role>._execute_core``."""
    root = h.start("Crew_1.kickoff", attrs={"openinference.span.kind": "CHAIN"})
    span = h.start("support_agent._execute_core", root, attrs={"openinference.span.kind": "AGENT"})
    assert extract.agent_name_at_start(span) == "support_agent"


def test_crewai_tool_agent_role(h: Harness) -> None:
    span = finished(h, "lookup_order.run", {"openinference.span.kind": "TOOL", "tool.name": "lookup_order",
                                            "input.value": '{"order_id": "88120"}',
                                            "tool.agent_role": "support_agent"})
    assert extract.tool_step(span).agent_name == "support_agent"


SMOL_INPUT = '{"args": [], "sanitize_inputs_outputs": true, "kwargs": {"order_id": "88120", "reason": "damaged"}}'


def test_smolagents_root_and_arguments(h: Harness) -> None:
    root = h.start("support_agent.run", attrs={"openinference.span.kind": "AGENT",
                                               "input.value": '{"task": "My order"}'})
    assert extract.agent_name_at_start(root) == "support_agent"
    tool = finished(h, "SimpleTool", {"openinference.span.kind": "TOOL", "tool.name": "create_claim",
                                      "input.value": SMOL_INPUT, "output.value": ADK_RESULT}, parent=root)
    step = extract.tool_step(tool)
    assert (step.tool, step.arguments) == ("create_claim", {"order_id": "88120", "reason": "damaged"})
    h.end(root, 2.0)
    assert extract.agent_span(root).name == "support_agent"


@pytest.mark.parametrize(("raw", "arguments"), [
    ('{"args": [{"order_id": "1"}], "sanitize_inputs_outputs": true, "kwargs": {}}', {"order_id": "1"}),
    ('{"args": ["1"], "kwargs": {"reason": "x"}}', {"args": ["1"], "reason": "x"}),
    ('{"args": [], "kwargs": {}, "other": 1}', {"args": [], "kwargs": {}, "other": 1}),  # not the wrapper
    ('{"args": [], "kwargs": "x"}', {"args": [], "kwargs": "x"}),
    ('{"args": broken', {"input": '{"args": broken'}),
])
def test_smolagents_wrapper_variants(h: Harness, raw: str, arguments: dict[str, Any]) -> None:
    span = finished(h, "SimpleTool", {"openinference.span.kind": "TOOL", "tool.name": "t", "input.value": raw})
    assert extract.tool_step(span).arguments == arguments


def test_smolagents_final_answer_is_not_a_step(h: Harness) -> None:
    span = finished(h, "FinalAnswerTool", {"openinference.span.kind": "TOOL", "tool.name": "final_answer",
                                           "input.value": '{"args": [], "kwargs": {"answer": "done"}}'})
    assert extract.classify(span) is None
    own = finished(h, "SimpleTool", {"openinference.span.kind": "TOOL", "tool.name": "final_answer"})
    assert extract.classify(own) == "tool"  # a user's own tool of that name is a step


def test_agent_framework_default_has_no_arguments(h: Harness) -> None:
    """Agent Framework without ENABLE_SENSITIVE_DATA: the tool span has no arguments at all."""
    span = finished(h, "execute_tool create_claim", {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "create_claim", "gen_ai.tool.call.id": "c1",
        "gen_ai.tool.type": "function", "agent_framework.function.invocation.duration": 0.001})
    step = extract.tool_step(span)
    assert (step.raw_arguments, step.arguments) == (None, {})
    assert step.span_attributes["agent_framework.function.invocation.duration"] == 0.001
