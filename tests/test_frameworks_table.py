"""The table of framework facts (issue 25): argument envelopes taken off in one place, kinds told
from a framework's own names, a step's name as the framework writes it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from otel_agenteval.reading import frameworks as fw

ARGS = {"order_id": "88120", "reason": "damaged"}


@pytest.mark.parametrize(("raw", "want"), [
    # LangChain's callback envelope (OpenLLMetry): the `inputs`
    (json.dumps({"input_str": str(ARGS), "tags": ["seq:step:1"], "metadata": {"a": 1}, "inputs": ARGS,
                 "kwargs": {"tool_call_id": "c1"}}), ARGS),
    # a call's bound arguments: traceloop-sdk, LlamaIndex, DSPy, smolagents
    (json.dumps({"args": [], "kwargs": ARGS}), ARGS),
    (json.dumps({"kwargs": ARGS}), ARGS),
    (json.dumps({"args": [], "sanitize_inputs_outputs": True, "kwargs": ARGS}), ARGS),
    (json.dumps({"args": [ARGS], "kwargs": {}}), ARGS),
    (json.dumps({"args": ["x"], "kwargs": {"k": 1}}), {"args": ["x"], "k": 1}),
    # not an envelope: as it is
    (json.dumps(ARGS), json.dumps(ARGS)),
    (json.dumps({"kwargs": ARGS, "other": 1}), json.dumps({"kwargs": ARGS, "other": 1})),
    (json.dumps({"input_str": "x", "inputs": "not a dict"}), json.dumps({"input_str": "x", "inputs": "not a dict"})),
    ('{"args": not json', '{"args": not json'),
    (None, None),
    (ARGS, ARGS),
])
def test_argument_envelopes_taken_off(raw: Any, want: Any) -> None:
    assert fw.unwrap_arguments(raw) == want


@pytest.mark.parametrize(("name", "attrs", "kind"), [
    ("ai.toolCall", {"ai.operationId": "ai.toolCall"}, "tool"),
    ("ai.generateText.doGenerate", {"ai.operationId": "ai.generateText.doGenerate"}, "llm"),
    ("ai.generateText", {"ai.operationId": "ai.generateText"}, "agent"),
    ("ai.embed", {"ai.operationId": "ai.embed"}, None),
    ("lookup_order.tool", {"traceloop.span.kind": "tool"}, "tool"),
    ("support.agent", {"traceloop.span.kind": "agent"}, "agent"),
    ("wf.workflow", {"traceloop.span.kind": "workflow"}, None),
    ("haystack.agent.step.tool", {"haystack.tool.name": "t"}, "tool"),
    ("haystack.agent.step.llm", {"x": 1}, "llm"),
    ("haystack.component.run", {"haystack.component.type": "Agent", "haystack.component.name": "a"}, "agent"),
    ("haystack.component.run", {"haystack.component.type": "OpenAIChatGenerator"}, None),
])
def test_kind_from_a_frameworks_own_names(name: str, attrs: dict[str, Any], kind: str | None) -> None:
    assert fw.framework_kind(name, attrs) == kind


def test_agent_names_under_each_frameworks_key() -> None:
    assert fw.agent_name_of({"ai.telemetry.functionId": "support_agent"}) == "support_agent"
    assert fw.agent_name_of({"haystack.component.type": "Agent", "haystack.component.name": "support_agent"}) \
        == "support_agent"
    assert fw.agent_name_of({"haystack.component.type": "Router", "haystack.component.name": "r"}) is None
    assert fw.agent_name_of({"traceloop.span.kind": "agent", "traceloop.entity.name": "support_agent"}) \
        == "support_agent"
    assert fw.agent_name_of({"traceloop.span.kind": "tool", "traceloop.entity.name": "lookup_order"}) is None


def test_haystack_tokens_from_the_recorded_reply() -> None:
    out = json.dumps({"replies": [{"role": "assistant", "meta": {"model": "m", "usage": {
        "prompt_tokens": 100, "completion_tokens": 5}}}]})
    assert fw.usage_in_output({"haystack.agent.step.llm.output": out}) == ("m", 100, 5)
    assert fw.usage_in_output({"haystack.agent.step.llm.output": "not json"}) is None
    assert fw.usage_in_output({"haystack.agent.step.llm.output": json.dumps({"replies": [1, {"meta": 2}]})}) \
        == (None, 0, 0)
    assert fw.usage_in_output({}) is None


@pytest.mark.parametrize(("attrs", "root", "scope", "framework"), [
    ({"gen_ai.system": "autogen"}, None, None, "AutoGen 0.7"),
    ({"gen_ai.tool.name": "orders-x"}, {"sk.available_functions": "orders-x"}, None, "Semantic Kernel"),
    ({}, None, "semantic_kernel.functions.kernel_function", "Semantic Kernel"),
    ({"haystack.tool.name": "t"}, None, None, "Haystack"),
    ({"ai.operationId": "ai.toolCall"}, None, None, "Vercel AI SDK"),
    ({"traceloop.span.kind": "tool"}, None, None, "OpenLLMetry (traceloop)"),
    ({"gen_ai.system": "openai"}, None, "acme", "OpenTelemetry GenAI instrumentation"),
])
def test_capture_setting_per_framework(attrs: dict[str, Any], root: dict[str, Any] | None, scope: str | None,
                                       framework: str) -> None:
    assert fw.capture_setting(attrs, root, scope)[0] == framework
