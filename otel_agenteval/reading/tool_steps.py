"""A finished tool span -> its :class:`~otel_agenteval.model.trajectory.ToolStep`, read lazily: the name,
times, ids and outcome at once; arguments, results and the rest from the span when a rule asks."""

from __future__ import annotations

from typing import Any, Final

from opentelemetry.trace import StatusCode

from ..model.trajectory import ToolStep
from . import frameworks as fw
from . import semconv as sc
from .labels import safe_label
from .span_values import adk_error, conversation, error_type_of, find_event_attr, json_object
from .spans import UNSET_STATUS, attributes_of, view

# Final: read from C statics when compiled, not the module's globals
_ERROR: Final = StatusCode.ERROR
_UNSET: Final = UNSET_STATUS
_TRUE: Final = (True, "true", "True")
MAX_TOOL_NAME: Final = 256  # longer tool names (they come from models) are cut, with a hash
# the framework table's keys read on every tool step, bound here: C statics when compiled, where
# reading them through the (plain Python) frameworks module costs a module attribute lookup each time
_ERROR_FLAGS: Final[tuple[str, ...]] = fw.ERROR_FLAGS
_ENVELOPE_PREFIXES: Final[tuple[str, ...]] = fw.ENVELOPE_PREFIXES


def tool_name(span: Any, attrs: dict[str, Any] | None = None) -> str:
    if attrs is None:
        attrs = attributes_of(span)
    for key in fw.TOOL_NAME_KEYS:
        name = attrs.get(key)
        if name:
            if name in fw.TOOL_CLASS_NAMES:
                return tool_name_of_call(attrs) or str(name)
            return str(name)
    if span.name.startswith(sc.NAME_EXECUTE_TOOL):
        return span.name[len(sc.NAME_EXECUTE_TOOL) :].strip() or "unknown"
    if attrs.get(sc.OI_SPAN_KIND) == sc.OI_TOOL or fw.framework_kind(span.name, attrs) == fw.TOOL:
        # DSPy: <tool>.__call__; Langfuse: the @observe'd function's name
        return fw.tool_name_from_span_name(span.name) or "unknown"
    return "unknown"


def tool_name_of_call(attrs: dict[str, Any]) -> str | None:
    """The tool a call's recorded result names (a LangChain ToolMessage's ``name``), for a span that
    names only the tool's class (:data:`~.frameworks.TOOL_CLASS_NAMES`); None when the result names none."""
    value = json_object(fw.first_of(attrs, fw.RESULT_KEYS), "{")
    kwargs = value.get("kwargs") if value is not None else None
    name = kwargs.get("name") if type(kwargs) is dict else None
    return name if type(name) is str and name else None


class SpanToolStep(ToolStep):
    """A tool step that reads what rules may never need from its span's attributes, on first use."""

    __slots__ = ("_attrs", "_events", "scope")

    def __init__(self, tool: str, start_ns: int, end_ns: int, span_id: int, trace_id: int, ok: bool,
                 attrs: dict[str, Any], events: Any, scope: Any = None) -> None:
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
        self.scope = scope  # the span's instrumentation scope, where it has one (tells a framework apart)

    @property
    def raw_arguments(self) -> Any:
        a = self._attrs
        args = a.get(sc.TOOL_CALL_ARGUMENTS)
        if args is None:
            args = a.get(sc.OI_INPUT_VALUE)
            if args is None:
                args = a.get(sc.ADK_TOOL_CALL_ARGS)
            if args is None:
                args = a.get(sc.LEGACY_TOOL_ARGUMENTS)
            if args is None:
                args = fw.first_of(a, fw.ARGUMENT_KEYS)
            if args is None and self._events:  # Strands default mode: content only in events
                args = find_event_attr(self._events, sc.EVENT_TOOL_MESSAGE, sc.EVENT_ATTR_CONTENT)
        if type(args) is str and args.startswith(_ENVELOPE_PREFIXES):
            return fw.unwrap_arguments(args)  # the framework's envelope taken off, in one place
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
                if result is None:
                    result = fw.first_of(a, fw.RESULT_KEYS)
                if result is None and self._events:
                    result = find_event_attr(self._events, sc.EVENT_CHOICE, sc.EVENT_ATTR_MESSAGE)
        return result

    @property
    def call_id(self) -> str | None:
        a = self._attrs
        cid = a.get(sc.TOOL_CALL_ID)
        if cid is None:
            cid = fw.first_of(a, fw.CALL_ID_KEYS)
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
        return None if self.ok else error_type_of(self._attrs, self._events)


def tool_step(span: Any, attrs: dict[str, Any] | None = None) -> ToolStep:
    """A finished tool span as a step. Arguments and results stay in the span: read if needed."""
    span = view(span)
    return step_of(span, attrs if attrs is not None else attributes_of(span))


def step_of(span: Any, attrs: dict[str, Any], ctx: tuple[Any, ...] | None = None, end_ns: int = -1) -> ToolStep:
    """:func:`tool_step` of a span that already carries the SDK's private fields (the engine's path,
    which has read the span's context and end time already). A tool name longer than
    :data:`MAX_TOOL_NAME` (names come from models) is cut, with a hash."""
    ids: tuple[Any, ...] = span._context if ctx is None else ctx
    if end_ns < 0:
        end_ns = span._end_time or 0
    tool = attrs.get(sc.TOOL_NAME)
    if type(tool) is not str or not tool:
        tool = tool_name(span, attrs)
    if len(tool) > MAX_TOOL_NAME:
        tool = safe_label(tool, MAX_TOOL_NAME)
    return SpanToolStep(tool, span._start_time or 0, end_ns, ids[1], ids[0], is_ok(span, attrs), attrs, span._events,
                        getattr(span, "_instrumentation_scope", None))


def is_ok(span: Any, attrs: dict[str, Any]) -> bool:
    """Whether a tool call succeeded: status OK or UNSET and no ``gen_ai.tool.status=error``."""
    status = span._status
    if status is not _UNSET and status._status_code is _ERROR:
        return False
    flag = attrs.get(sc.TOOL_STATUS)
    if flag is not None:
        return flag != "error"
    for key in _ERROR_FLAGS:  # Haystack: haystack.tool.error=True, status left UNSET
        flag = attrs.get(key)
        if flag is not None and flag in _TRUE:  # absent, the usual case: no comparisons
            return False
    if not attrs:
        return False  # a tool span ended bare, before anything was recorded on it (Google ADK JS: the tool threw)
    response = attrs.get(sc.ADK_TOOL_RESPONSE)  # Google ADK 1.x: the error is only in the response
    return response is None or adk_error(response) is None


class NestedToolStep(ToolStep):
    """One call recorded by two tool spans, one inside the other: the outer span's step, with the
    inner's failure, and whichever recorded the arguments, result and call id."""

    __slots__ = ("span_attributes",)

    def __init__(self, outer: ToolStep, inner: ToolStep) -> None:
        args = outer.raw_arguments
        result = outer.raw_result
        ok = outer.ok and inner.ok
        super().__init__(outer.tool, outer.start_ns, outer.end_ns, outer.span_id, outer.trace_id, ok,
                         None if ok else (inner.error_type if not inner.ok else outer.error_type),
                         inner.call_id or outer.call_id, args if args is not None else inner.raw_arguments,
                         result if result is not None else inner.raw_result,
                         outer.conversation_id or inner.conversation_id, outer.agent_name or inner.agent_name,
                         outer.approved or inner.approved)
        self.span_attributes = {**getattr(inner, "span_attributes", {}), **getattr(outer, "span_attributes", {})}


def merge_nested(outer: ToolStep, inner: ToolStep) -> ToolStep:
    return NestedToolStep(outer, inner)
