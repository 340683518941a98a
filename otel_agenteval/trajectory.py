"""The domain objects: a tool step, an LLM call, a trajectory and its conversation."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, fields
from typing import Any, Final, Literal

from .arguments import arguments_key, parse_arguments

try:
    from mypy_extensions import mypyc_attr
except ImportError:  # not installed: the decorator only speaks to the compiler (setup.py)
    def mypyc_attr(**_: Any) -> Any:  # type: ignore[misc]
        return lambda cls: cls

Outcome = Literal["success", "failure", "unknown", "incomplete"]

_INF = float("inf")


class Limits:
    """An agent's budget as the numbers the engine compares against as events arrive (none: infinity)."""

    __slots__ = ("check_repeats", "max_cost_usd", "max_duration_ns", "max_llm_calls", "max_steps", "max_tokens")

    def __init__(self, max_steps: float = _INF, max_llm_calls: float = _INF, max_tokens: float = _INF,
                 max_cost_usd: float = _INF, max_duration_ns: float = _INF, check_repeats: bool = False) -> None:
        self.max_steps = max_steps
        self.max_llm_calls = max_llm_calls
        self.max_tokens = max_tokens
        self.max_cost_usd = max_cost_usd
        self.max_duration_ns = max_duration_ns
        self.check_repeats = check_repeats  # max_repeats is set: the budget rule sees every tool call

    def __repr__(self) -> str:
        return "Limits(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__) + ")"


NO_LIMITS: Final = Limits()


def short_hash(text: str) -> str:
    """A short stable hash for logs: argument values never go out in clear."""
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:12]


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


@dataclass(slots=True)
class Conversation:
    """State that outlives one trajectory: what earlier turns wrote."""

    id: str
    last_seen_ns: int
    touched_ns: int = 0  # the engine's clock when a turn last used it (expiry; not span time)
    writes_ok: dict[tuple[str, str], str] = field(default_factory=dict)  # call key -> trace hex
    writes_failed: dict[tuple[str, str], str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)  # rule-owned state (confirmations, repeats, …)


@dataclass(slots=True)
class Trajectory:
    """One agent run: the steps under its outermost agent span (or local root)."""

    key: int
    trace_id: int
    service_name: str
    started_ns: int
    agent_name: str = "unknown"
    root: AgentSpan | None = None
    conversation: Conversation | None = None
    conversation_id: str | None = None
    steps: list[ToolStep] = field(default_factory=list)
    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    last_seen_ns: int = 0
    steps_dropped: int = 0
    tool_calls: int = 0
    tool_errors: int = 0  # failed tool calls, kept or dropped
    writes_ok: dict[tuple[str, str], str] = field(default_factory=dict)
    writes_failed: dict[tuple[str, str], str] = field(default_factory=dict)
    budgets_fired: set[str] = field(default_factory=set)
    root_attributes: dict[str, Any] = field(default_factory=dict)  # the root span's own (read them, don't write)
    finished: bool = False
    outcome: Outcome = "unknown"
    extra: dict[str, Any] = field(default_factory=dict)  # rule-owned state (confirmations, repeats, …)
    limits: Limits = NO_LIMITS  # the agent's budget, compared inline as events arrive
    succeeded: bool = False  # a policy ``success_when`` tool call succeeded
    state_dropped: int = 0  # entries of bounded per-run maps not kept (writes, repeats)
    _hex: str = field(default="", init=False, repr=False, compare=False)

    def __init__(self, key: int, trace_id: int, service_name: str, started_ns: int, agent_name: str = "unknown",
                 root: AgentSpan | None = None, conversation: Conversation | None = None,
                 conversation_id: str | None = None, steps: list[ToolStep] | None = None, llm_calls: int = 0,
                 input_tokens: int = 0, output_tokens: int = 0, cost_usd: float = 0.0, last_seen_ns: int = 0,
                 steps_dropped: int = 0, tool_calls: int = 0, tool_errors: int = 0,
                 writes_ok: dict[tuple[str, str], str] | None = None,
                 writes_failed: dict[tuple[str, str], str] | None = None, budgets_fired: set[str] | None = None,
                 root_attributes: dict[str, Any] | None = None, finished: bool = False, outcome: Outcome = "unknown",
                 extra: dict[str, Any] | None = None, limits: Limits = NO_LIMITS, succeeded: bool = False,
                 state_dropped: int = 0) -> None:
        self.key = key
        self.trace_id = trace_id
        self.service_name = service_name
        self.started_ns = started_ns
        self.agent_name = agent_name
        self.root = root
        self.conversation = conversation
        self.conversation_id = conversation_id
        self.steps = [] if steps is None else steps
        self.llm_calls = llm_calls
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.cost_usd = cost_usd
        self.last_seen_ns = last_seen_ns
        self.steps_dropped = steps_dropped
        self.tool_calls = tool_calls
        self.tool_errors = tool_errors
        self.writes_ok = {} if writes_ok is None else writes_ok
        self.writes_failed = {} if writes_failed is None else writes_failed
        self.budgets_fired = set() if budgets_fired is None else budgets_fired
        self.root_attributes = {} if root_attributes is None else root_attributes
        self.finished = finished
        self.outcome = outcome
        self.extra = {} if extra is None else extra
        self.limits = limits
        self.succeeded = succeeded
        self.state_dropped = state_dropped
        self._hex = ""

    def __reduce__(self) -> tuple[Any, ...]:
        return rebuild(self)

    @property
    def trace_hex(self) -> str:
        """The trace id as 32 hex digits (computed once)."""
        h = self._hex
        if not h:
            try:
                h = self.trace_id.to_bytes(16, "big").hex()
            except OverflowError:  # not a 128-bit id (a replayed file may hold anything)
                h = format(self.trace_id, "032x")
            self._hex = h
        return h

    @property
    def duration_s(self) -> float:
        end = self.root.end_ns if self.root is not None and self.root.end_ns else self.last_seen_ns
        return max(0, end - self.started_ns) / 1e9


def redundant_calls(t: Trajectory, writes: frozenset[str] | set[str]) -> list[str]:
    """Non-write tools called again with identical arguments in one trajectory.

    Arguments are parsed only for tools that ran more than once.
    """
    steps = t.steps
    tools: set[str] = set()
    for s in steps:
        if s.tool in tools:
            break
        tools.add(s.tool)
    else:
        return []  # every tool ran once: nothing can repeat
    by_tool: dict[str, list[ToolStep]] = {}
    for s in steps:
        if s.tool not in writes:
            by_tool.setdefault(s.tool, []).append(s)
    out: list[str] = []
    for tool, calls in by_tool.items():
        if len(calls) < 2:
            continue
        seen: set[str] = set()
        for s in calls:
            k = s.arguments_key
            if k in seen:
                out.append(tool)
            else:
                seen.add(k)
    return out
