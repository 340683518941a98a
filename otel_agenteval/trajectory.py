"""The domain objects: a tool step, an LLM call, a trajectory and its conversation."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, fields
from typing import Any, Final, Literal

from orjson import OPT_SORT_KEYS as _SORTED
from orjson import JSONDecodeError as _OrjsonError
from orjson import dumps as _orjson_dumps
from orjson import loads as _orjson_loads

try:
    from mypy_extensions import mypyc_attr
except ImportError:  # not installed: the decorator only speaks to the compiler (setup.py)
    def mypyc_attr(**_: Any) -> Any:  # type: ignore[misc]
        return lambda cls: cls

Outcome = Literal["success", "failure", "unknown", "incomplete"]

_INF = float("inf")
MAX_DEPTH = 64  # nesting of argument values walked; deeper values are compared as they are
MAX_KEY_LEN = 512  # a canonical argument text longer than this is kept as its hash


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


_SCALARS = frozenset((int, float, bool, type(None)))


def normalise_value(value: Any, depth: int = 0) -> Any:
    """Strip strings, recurse into containers, sort nothing (dict equality ignores order).

    Past :data:`MAX_DEPTH` levels a value is kept as it is: no recursion without bound."""
    if isinstance(value, str):
        return value.strip()
    if depth >= MAX_DEPTH:
        return value
    if isinstance(value, dict):  # scalars inline: a call only for nested containers
        return {str(k).strip(): v.strip() if type(v) is str else v if type(v) in _SCALARS
                else normalise_value(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalise_value(v, depth + 1) for v in value]
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # NaN/Infinity: the arguments are compared as text instead


# the C scanner json.loads runs, without its Python layers; standard JSON only (the canonical key
# is written by orjson, which has no NaN: {"a": NaN} must not equal {"a": null})
_scan = json.JSONDecoder(parse_constant=_no_constant).scan_once  # type: ignore[attr-defined]


_BIG = 9.223372036854775e18  # orjson reads an int past 64 bits as a float at least this large


def _has_big_float(value: Any, depth: int = 0) -> bool:
    """Whether a parsed value holds a float of 64-bit-int size or more (orjson's reading of a
    longer int, or a float the text wrote so): the standard scanner then reads the text again.
    Too deep to walk: assumed so (the scanner decides)."""
    if type(value) is float:
        return value >= _BIG or value <= -_BIG
    if depth >= MAX_DEPTH:
        return type(value) is dict or type(value) is list
    if type(value) is dict:
        for v in value.values():
            if type(v) is not str and _has_big_float(v, depth + 1):
                return True
    elif type(value) is list:
        for v in value:
            if type(v) is not str and _has_big_float(v, depth + 1):
                return True
    return False


def _loads(text: str) -> Any:
    """``json.loads`` of stripped text (exact for any int), in one C call.

    orjson first (several times quicker on small objects); what it refuses, or reads with a
    float where the text may have a long int, goes to the standard scanner, which decides."""
    try:
        value = _orjson_loads(text)
        if not _has_big_float(value):
            return value
    except _OrjsonError:
        pass
    try:
        value, end = _scan(text, 0)
    except StopIteration:
        raise ValueError("not JSON") from None
    if end != len(text):
        raise ValueError("extra data after JSON")
    return value


def parse_arguments(raw: Any) -> dict[str, Any]:
    """Tool arguments as a dict: JSON object strings parsed, a bare value kept as ``input``.

    LangChain passes a one-argument tool's bare value (``'88120'``) rather than JSON.
    """
    if isinstance(raw, (bytes, bytearray)):
        raw = raw.decode("utf-8", "replace")
    if isinstance(raw, str):  # the usual case: a JSON object as text
        text = raw.strip()
        if text[:1] in ("{", "["):
            try:
                value = _loads(text)
            except (ValueError, RecursionError):  # not JSON, or nested past the scanner's limit
                return {"input": text}
            if isinstance(value, dict):
                return normalise_value(value)  # type: ignore[no-any-return]
            return {"input": normalise_value(value)}
        return {"input": text}
    if raw is None:
        return {}
    if isinstance(raw, dict):
        return normalise_value(raw)  # type: ignore[no-any-return]
    return {"input": raw}


def arguments_key(args: dict[str, Any]) -> str:
    """A canonical text of normalised arguments: equal keys mean equal calls.

    A text longer than :data:`MAX_KEY_LEN` is kept as its hash (``#`` and 32 hex digits): the
    maps of calls seen stay small whatever the arguments."""
    try:
        key = _orjson_dumps(args, default=str, option=_SORTED).decode()
    except TypeError:  # ints past 64 bits (or nesting past orjson's limit): the general encoder
        try:
            key = json.dumps(args, sort_keys=True, separators=(",", ":"), default=str)
        except (RecursionError, ValueError):
            key = repr(_flat(args))
    if len(key) > MAX_KEY_LEN:
        return "#" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return key


def _flat(value: Any) -> list[Any]:
    """A nested value as a flat list of its scalars and structure marks, without recursion."""
    out: list[Any] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            out.append("{")
            stack.extend(v[k] for k in sorted(v, key=str))
            out.extend(sorted(v, key=str))
        elif isinstance(v, (list, tuple)):
            out.append(len(v))
            stack.extend(v)
        else:
            out.append(v)
    return out


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
