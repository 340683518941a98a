"""What a run is made of: a tool step, a model call, an agent span (read from finished spans)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from .arguments import arguments_key, parse_arguments

try:
    from mypy_extensions import mypyc_attr
except ImportError:  # not installed: the decorator only speaks to the compiler (setup.py)
    def mypyc_attr(**_: Any) -> Any:  # type: ignore[misc]
        return lambda cls: cls


def rebuild(obj: Any) -> tuple[Any, ...]:
    """``__reduce__`` of the dataclasses here (their ``__init__`` is written out, so the compiled
    build has no default way to rebuild them): the class and its init fields, for copy and pickle."""
    return (type(obj), tuple(getattr(obj, f.name) for f in fields(obj) if f.init))


_FIELDS = ("tool", "start_ns", "end_ns", "span_id", "trace_id", "ok", "error_type", "call_id", "raw_arguments",
           "raw_result", "conversation_id", "agent_name", "approved", "index")


@mypyc_attr(allow_interpreted_subclasses=True)  # public: subclassable in the compiled build too
class ToolStep:
    """One tool call, as read from a finished tool span.

    Built with every field given (replay, scoring, tests), or by the extractor from a span's
    attributes, in which case the fields a rule may never need (arguments, result, call id,
    conversation, error type) are read from those attributes only on first use.
    """

    __slots__ = ("_args", "_given", "_key", "end_ns", "index", "ok", "span_id", "start_ns", "tool", "trace_id")

    def __init__(self, tool: str, start_ns: int, end_ns: int, span_id: int, trace_id: int, ok: bool = True,
                 error_type: str | None = None, call_id: str | None = None, raw_arguments: Any = None,
                 raw_result: Any = None, conversation_id: str | None = None, agent_name: str | None = None,
                 approved: bool = False, index: int = -1) -> None:
        self.tool = tool
        self.start_ns = start_ns
        self.end_ns = end_ns
        self.span_id = span_id
        self.trace_id = trace_id
        self.ok = ok
        self.index = index  # position in the trajectory, set when appended
        self._given: dict[str, Any] = {
            "error_type": error_type, "call_id": call_id, "raw_arguments": raw_arguments, "raw_result": raw_result,
            "conversation_id": conversation_id, "agent_name": agent_name, "approved": approved}
        self._args: dict[str, Any] | None = None
        self._key: tuple[str, str] | None = None

    # fields read lazily by subclasses; given ones here
    @property
    def error_type(self) -> str | None:
        return self._given["error_type"]  # type: ignore[no-any-return]

    @property
    def call_id(self) -> str | None:
        return self._given["call_id"]  # type: ignore[no-any-return]

    @property
    def raw_arguments(self) -> Any:
        return self._given["raw_arguments"]

    @property
    def raw_result(self) -> Any:
        return self._given["raw_result"]

    @property
    def conversation_id(self) -> str | None:
        return self._given["conversation_id"]  # type: ignore[no-any-return]

    @property
    def agent_name(self) -> str | None:
        return self._given["agent_name"]  # type: ignore[no-any-return]

    @property
    def approved(self) -> bool:
        return bool(self._given["approved"])

    @property
    def arguments(self) -> dict[str, Any]:
        """Normalised arguments, parsed on first use (lazily: most steps never need them)."""
        if self._args is None:
            self._args = parse_arguments(self.raw_arguments)
        return self._args

    @property
    def arguments_key(self) -> str:
        return self.call_key[1]

    @property
    def call_key(self) -> tuple[str, str]:
        """(tool, canonical arguments): equal keys mean the same call. Computed once."""
        key = self._key
        if key is None:
            key = self._key = (self.tool, arguments_key(self.arguments))
        return key

    @property
    def duration_s(self) -> float:
        return max(0, self.end_ns - self.start_ns) / 1e9

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f) for f in _FIELDS)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolStep):
            return NotImplemented
        return self._values() == other._values()

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        """Copied and pickled as a plain step with every field given (lazy ones read now); the
        compiled build's classes have no default way to be rebuilt."""
        return (ToolStep, self._values())

    def __repr__(self) -> str:
        return "ToolStep(" + ", ".join(f"{f}={getattr(self, f)!r}" for f in _FIELDS) + ")"


@dataclass(slots=True)
class LLMCall:
    """One model call, as read from a finished chat/LLM span."""

    model: str | None
    input_tokens: int
    output_tokens: int
    start_ns: int
    end_ns: int
    span_id: int
    trace_id: int
    ok: bool = True
    conversation_id: str | None = None
    agent_name: str | None = None
    cost_usd: float = 0.0  # priced by the engine from the policy's table

    # written out (dataclass keeps it): compiled, a generated __init__ would run as Python
    def __init__(self, model: str | None, input_tokens: int, output_tokens: int, start_ns: int, end_ns: int,
                 span_id: int, trace_id: int, ok: bool = True, conversation_id: str | None = None,
                 agent_name: str | None = None, cost_usd: float = 0.0) -> None:
        self.model = model
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.start_ns = start_ns
        self.end_ns = end_ns
        self.span_id = span_id
        self.trace_id = trace_id
        self.ok = ok
        self.conversation_id = conversation_id
        self.agent_name = agent_name
        self.cost_usd = cost_usd

    def __reduce__(self) -> tuple[Any, ...]:
        return rebuild(self)


@dataclass(slots=True)
class AgentSpan:
    """An agent (or local root) span, read at start and again at end."""

    name: str | None
    span_id: int
    trace_id: int
    start_ns: int
    end_ns: int = 0
    ok: bool = True
    is_root: bool = False
    conversation_id: str | None = None
    outcome: str | None = None
    model: str | None = None
    input_tokens: int = 0  # aggregated totals, used only when no LLM span was seen
    output_tokens: int = 0

    def __init__(self, name: str | None, span_id: int, trace_id: int, start_ns: int, end_ns: int = 0, ok: bool = True,
                 is_root: bool = False, conversation_id: str | None = None, outcome: str | None = None,
                 model: str | None = None, input_tokens: int = 0, output_tokens: int = 0) -> None:
        self.name = name
        self.span_id = span_id
        self.trace_id = trace_id
        self.start_ns = start_ns
        self.end_ns = end_ns
        self.ok = ok
        self.is_root = is_root
        self.conversation_id = conversation_id
        self.outcome = outcome
        self.model = model
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens

    def __reduce__(self) -> tuple[Any, ...]:
        return rebuild(self)


