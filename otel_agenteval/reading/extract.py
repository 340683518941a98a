"""Span -> tool step, LLM call, agent span, or nothing. Pure functions, read at span end.

Works on anything shaped like the SDK's ``ReadableSpan`` (``name``, ``context``, ``parent``,
``start_time``, ``end_time``, ``status``, ``attributes``, ``events``, ``resource``): the
processor hands real spans, the replay readers hand :class:`~otel_agenteval.replay.spanview.RecordedSpan`.

Reading spans fast is in :mod:`.spans`, tool steps in :mod:`.tool_steps`, the values frameworks write
their own way in :mod:`.span_values`; this module decides what a span is and reads model calls and
agent spans.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from opentelemetry.trace import StatusCode

from ..model.trajectory import AgentSpan, LLMCall
from . import frameworks as fw
from . import semconv as sc
from .span_values import (
    conversation,
    error_type_of,
    is_oi_grouping,
    name_from_span_name,
    oi_agent_from_span_name,
    result_text,
)
from .spanfields import SpanView
from .spans import (
    ENDED_SPAN,
    FAST_SPANS,
    STARTED_SPAN,
    UNSET_STATUS,
    as_dict,
    attributes_of,
    events_of,
    is_local_root,
    register_span_type,
    view,
)
from .tool_steps import SpanToolStep, is_ok, step_of, tool_name, tool_step

Kind = Literal["tool", "llm", "agent", "confirmation"]
TOOL: Final = "tool"
LLM: Final = "llm"
AGENT: Final = "agent"
CONFIRMATION: Final = "confirmation"  # an agenteval.confirmation span (record_confirmation)

_OP_KIND: Final[dict[str, Kind]] = {sc.OP_EXECUTE_TOOL: TOOL, sc.OP_INVOKE_AGENT: AGENT}
_OP_KIND.update({op: LLM for op in sc.LLM_OPERATIONS})
OP_KIND: Final = _OP_KIND  # gen_ai.operation.name -> kind; other operations (a Strands cycle, say) are walked through
_OI_KIND: dict[str, Kind] = {sc.OI_TOOL: TOOL, sc.OI_LLM: LLM, sc.OI_AGENT: AGENT}

_ERROR: Final = StatusCode.ERROR


def classify(span: Any, attrs: dict[str, Any] | None = None) -> Kind | None:
    """What a finished span is, from its attributes; the span name only as a tie-breaker."""
    if attrs is None:
        attrs = attributes_of(span)
    if not attrs:
        name = span.name
        if span.parent is not None and name.startswith(sc.NAME_EXECUTE_TOOL):
            return TOOL  # a tool span in a run ended bare: the call failed before anything was set (ADK JS)
        kind = fw.SPAN_NAME_KINDS.get(name)  # Haystack's model step carries no attribute by default
        return kind  # type: ignore[return-value]
    op = attrs.get(sc.OPERATION_NAME)
    if op is not None:
        return _OP_KIND.get(op)
    oi = attrs.get(sc.OI_SPAN_KIND)
    if oi is not None:
        if oi == sc.OI_AGENT and is_oi_grouping(attrs):
            return None
        if oi == sc.OI_TOOL and span.name in fw.INTERNAL_TOOL_SPANS:
            return None  # smolagents' final_answer, DSPy ReAct's finish: the framework's, not a tool step
        if oi == sc.OI_LLM and span.name.endswith(fw.NOT_MODEL_CALL_SUFFIXES):
            return None  # LlamaIndex preparing a call, not a call
        return _OI_KIND.get(oi)
    name = span.name
    kind = fw.framework_kind(name, attrs)
    if kind is not None:
        return kind  # type: ignore[return-value]
    if name == sc.AE_CONFIRMATION_SPAN:
        return CONFIRMATION
    if sc.TOOL_NAME in attrs and name.startswith(sc.NAME_EXECUTE_TOOL):
        return TOOL
    if name == sc.NAME_LEGACY_TOOL and (sc.LEGACY_TOOL_ARGUMENTS in attrs or sc.TOOL_NAME in attrs):
        return TOOL
    if name == sc.NAME_LEGACY_AGENT and sc.LEGACY_AGENT_NAME in attrs:
        return AGENT
    return None


def is_agent_at_start(span: Any) -> bool:
    """Whether a span that is only starting is an agent span (several frameworks set little then)."""
    attrs = attributes_of(span)
    if attrs:
        op = attrs.get(sc.OPERATION_NAME)
        if op is not None:
            return op == sc.OP_INVOKE_AGENT
        oi = attrs.get(sc.OI_SPAN_KIND)
        if oi == sc.OI_AGENT:
            return True
        if oi is None and fw.framework_kind(span.name, attrs) == fw.AGENT:
            return True
    name = span.name
    return name.startswith(sc.NAME_INVOKE_AGENT) or name == sc.NAME_LEGACY_AGENT


def stated_agent_name(attrs: dict[str, Any]) -> str | None:
    """The agent name a span states outright (GenAI semconv, OpenInference, legacy), the semconv
    one read here first: the framework table is plain Python, a call even in the compiled build."""
    name = attrs.get(sc.AGENT_NAME)
    if name:
        return str(name)
    return fw.agent_name_of(attrs)


def agent_name_at_start(span: Any, attrs: dict[str, Any] | None = None) -> str | None:
    """The agent name guessed from how a starting agent span looks, for one that states none
    (:func:`stated_agent_name` is read first)."""
    if attrs is None:
        attrs = attributes_of(span)
    guess = name_from_span_name(span.name)
    if guess is None and attrs.get(sc.LANGFUSE_TYPE) == "agent":
        return span.name or None  # Langfuse's @observe(as_type="agent"): the function's name
    if guess is None and attrs.get(sc.OI_SPAN_KIND) == sc.OI_AGENT:
        node = attrs.get(sc.OI_GRAPH_NODE_ID)  # CrewAI (event listener) has it at start
        if node:
            return str(node)
        guess = oi_agent_from_span_name(span.name)
        if guess is None and not is_local_root(span):
            # OpenInference (OpenAI Agents) sets agent.name only at end, but names a nested agent span
            # after its agent; without this guess, tool calls ending before it would count as "unknown".
            return span.name or None
    return guess


def error_type(span: Any) -> str | None:
    return error_type_of(attributes_of(span), span.events)


_MAX_TOKENS: Final = 1 << 53  # more than any run uses; past it a count could not be compared with a float budget


def _int(value: Any) -> int:
    """A token count; garbage (non-numeric, inf, negative, absurdly large) reads as 0 rather than
    breaking counters and budgets."""
    try:
        n = int(value) if value is not None else 0
    except (TypeError, ValueError, OverflowError):
        return 0
    return n if 0 <= n <= _MAX_TOKENS else 0


def usage(attrs: dict[str, Any]) -> tuple[str | None, int, int]:
    """(model, input tokens, output tokens) of a model-call span. Tokens are counted from these only."""
    inp = attrs.get(sc.USAGE_INPUT_TOKENS)
    if inp is None:
        inp = attrs.get(sc.USAGE_PROMPT_TOKENS)
        if inp is None:
            inp = attrs.get(sc.OI_PROMPT_TOKENS)
    out = attrs.get(sc.USAGE_OUTPUT_TOKENS)
    if out is None:
        out = attrs.get(sc.USAGE_COMPLETION_TOKENS)
        if out is None:
            out = attrs.get(sc.OI_COMPLETION_TOKENS)
    model = attrs.get(sc.RESPONSE_MODEL) or attrs.get(sc.REQUEST_MODEL) or attrs.get(sc.OI_MODEL_NAME)
    if inp is None and out is None and not model:
        found = fw.usage_in_output(attrs)  # Haystack: only in the recorded reply (content tracing on)
        if found is not None:
            model, inp, out = found
    return (model if type(model) is str else (str(model) if model else None),
            inp if type(inp) is int and 0 <= inp <= _MAX_TOKENS else _int(inp),
            out if type(out) is int and 0 <= out <= _MAX_TOKENS else _int(out))


def llm_call(span: Any, attrs: dict[str, Any] | None = None) -> LLMCall:
    """A finished model-call span."""
    span = view(span)
    if attrs is None:
        attrs = attributes_of(span)
    model, inp, out = usage(attrs)
    ctx = span._context
    agent = attrs.get(sc.AGENT_NAME)
    return LLMCall(model, inp, out, span._start_time or 0, span._end_time or 0, ctx[1], ctx[0],
                   span._status._status_code is not _ERROR, conversation(attrs),
                   agent if type(agent) is str or agent is None else str(agent))


def agent_span(span: Any, attrs: dict[str, Any] | None = None) -> AgentSpan:
    """A finished agent span: name, conversation, outcome, and aggregated totals (fallback only)."""
    span = view(span)
    if attrs is None:
        attrs = attributes_of(span)
    name: Any = stated_agent_name(attrs)
    if not name and attrs.get(sc.OI_SPAN_KIND) == sc.OI_AGENT:
        name = attrs.get(sc.OI_GRAPH_NODE_ID) or oi_agent_from_span_name(span._name)  # CrewAI; smolagents
    inp = attrs.get(sc.AGG_INPUT_TOKENS)
    if inp is None:
        inp = attrs.get(sc.USAGE_INPUT_TOKENS)
    out = attrs.get(sc.AGG_OUTPUT_TOKENS)
    if out is None:
        out = attrs.get(sc.USAGE_OUTPUT_TOKENS)
    outcome = attrs.get(sc.AE_OUTCOME)
    model = attrs.get(sc.RESPONSE_MODEL) or attrs.get(sc.REQUEST_MODEL) or attrs.get("model_name")
    ctx = span._context
    if not name:
        name = name_from_span_name(span._name)
        if name is None and attrs.get(sc.LANGFUSE_TYPE) == "agent":
            name = span._name or None  # Langfuse's @observe(as_type="agent"): the function's name
        elif name is None and attrs.get(sc.OI_SPAN_KIND) == sc.OI_AGENT and is_local_root(span):
            # OpenInference LangChain sets no agent.name; it names the graph's root span after
            # the graph (create_react_agent(name=...)). Nested AGENT spans there are graph nodes.
            name = span._name or None
    return AgentSpan(  # positional: a third of the cost of keywords on this path
        name if type(name) is str else (str(name) if name else None),
        ctx[1], ctx[0], span._start_time or 0, span._end_time or 0,
        span._status._status_code is not _ERROR,
        False,
        conversation(attrs),
        str(outcome) if outcome else None,
        model if type(model) is str else (str(model) if model else None),
        inp if type(inp) is int and inp >= 0 else _int(inp),
        out if type(out) is int and out >= 0 else _int(out),
    )


def root_outcome(span: Any) -> tuple[str | None, bool]:
    """For a non-agent local root: the explicit outcome attribute and whether it is OK."""
    attrs = attributes_of(span)
    outcome = attrs.get(sc.AE_OUTCOME)
    return (str(outcome) if outcome else None, span.status.status_code is not StatusCode.ERROR)



__all__ = [
    "AGENT", "CONFIRMATION", "ENDED_SPAN", "FAST_SPANS", "LLM", "OP_KIND", "STARTED_SPAN", "TOOL", "UNSET_STATUS",
    "SpanToolStep", "SpanView", "agent_name_at_start", "agent_span", "as_dict", "attributes_of", "classify",
    "conversation", "error_type", "events_of", "is_agent_at_start", "is_local_root", "is_ok", "llm_call",
    "register_span_type", "result_text", "root_outcome", "stated_agent_name", "step_of", "tool_name", "tool_step",
    "usage", "view",
]
