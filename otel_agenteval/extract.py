"""Span -> tool step, LLM call, agent span, or nothing. Pure functions, read at span end.

Works on anything shaped like the SDK's ``ReadableSpan`` (``name``, ``context``, ``parent``,
``start_time``, ``end_time``, ``status``, ``attributes``, ``events``, ``resource``): the
processor hands real spans, the replay readers hand :class:`~otel_agenteval.replay.spanview.RecordedSpan`.
"""

from __future__ import annotations

import inspect
import json
from typing import Any, Final, Literal

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk import trace as _sdk_trace
from opentelemetry.trace import StatusCode

from . import _semconv as sc
from ._spanfields import SpanView
from .trajectory import AgentSpan, LLMCall, ToolStep

Kind = Literal["tool", "llm", "agent", "confirmation"]
TOOL: Final = "tool"
LLM: Final = "llm"
AGENT: Final = "agent"
CONFIRMATION: Final = "confirmation"  # an agenteval.confirmation span (record_confirmation)

_OP_KIND: Final[dict[str, Kind]] = {sc.OP_EXECUTE_TOOL: TOOL, sc.OP_INVOKE_AGENT: AGENT}
_OP_KIND.update({op: LLM for op in sc.LLM_OPERATIONS})
OP_KIND: Final = _OP_KIND  # gen_ai.operation.name -> kind; other operations (a Strands cycle, say) are walked through
_OI_KIND: dict[str, Kind] = {sc.OI_TOOL: TOOL, sc.OI_LLM: LLM, sc.OI_AGENT: AGENT}


# the SDK's own span classes (the tracer makes ``_Span``; on_end gets a ``ReadableSpan``)
_SDK_SPANS = frozenset(c for c in (getattr(_sdk_trace, n, None) for n in ("ReadableSpan", "Span", "_Span"))
                       if isinstance(c, type))
_EMPTY: Final[dict[str, Any]] = {}
# Final: a compiled module reads these from a C static, not its globals dict
_BOUNDED: Final = BoundedAttributes
_ERROR: Final = StatusCode.ERROR


def _default_status() -> Any:
    """The UNSET status object the SDK shares among spans whose status was never set (its
    ``ReadableSpan`` default), so checking a span's status is one identity test in the usual case."""
    try:
        default = inspect.signature(_sdk_trace.ReadableSpan.__init__).parameters["status"].default
    except (AttributeError, KeyError, TypeError, ValueError):
        return None
    return default if getattr(default, "status_code", None) is StatusCode.UNSET else None


UNSET_STATUS: Final = _default_status()

# Classes whose instances carry the SDK ``ReadableSpan``'s private fields (``_context``,
# ``_parent``, ``_start_time``, ``_end_time``, ``_status``, ``_attributes``, ``_events``,
# ``_resource``, ``_name``), contexts indexable as ``(trace_id, span_id, is_remote, ...)``.
# The engine's hot path reads those fields directly: no property call per field.
FAST_SPANS: Final[set[type]] = {*_SDK_SPANS, SpanView}
# the classes on_start and on_end get from the SDK, compared by identity before the set lookup
STARTED_SPAN: Final[Any] = getattr(_sdk_trace, "_Span", None)
ENDED_SPAN: Final[Any] = getattr(_sdk_trace, "ReadableSpan", None)


def view(span: Any) -> Any:
    """The span itself when it carries the SDK's private fields, else a :class:`SpanView` of it."""
    return span if type(span) in FAST_SPANS else SpanView(span)


def register_span_type(cls: type) -> type:
    """Declare that ``cls`` carries the SDK's private span fields (see :data:`FAST_SPANS`)."""
    FAST_SPANS.add(cls)
    return cls


def attributes_of(span: Any) -> dict[str, Any]:
    """A span's attributes for reading, as a plain dict where the SDK holds one.

    ``ReadableSpan.attributes`` builds a new MappingProxy on each access and
    ``BoundedAttributes.get`` runs in Python; the processor only reads, so it takes the inner
    dict. Anything else (replayed spans) is read through ``.attributes``.
    """
    return as_dict(span._attributes if type(span) in FAST_SPANS else span.attributes)


def as_dict(attributes: Any) -> dict[str, Any]:
    """Attributes as a dict to read: the SDK's inner dict, a dict as it is, another mapping copied."""
    if type(attributes) is _BOUNDED:
        return attributes._dict  # type: ignore[no-any-return]
    if type(attributes) is dict:
        return attributes
    return dict(attributes) if attributes else _EMPTY


def events_of(span: Any) -> Any:
    """A finished span's events without the SDK's per-access tuple copy (read-only use)."""
    if type(span) in FAST_SPANS:
        return span._events or ()
    return span.events or ()


def classify(span: Any, attrs: dict[str, Any] | None = None) -> Kind | None:
    """What a finished span is, from its attributes; the span name only as a tie-breaker."""
    if attrs is None:
        attrs = attributes_of(span)
    if not attrs:
        return None
    op = attrs.get(sc.OPERATION_NAME)
    if op is not None:
        return _OP_KIND.get(op)
    oi = attrs.get(sc.OI_SPAN_KIND)
    if oi is not None:
        if oi == sc.OI_AGENT and _is_oi_grouping(attrs):
            return None
        if oi == sc.OI_TOOL and span.name == sc.SMOLAGENTS_FINAL_ANSWER_SPAN:
            return None  # smolagents' closing final_answer call: the run's answer, not a tool step
        return _OI_KIND.get(oi)
    name = span.name
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
        if attrs.get(sc.OI_SPAN_KIND) == sc.OI_AGENT:
            return True
    name = span.name
    return name.startswith(sc.NAME_INVOKE_AGENT) or name == sc.NAME_LEGACY_AGENT


def agent_name_at_start(span: Any) -> str | None:
    attrs = attributes_of(span)
    name = attrs.get(sc.AGENT_NAME) or attrs.get(sc.OI_AGENT_NAME) or attrs.get(sc.LEGACY_AGENT_NAME)
    if name:
        return str(name)
    guess = _name_from_span_name(span.name)
    if guess is None and attrs.get(sc.OI_SPAN_KIND) == sc.OI_AGENT:
        node = attrs.get(sc.OI_GRAPH_NODE_ID)  # CrewAI (event listener) has it at start
        if node:
            return str(node)
        guess = _oi_agent_from_span_name(span.name)
        if guess is None and not is_local_root(span):
            # OpenInference (OpenAI Agents) sets agent.name only at end, but names a nested agent span
            # after its agent; without this guess, tool calls ending before it would count as "unknown".
            return span.name or None
    return guess


def is_local_root(span: Any) -> bool:
    """No parent, or a remote one: the span is its service's entry into the trace."""
    parent = span.parent
    return parent is None or parent.is_remote


def _is_oi_grouping(attrs: dict[str, Any]) -> bool:
    """An OpenInference AGENT span naming no agent and carrying no input or output groups a run.

    The OpenAI Agents SDK's trace (its workflow) is exported this way, above the real agent span;
    read as an agent it would count a second, empty trajectory for every run.
    """
    return not (attrs.get(sc.OI_AGENT_NAME) or sc.OI_INPUT_VALUE in attrs or sc.OI_OUTPUT_VALUE in attrs)


def _name_from_span_name(name: str) -> str | None:
    if name.startswith(sc.NAME_INVOKE_AGENT + " "):
        return name[len(sc.NAME_INVOKE_AGENT) + 1 :].strip() or None
    return None


def _oi_agent_from_span_name(name: str) -> str | None:
    """The agent in an OpenInference AGENT span name that ends in a method (``support_agent.run``,
    smolagents; ``support_agent._execute_core``, CrewAI's wrappers)."""
    for suffix in sc.OI_AGENT_NAME_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)].strip() or None
    return None


def error_type(span: Any) -> str | None:
    return _error_type(attributes_of(span), span.events)


def _error_type(attrs: dict[str, Any], events: Any) -> str:
    et = attrs.get(sc.ERROR_TYPE)
    if et:
        return str(et)
    for ev in events or ():
        if ev.name == sc.EVENT_EXCEPTION:
            t = (ev.attributes or {}).get("exception.type")
            if t:
                return str(t).rsplit(".", 1)[-1]
    adk = _adk_error(attrs.get(sc.ADK_TOOL_RESPONSE))
    if adk:  # "RuntimeError: policy service unavailable" -> RuntimeError
        head = adk.split(":", 1)[0].strip()
        if head.isidentifier():
            return head.rsplit(".", 1)[-1]
    return "error"


def _adk_error(response: Any) -> str | None:
    """The error of a Google ADK tool response ``{"error": "..."}`` (how ADK 1.x records a tool
    that raised, and what an ``on_tool_error_callback`` returns), else None."""
    if type(response) is not str or not response.startswith(sc.ADK_ERROR_PREFIX):
        return None
    try:
        value = json.loads(response)
    except ValueError:
        return None
    if type(value) is dict and len(value) == 1:
        error = value.get("error")
        if error:
            return str(error)
    return None


def _unwrap_call(raw: Any) -> Any:
    """smolagents' tool input ``{"args": [], "sanitize_inputs_outputs": true, "kwargs": {...}}``
    -> the model's arguments (``kwargs``); anything else as it is."""
    if type(raw) is not str or not raw.startswith(sc.SMOLAGENTS_CALL_PREFIX):
        return raw
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    if type(value) is not dict or not value.keys() <= sc.SMOLAGENTS_CALL_KEYS:
        return raw
    args, kwargs = value.get("args") or [], value.get("kwargs")
    if type(kwargs) is not dict or type(args) is not list:
        return raw
    if not args:
        return kwargs
    if len(args) == 1 and type(args[0]) is dict and not kwargs:
        return args[0]  # the arguments passed as one dict
    return {"args": args, **kwargs}


def conversation(attrs: dict[str, Any]) -> str | None:
    cid = attrs.get(sc.CONVERSATION_ID) or attrs.get(sc.OI_SESSION_ID)
    return str(cid) if cid else None


def _find_event_attr(events: Any, event_name: str, key: str) -> Any:
    for ev in events:
        if ev.name == event_name:
            value = (ev.attributes or {}).get(key)
            if value is not None:
                return value
    return None


def tool_name(span: Any, attrs: dict[str, Any] | None = None) -> str:
    if attrs is None:
        attrs = attributes_of(span)
    name = attrs.get(sc.TOOL_NAME) or attrs.get(sc.OI_TOOL_NAME)
    if name:
        return str(name)
    if span.name.startswith(sc.NAME_EXECUTE_TOOL):
        return span.name[len(sc.NAME_EXECUTE_TOOL) :].strip() or "unknown"
    if attrs.get(sc.OI_SPAN_KIND) == sc.OI_TOOL:
        return span.name or "unknown"
    return "unknown"


class SpanToolStep(ToolStep):
    """A tool step that reads what rules may never need from its span's attributes, on first use."""

    __slots__ = ("_attrs", "_events")

    def __init__(self, tool: str, start_ns: int, end_ns: int, span_id: int, trace_id: int, ok: bool,
                 attrs: dict[str, Any], events: Any) -> None:
        self.tool = tool
        self.start_ns = start_ns
        self.end_ns = end_ns
        self.span_id = span_id
        self.trace_id = trace_id
        self.ok = ok
        self.index = -1
        self._args = None
        self._key = None
        self._attrs = attrs
        self._events = events

    @property
    def raw_arguments(self) -> Any:
        a = self._attrs
        args = a.get(sc.TOOL_CALL_ARGUMENTS)
        if args is None:
            args = a.get(sc.OI_INPUT_VALUE)
            if args is not None:
                return _unwrap_call(args)
            args = a.get(sc.ADK_TOOL_CALL_ARGS)
            if args is None:
                args = a.get(sc.LEGACY_TOOL_ARGUMENTS)
                if args is None and self._events:  # Strands default mode: content only in events
                    args = _find_event_attr(self._events, sc.EVENT_TOOL_MESSAGE, sc.EVENT_ATTR_CONTENT)
        return args

    @property
    def raw_result(self) -> Any:
        a = self._attrs
        result = a.get(sc.TOOL_CALL_RESULT)
        if result is None:
            result = a.get(sc.OI_OUTPUT_VALUE)
            if result is None:
                result = a.get(sc.ADK_TOOL_RESPONSE)
            if result is None:
                result = a.get(sc.LEGACY_TOOL_RESPONSE)
                if result is None and self._events:
                    result = _find_event_attr(self._events, sc.EVENT_CHOICE, sc.EVENT_ATTR_MESSAGE)
        return result

    @property
    def call_id(self) -> str | None:
        cid = self._attrs.get(sc.TOOL_CALL_ID)
        return str(cid) if cid else None

    @property
    def conversation_id(self) -> str | None:
        return conversation(self._attrs)

    @property
    def agent_name(self) -> str | None:
        name = self._attrs.get(sc.AGENT_NAME) or self._attrs.get(sc.CREWAI_TOOL_AGENT_ROLE)
        return str(name) if name else None

    @property
    def span_attributes(self) -> dict[str, Any]:
        """The tool span's attributes, to read (what tells the framework apart, say)."""
        return self._attrs

    @property
    def approved(self) -> bool:
        return self._attrs.get(sc.AE_APPROVED) in (True, "true")

    @property
    def error_type(self) -> str | None:
        return None if self.ok else _error_type(self._attrs, self._events)


def tool_step(span: Any, attrs: dict[str, Any] | None = None) -> ToolStep:
    """A finished tool span as a step. Arguments and results stay in the span: read if needed."""
    span = view(span)
    return step_of(span, attrs if attrs is not None else attributes_of(span))


def step_of(span: Any, attrs: dict[str, Any], ctx: tuple[Any, ...] | None = None, end_ns: int = -1) -> ToolStep:
    """:func:`tool_step` of a span that already carries the SDK's private fields (the engine's path,
    which has read the span's context and end time already)."""
    ids: tuple[Any, ...] = span._context if ctx is None else ctx
    if end_ns < 0:
        end_ns = span._end_time or 0
    tool = attrs.get(sc.TOOL_NAME)
    return SpanToolStep(tool if type(tool) is str and tool else tool_name(span, attrs), span._start_time or 0,
                        end_ns, ids[1], ids[0], is_ok(span, attrs), attrs, span._events)


def is_ok(span: Any, attrs: dict[str, Any]) -> bool:
    """Whether a tool call succeeded: status OK or UNSET and no ``gen_ai.tool.status=error``."""
    status = span._status
    if status is not UNSET_STATUS and status._status_code is _ERROR:
        return False
    flag = attrs.get(sc.TOOL_STATUS)
    if flag is not None:
        return flag != "error"
    response = attrs.get(sc.ADK_TOOL_RESPONSE)  # Google ADK 1.x: the error is only in the response
    return response is None or _adk_error(response) is None


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
    name: Any = attrs.get(sc.AGENT_NAME) or attrs.get(sc.OI_AGENT_NAME) or attrs.get(sc.LEGACY_AGENT_NAME)
    if not name and attrs.get(sc.OI_SPAN_KIND) == sc.OI_AGENT:
        name = attrs.get(sc.OI_GRAPH_NODE_ID) or _oi_agent_from_span_name(span._name)  # CrewAI; smolagents
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
        name = _name_from_span_name(span._name)
        if name is None and attrs.get(sc.OI_SPAN_KIND) == sc.OI_AGENT and is_local_root(span):
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


def result_text(raw: Any) -> str | None:
    """A tool result as plain text: unwraps ``[{"text": …}]`` and serialised ToolMessages."""
    if raw is None:
        return None
    if not isinstance(raw, str):
        return str(raw)
    text = raw.strip()
    if text[:1] not in ("[", "{"):
        return raw
    try:
        value = json.loads(text)
    except ValueError:
        return raw
    if isinstance(value, list) and value and all(isinstance(v, dict) and "text" in v for v in value):
        return "\n".join(str(v["text"]) for v in value)
    if isinstance(value, dict):
        kwargs = value.get("kwargs")
        if value.get("lc") and isinstance(kwargs, dict) and "content" in kwargs:
            return str(kwargs["content"])  # LangChain ToolMessage
        if value.get("type") == "tool" and "content" in value:
            return str(value["content"])
    return raw
