"""Where a span's trajectory lives: a :class:`Run` per outermost agent span (or local root).

In process, each span is routed to its run as it starts (through its parent's route), so its
end needs one dict pop to find it. A run's events are applied by one thread at a time with no
lock waited on: a thread that ends a span appends an :class:`Arrival` to the run's inbox and,
if no other thread is applying that run's events, applies them itself (see ``Engine``).
"""

from __future__ import annotations

from typing import Any, Final

from opentelemetry import baggage

from ..model.trajectory import Trajectory
from ..reading import extract
from ..reading import semconv as sc
from ..reading.frameworks import CAPTURE_SETTINGS, names_agent_by_root
from ..reading.tool_steps import merge_nested
from ..rules import Check
from .dispatch import Dispatch

MAX_OPEN_TOOLS = 1024  # open tool spans of one run remembered for merging
FINISH = "finish"  # an Arrival that finalises the run early (eviction, flush, shutdown)
CASE_KEYS: Final = (sc.AE_CASE_ID, sc.AGENTEVALS_CASE_ID, sc.AE_TRIAL)  # what a run takes from OTel baggage
# Keys that tell a framework's spans apart (CAPTURE_SETTINGS): a span of no interest carrying one is
# remembered by its run, so its unchecked calls name the framework's setting (Semantic Kernel's
# sk.available_functions is on its loop span, between the agent and the tool spans)
MARKER_KEYS: Final = frozenset(m for m, _, _ in CAPTURE_SETTINGS if "=" not in m and not m.startswith("scope:"))
FRAMEWORK_SPAN: Final = "framework_span"  # Trajectory.extra: that span's attributes


class Arrival:
    """A span's end (or an eviction) waiting in its run's inbox: made only when another thread is
    applying that run's events (or to finalise the run early); the usual span end makes none."""

    __slots__ = ("attrs", "end_ns", "item", "kind", "reason", "root_end", "span")

    def __init__(self, kind: str | None, item: Any, span: Any, attrs: dict[str, Any], end_ns: int,
                 root_end: bool = False, reason: str = "root_end") -> None:
        self.kind = kind  # extract's TOOL/LLM/AGENT/CONFIRMATION, None (no agent activity) or FINISH
        self.item = item  # what extract read: a step, (model, tokens in, tokens out), an agent span, ...
        self.span = span
        self.attrs = attrs
        self.end_ns = end_ns
        self.root_end = root_end  # the run's own key span ended: finalise after applying it
        self.reason = reason  # for FINISH: "capacity" | "ttl" | "shutdown"


class Turn:
    """Whose turn it is to apply a run's events: taken without waiting, or not at all, and given back
    by the thread that took it. One token in a list, popped and appended at its end (each one atomic,
    and a native call when compiled; the list never reallocates), not a ``Lock``, whose
    ``acquire(False)`` parses its arguments as keywords on every span."""

    __slots__ = ("_token",)

    def __init__(self) -> None:
        self._token: list[bool] = [True]  # 64 bytes while the run is open

    def take(self) -> bool:
        """True: this thread's turn, until :meth:`give_back`; False: another thread has it."""
        try:
            return self._token.pop()
        except IndexError:
            return False

    def give_back(self) -> None:
        self._token.append(True)


class Run:
    """One agent run's place in the engine: its identity, its agent, its trajectory once it has one."""

    __slots__ = ("agent_name", "attributes", "case_attributes", "case_span", "check", "closed", "done", "inbox",
                 "is_agent", "key", "llm_parent", "marked", "named", "nested", "open_tools", "outer", "queued_at", "seen_at",
                 "service", "start_ns", "tool_row", "trace_id", "traj", "turn")

    def __init__(self, key: int, trace_id: int, start_ns: int, service: str,
                 outer: list[dict[str, Any]] | None = None) -> None:
        self.key = key  # span id of the key span (in process), or trace id (keyed by trace)
        self.trace_id = trace_id
        self.start_ns = start_ns
        self.service = service
        self.agent_name: str | None = None
        self.named = False  # agent_name came from an explicit attribute
        self.is_agent = False  # the key span was an agent span when it started
        self.attributes: dict[str, Any] = {}  # the root span's own dict (see Engine.start), or a merged copy
        self.outer = outer  # attributes around the run (an ancestor's, baggage's), nearest first: outer_context
        self.case_attributes: dict[str, Any] | None = None  # a non-agent run: its last span naming a case id
        self.case_span = 0  # that span's id (its case holds while it is open)
        self.traj: Trajectory | None = None
        self.check: Check | None = None  # what rules see, made on the first rule call
        self.tool_row: dict[str, list[int]] | None = None  # the engine's call counts of its (service, agent)
        self.closed = False  # finalisation decided: spans that arrive after are late
        self.done = False  # finalised
        self.inbox: list[Arrival] = []  # a list, not a deque: an empty one is 56 bytes, not 624
        self.turn = Turn()  # taken by the thread applying its events; only ever tried, never waited on
        self.queued_at = 0  # engine clock: its place in the eviction order (second chance)
        self.seen_at = 0  # engine clock: its last span
        # one tool call recorded by two instrumentations, one span inside the other (AutoGen + OpenInference):
        self.open_tools: dict[int, str] | None = None  # tool span id -> its tool, from its start to its end
        self.nested: dict[int, Any] | None = None  # outer tool span id -> the inner span's step, until it ends
        self.llm_parent = 0  # the parent span id of the last model call: a model-call span ending as it is wraps it
        self.marked: dict[str, Any] | None = None  # the first span of no interest carrying a framework's marker

    def note_marker(self, attrs: dict[str, Any]) -> None:
        """A span of no interest in the run ended: remembered if it is the first to carry a framework's
        marker (:data:`MARKER_KEYS`): one set operation, and none once one is found."""
        if self.marked is None and attrs and not attrs.keys().isdisjoint(MARKER_KEYS):
            self.marked = attrs

    def names_case(self, span_id: int, attrs: dict[str, Any]) -> None:
        """A span of this (non-agent) run names a case: agent runs started under it while it is open take it."""
        self.case_span = span_id
        self.case_attributes = attrs

    def open_tool(self, span_id: int, attrs: dict[str, Any]) -> None:
        """An OpenInference tool span started: one that may wrap the framework's own span of the same
        call (bounded: past the cap, calls are not merged). Only these are remembered, so runs of
        one instrumentation pay nothing on the span path."""
        name = attrs.get(sc.TOOL_NAME) or attrs.get(sc.OI_TOOL_NAME)
        if type(name) is str and name:
            tools = self.open_tools
            if tools is None:
                tools = self.open_tools = {}
            if len(tools) < MAX_OPEN_TOOLS:
                tools[span_id] = name

    def nest(self, step: Any, span_id: int, parent_id: int | None) -> Any:
        """One tool call, one step: a tool step whose parent is an open tool span of the same tool is
        held until that span ends, then merged into its step (returned); None while it is held."""
        tools = self.open_tools
        if tools is None:
            return step
        tools.pop(span_id, None)
        if parent_id is not None and tools.get(parent_id) == step.tool:
            if self.nested is None:
                self.nested = {}
            self.nested[parent_id] = step
            return None
        inner = self.nested.pop(span_id, None) if self.nested else None
        return step if inner is None else merge_nested(step, inner)

    def held_steps(self) -> list[Any]:
        """Inner steps still held when the run ends (their outer span never ended): kept as they are."""
        held = list(self.nested.values()) if self.nested else []
        self.nested = None
        return held

    def rename(self, name: str, named: bool, limits: Any) -> None:
        """The run's agent is now ``name``: its trajectory, budget and rule view follow."""
        self.agent_name = name
        self.named = named
        t = self.traj
        if t is not None and t.agent_name != name:
            t.agent_name = name
            t.limits = limits
            self.tool_row = None
            self.check = None


def guessed_agent_name(span: Any, attrs: dict[str, Any], own: bool) -> str | None:
    """An agent name read from how a starting agent span looks, when it states none.

    ``own``: the span is the run's key span (else a nested agent span under it)."""
    guess = extract.agent_name_at_start(span, attrs)
    if guess is None and not own and attrs.get(sc.OI_SPAN_KIND) == sc.OI_AGENT:
        guess = span.name  # OpenInference names a nested agent span after the agent
    return str(guess) if guess else None


def name_at_start(run: Run, span: Any, attrs: dict[str, Any], own: bool, dispatch: Dispatch) -> None:
    """A starting agent span names its run: a name it states outright (the key span's own wins
    over a nested agent span's), else a guess from how it looks while the run has no name."""
    explicit = extract.stated_agent_name(attrs)
    if not explicit and not own and attrs.get(sc.OI_SPAN_KIND) == sc.OI_AGENT:
        node = attrs.get(sc.OI_GRAPH_NODE_ID)  # a nested agent's own name (OpenAI Agents JS bridge, CrewAI)
        explicit = str(node) if node else None
    if explicit:
        if own or not run.named:
            run.rename(explicit, True, dispatch.limits_for(explicit))
    elif run.agent_name is None:
        guess = guessed_agent_name(span, attrs, own)
        if guess:
            run.rename(guess, False, dispatch.limits_for(guess))


def outer_context(outer: Run | None, parent_context: Any, routes: dict[int, Run],
                  baggage_too: bool) -> list[dict[str, Any]] | None:
    """What a new run inherits from around it, nearest first (None: nothing): for an agent run
    under a non-agent root, the last span of that root's tree that named a case (while it is
    open: in ``routes``), the root's own attributes and what the root inherited; then, when
    ``baggage_too``, the case keys of the OTel baggage in ``parent_context`` (default: the current
    context). Read once per run, never per span."""
    found: list[dict[str, Any]] = []
    if outer is not None:
        if outer.case_attributes is not None and outer.case_span in routes:
            found.append(outer.case_attributes)
        if outer.attributes:
            found.append(outer.attributes)
        if outer.outer:
            found.extend(outer.outer)
    entries = baggage.get_all(parent_context) if baggage_too else None
    if entries:
        picked = {}
        for key in CASE_KEYS:
            value = entries.get(key)
            if value is not None:
                picked[key] = value
        if picked:
            found.append(picked)
    return found or None


def drop_oldest(routes: dict[int, Run]) -> bool:
    """The oldest route forgotten (past ``limits.max_open_spans``); False if another thread emptied it."""
    try:
        routes.pop(next(iter(routes)), None)
    except (StopIteration, RuntimeError):  # emptied or resized by another thread meanwhile
        return False
    return True


def name_root(run: Run, span: Any, attrs: dict[str, Any], dispatch: Dispatch) -> None:
    """A run's own span starting: an agent span names it (:func:`name_at_start`); another root only
    when the framework names its root after the agent (:func:`~..reading.frameworks.names_agent_by_root`)."""
    if run.is_agent:
        name_at_start(run, span, attrs, True, dispatch)
    elif attrs and names_agent_by_root(attrs) and span.name:
        run.rename(span.name, False, dispatch.limits_for(span.name))
