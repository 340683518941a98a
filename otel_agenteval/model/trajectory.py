"""A trajectory and its conversation: one agent run's steps, totals, budget and outcome, and the
state that outlives it. Its parts (:class:`ToolStep`, :class:`LLMCall`, :class:`AgentSpan`) are in
:mod:`.steps`, importable from here too."""

from __future__ import annotations

import hashlib
from collections.abc import Container
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypedDict

from .arguments import parse_arguments  # re-exported: imported from here before the steps had a module
from .steps import AgentSpan, LLMCall, ToolStep, rebuild

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

class UnreadResults(TypedDict):
    """A conversation's finished turns' tool results the tainted-flow rule has not read into tokens
    yet (``rules/taint_flow.py``), read on first need (a later turn's sink), at most about
    ``taint.max_bytes`` of them: what reading each takes (its tool, span id, raw arguments and
    result, shared with its span), not its step, which holds its span's attributes and events. By
    column, the i-th of each one result: tuples of strings and numbers, which the cyclic GC stops
    tracking, where an object a result would be visited by every full collection, on the host's
    thread, for the hour a conversation is kept."""

    tools: tuple[str, ...]
    span_ids: tuple[int, ...]
    arguments: tuple[Any, ...]
    results: tuple[str, ...]
    bytes: int


def more_unread(unread: UnreadResults | None, added: UnreadResults) -> UnreadResults:
    """``unread`` (None: none yet) with ``added`` after it."""
    if unread is None:
        return added
    return {"tools": unread["tools"] + added["tools"], "span_ids": unread["span_ids"] + added["span_ids"],
            "arguments": unread["arguments"] + added["arguments"], "results": unread["results"] + added["results"],
            "bytes": unread["bytes"] + added["bytes"]}


@dataclass(slots=True)
class Conversation:
    """State that outlives one trajectory: what earlier turns wrote."""

    id: str
    last_seen_ns: int
    touched_ns: int = 0  # the engine's clock when a turn last used it (expiry; not span time)
    writes_ok: dict[tuple[str, str], str] = field(default_factory=dict)  # call key -> trace hex
    writes_failed: dict[tuple[str, str], str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)  # rule-owned state (confirmations, repeats, …)
    # the tainted-flow rule's unread tool results, kept out of ``extra``: a conversation holding only
    # them and its writes is one object for the cyclic GC (a dict holding a dict stays tracked)
    unread: UnreadResults | None = None

    # written out, like Trajectory's: one is made per new conversation, and in the compiled build
    # the dataclass-made __init__ would run as interpreted Python
    def __init__(self, id: str, last_seen_ns: int, touched_ns: int = 0,
                 writes_ok: dict[tuple[str, str], str] | None = None,
                 writes_failed: dict[tuple[str, str], str] | None = None, extra: dict[str, Any] | None = None,
                 unread: UnreadResults | None = None) -> None:
        self.id = id
        self.last_seen_ns = last_seen_ns
        self.touched_ns = touched_ns
        self.writes_ok = {} if writes_ok is None else writes_ok
        self.writes_failed = {} if writes_failed is None else writes_failed
        self.extra = {} if extra is None else extra
        self.unread = unread

    def __reduce__(self) -> tuple[Any, ...]:
        return rebuild(self)


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
    # attributes around the run, nearest first: the local root's and a case-naming ancestor's for an
    # agent run under a span of the app's own, the case keys of OTel baggage (read them, don't write)
    outer_attributes: list[dict[str, Any]] = field(default_factory=list)
    _hex: str = field(default="", init=False, repr=False, compare=False)
    # the run's latest two model calls, (end_ns, span), while it runs: what confirmation, grounding
    # and taint read the messages of at a write (fields, not ``extra``: one is kept every model call)
    _last_chat: tuple[int, Any] | None = field(default=None, init=False, repr=False, compare=False)
    _prev_chat: tuple[int, Any] | None = field(default=None, init=False, repr=False, compare=False)

    def __init__(self, key: int, trace_id: int, service_name: str, started_ns: int, agent_name: str = "unknown",
                 root: AgentSpan | None = None, conversation: Conversation | None = None,
                 conversation_id: str | None = None, steps: list[ToolStep] | None = None, llm_calls: int = 0,
                 input_tokens: int = 0, output_tokens: int = 0, cost_usd: float = 0.0, last_seen_ns: int = 0,
                 steps_dropped: int = 0, tool_calls: int = 0, tool_errors: int = 0,
                 writes_ok: dict[tuple[str, str], str] | None = None,
                 writes_failed: dict[tuple[str, str], str] | None = None, budgets_fired: set[str] | None = None,
                 root_attributes: dict[str, Any] | None = None, finished: bool = False, outcome: Outcome = "unknown",
                 extra: dict[str, Any] | None = None, limits: Limits = NO_LIMITS, succeeded: bool = False,
                 state_dropped: int = 0, outer_attributes: list[dict[str, Any]] | None = None) -> None:
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
        self.outer_attributes = [] if outer_attributes is None else outer_attributes
        self._hex = ""
        self._last_chat = None
        self._prev_chat = None

    def __reduce__(self) -> tuple[Any, ...]:
        return rebuild(self)

    def saw_chat(self, end_ns: int, span: Any) -> None:
        """A model call of the run ended (kept while the run runs, for the rules that read messages)."""
        self._prev_chat = self._last_chat
        self._last_chat = (end_ns, span)

    def chat_before(self, ns: int) -> tuple[int, Any] | None:
        """Of the run's latest two model calls, the later one that ended by ``ns``: ``(end_ns, span)``."""
        chat = self._last_chat
        if chat is not None and chat[0] <= ns:
            return chat
        chat = self._prev_chat
        return chat if chat is not None and chat[0] <= ns else None

    def forget_chats(self) -> None:
        """The run finished: it holds no span."""
        self._last_chat = self._prev_chat = None

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


def redundant_calls(t: Trajectory, writes: Container[str]) -> list[str]:
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


def looping_calls(t: Trajectory, repeats: int, by_tool: dict[str, int]) -> list[str]:
    """Tools one of whose calls (same tool, same arguments) ran at least ``repeats`` times in ``t``;
    ``by_tool``: its steps counted by tool. Arguments are parsed only for tools that ran that often."""
    out: list[str] = []
    if len(t.steps) < repeats:
        return out
    for tool, n in by_tool.items():
        if n < repeats:
            continue
        keys: dict[str, int] = {}
        for s in t.steps:
            if s.tool == tool:
                k = s.arguments_key
                keys[k] = keys.get(k, 0) + 1
        if max(keys.values()) >= repeats:
            out.append(tool)
    return out


__all__ = ["NO_LIMITS", "AgentSpan", "Conversation", "LLMCall", "Limits", "Outcome", "ToolStep", "Trajectory",
           "UnreadResults", "looping_calls", "more_unread", "parse_arguments", "rebuild", "redundant_calls",
           "short_hash"]
