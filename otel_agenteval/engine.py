"""The one path every front door uses: span in -> assemble -> rules -> sinks.

Two ways in: :meth:`Engine.start` + :meth:`Engine.end` in process (the span processor), which
routes each span to its trajectory through its parent; and :meth:`Engine.end` alone (replay,
collector side), which keys trajectories by trace and finalises one when the trace's local
root ends. State is bounded everywhere and each drop is counted.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from operator import attrgetter
from typing import Any, Final

import structlog
from opentelemetry.attributes import BoundedAttributes

from . import _semconv as sc
from . import confirmations, extract
from ._mutex import Mutex
from .extract import AGENT, ENDED_SPAN, FAST_SPANS, LLM, OP_KIND, STARTED_SPAN, TOOL, SpanView, as_dict
from .policy import Budget, Policy, PolicyError
from .rules import Check, Finish, Rule, builtin_rules
from .trajectory import NO_LIMITS, AgentSpan, Conversation, Limits, LLMCall, ToolStep, Trajectory, short_hash
from .violation import Violation

log = structlog.get_logger("otel_agenteval")

Sink = Callable[[Violation], None]
FinishSink = Callable[[Trajectory], None]

_BOUNDED: Final = BoundedAttributes  # Final: read from a C static when compiled
_INF = float("inf")
_start_ns = attrgetter("start_ns")


def limits_of(budget: Budget) -> Limits:
    """A budget as the numbers the hot path compares against (no limit: infinity).

    The duration limit is a hair early in ns so the gate never misses what the rule, working
    in seconds, would count as over; the rule itself decides.
    """
    def lim(v: float | None) -> float:
        return _INF if v is None else v

    dur = budget.max_duration_s
    return (lim(budget.max_steps), lim(budget.max_llm_calls), lim(budget.max_tokens), lim(budget.max_cost_usd),
            _INF if dur is None else dur * 1e9 * (1 - 1e-9), budget.max_repeats is not None)


class _Root:
    """Where a span's trajectory lives: keyed by the outermost agent span (or local root)."""

    __slots__ = (
        "agent_name",
        "attributes",
        "done",
        "is_agent",
        "key",
        "named",
        "service",
        "start_ns",
        "trace_id",
        "traj",
    )

    def __init__(self, key: int, trace_id: int, start_ns: int, service: str) -> None:
        self.key = key
        self.trace_id = trace_id
        self.start_ns = start_ns
        self.service = service
        self.agent_name: str | None = None
        self.named = False  # agent_name came from an explicit attribute
        self.traj: Trajectory | None = None
        self.done = False
        self.attributes: dict[str, Any] = {}  # the root span's own dict (see start), or a merged copy
        self.is_agent = False  # the key span was an agent span when it started


_SPAN_HOLDERS = ("check", "root", "last_chat", "prev_chat", "confirmed", "repeats")


class _ToolPlan:
    """What the policy does with one tool name, decided on its first call: one lookup per step."""

    __slots__ = ("confirms", "on_repeat", "rules", "succeeds", "write")

    def __init__(self, rules: tuple[Rule, ...], on_repeat: tuple[Rule, ...], write: bool, succeeds: bool,
                 confirms: bool) -> None:
        self.rules = rules  # rules that look at every call of it
        self.on_repeat = on_repeat  # rules declared repeated_call (a write only)
        self.write = write
        self.succeeds = succeeds  # a policy success_when tool
        self.confirms = confirms  # a confirmation tool


class Engine:
    # slots: CPython 3.11 reads attributes of an object with 30+ of them in __dict__ more slowly
    __slots__ = (
        "_by_event",
        "_confirmation_tools",
        "_conv_ttl_ns",
        "_conversations",
        "_disabled",
        "_evicted",
        "_gated",
        "_gated_any",
        "_last_service",
        "_late_memory",
        "_limits",
        "_log_violations",
        "_lock",
        "_max_conv",
        "_max_open",
        "_max_routes",
        "_max_steps",
        "_max_tool_keys",
        "_needs_confirmations",
        "_needs_content",
        "_next_sweep",
        "_now",
        "_on_finish",
        "_on_violation",
        "_pop_route",
        "_open",
        "_plans",
        "_prices",
        "_recent_done",
        "_repeat_scope",
        "_routes",
        "_rules",
        "_n_agent",
        "_n_confirmation",
        "_n_llm",
        "_n_other",
        "_n_tool",
        "_stats",
        "_success_tools",
        "_tool_cells",
        "_tool_rows",
        "_tool_scope",
        "_trace_roots",
        "_ttl_ns",
        "_llm_rules",
        "_writes",
        "policy",
    )

    def __init__(
        self,
        policy: Policy,
        *,
        rules: Iterable[Rule] | None = None,
        on_violation: Sequence[Sink] = (),
        on_finish: Sequence[FinishSink] = (),
        log_violations: bool = True,
    ) -> None:
        self.policy = policy
        lim = policy.limits
        self._max_open = lim.max_open_trajectories
        self._max_steps = lim.max_steps_per_trajectory
        self._ttl_ns = int(lim.trajectory_ttl_s * 1e9)
        self._conv_ttl_ns = int(lim.conversation_ttl_s * 1e9)
        self._max_conv = lim.max_conversations
        self._max_routes = lim.max_open_spans
        self._late_memory = lim.late_memory
        if rules is None:
            rules = [r for name, r in builtin_rules().items() if policy.rule_enabled(name)]
            rules.extend(load_custom_rules(policy))
        self._rules = tuple(rules)
        self._dispatch(policy)
        self._disabled = frozenset(r for r, on in policy.rules.items() if not on)
        self._needs_confirmations = policy.needs_confirmations
        self._needs_content = policy.needs_content
        self._confirmation_tools = frozenset(policy.confirmation.tools)
        self._on_violation = tuple(on_violation)
        self._on_finish = tuple(on_finish)
        self._log_violations = log_violations  # off where violations are reported otherwise (replay)
        self._evicted: list[tuple[Trajectory, list[Violation]]] = []
        self._max_tool_keys = 4 * lim.max_tool_labels * 16  # raw (service, agent, tool, status) keys kept
        self._lock = Mutex()
        self._routes: dict[int, _Root] = {}
        self._pop_route = self._routes.pop  # bound once: no method lookup per span
        self._trace_roots: dict[int, _Root] = {}
        self._recent_done: OrderedDict[int, None] = OrderedDict()
        self._open: OrderedDict[int, Trajectory] = OrderedDict()
        self._conversations: OrderedDict[str, Conversation] = OrderedDict()
        self._now = 0
        self._next_sweep = 0
        self._n_tool = self._n_llm = self._n_agent = self._n_confirmation = self._n_other = 0  # spans seen, by kind
        self._stats: dict[str, Any] = {
            "spans": {"tool": 0, "llm": 0, "agent": 0, "confirmation": 0, "other": 0},
            "evicted": {"capacity": 0, "ttl": 0, "shutdown": 0},
            "conversations_evicted": {"capacity": 0, "ttl": 0},
            "tool_calls": {},  # (service, agent, tool, ok) -> count, made from _tool_rows when read
            "late": 0,
            "steps_dropped": 0,
            "routes_dropped": 0,
            "errors": {"on_start": 0, "on_end": 0, "rule": 0, "callback": 0, "finish": 0, "shutdown": 0},
        }
        self._tool_rows: dict[tuple[str, str], dict[str, list[int]]] = {}  # (service, agent) -> tool -> [ok, error]
        self._tool_cells = 0
        self._prices: dict[str | None, tuple[float, float]] = {}  # model -> USD per token (in, out)
        self._limits: dict[str, Any] = {}  # agent -> its budget as numbers (see limits_of)
        self._last_service: tuple[Any, str] = (object(), "")  # (resource, its service.name)
        self._success_tools = frozenset(policy.outcome.success_when)

    # --- front door: span start (in process only) ---------------------------------------------
    def start(self, span: Any, parent_context: Any = None) -> None:
        try:
            tp = type(span)
            if tp is not STARTED_SPAN and tp not in FAST_SPANS:
                span = SpanView(span)
            parent: tuple[Any, ...] | None = span._parent  # SpanContext: a tuple (indexed natively when compiled)
            ctx: tuple[Any, ...] = span._context
            routes = self._routes
            root = None if parent is None or parent[2] else routes.get(parent[1])
            a = span._attributes  # extract.attributes_of, inlined on this path (every span)
            attrs: dict[str, Any] = a._dict if type(a) is _BOUNDED else as_dict(a)
            op = attrs.get(sc.OPERATION_NAME)
            if isinstance(op, str):
                agent = op == sc.OP_INVOKE_AGENT
            else:
                agent = extract.is_agent_at_start(span) if op is None else False
            if root is not None and not agent:
                # the common case: a span inside a known run. Dict reads and writes are atomic,
                # so no lock; an evicted route (bounded map) is counted and the span goes by trace.
                routes[ctx[1]] = root
                if len(routes) > self._max_routes:
                    self._drop_route()
                return
            with self._lock:
                if root is None or (agent and not root.is_agent):
                    # a local root, or the outermost agent span under a non-agent root
                    root = _Root(ctx[1], ctx[0], span._start_time or 0, self._service(span))
                    if attrs or type(a) is _BOUNDED:
                        # the span's own attribute dict (the SDK's, or a recorded span's): complete
                        # once the span ends, so nothing is copied now or merged then
                        root.attributes = attrs
                    if agent:
                        root.is_agent = True
                        self._name_at_start(root, span, attrs, own=True)
                elif agent:
                    self._name_at_start(root, span, attrs, own=False)
                routes[ctx[1]] = root
                if len(routes) > self._max_routes:
                    self._drop_route()
        except Exception:
            self._stats["errors"]["on_start"] += 1

    def _service(self, span: Any) -> str:
        """``service.name`` of a span's resource, remembered for the last resource seen (a process
        has one; a replayed batch shares one)."""
        res = span._resource
        last = self._last_service
        if last[0] is res:
            return last[1]
        name = res.attributes.get(sc.SERVICE_NAME) if res is not None else None
        service = str(name) if name else "unknown"
        self._last_service = (res, service)
        return service

    def _drop_route(self) -> None:
        routes = self._routes
        try:
            routes.pop(next(iter(routes)), None)
        except (StopIteration, RuntimeError):  # emptied or resized by another thread meanwhile
            return
        self._stats["routes_dropped"] += 1

    def _name_at_start(self, root: _Root, span: Any, attrs: dict[str, Any], own: bool) -> None:
        explicit = attrs.get(sc.AGENT_NAME) or attrs.get(sc.OI_AGENT_NAME) or attrs.get(sc.LEGACY_AGENT_NAME)
        if explicit:
            if own or not root.named:
                self._set_name(root, str(explicit), named=True)
            return
        if root.agent_name is None:
            guess = extract.agent_name_at_start(span)
            if guess is None and not own and attrs.get(sc.OI_SPAN_KIND) == sc.OI_AGENT:
                guess = span.name  # OpenInference names a nested agent span after the agent
            if guess:
                self._set_name(root, guess, named=False)

    def _set_name(self, root: _Root, name: str, named: bool) -> None:
        root.agent_name = name
        root.named = named
        t = root.traj
        if t is not None and t.agent_name != name:
            t.agent_name = name
            t.tool_row = None
            t.limits = self._limits_for(name)
            t.extra["check"] = None

    def _limits_for(self, agent: str) -> Any:
        lim = self._limits.get(agent)
        if lim is None:
            lim = limits_of(self.policy.budget_for(agent)) if self._gated_any else NO_LIMITS
            if len(self._limits) < 1024:  # agent names come from spans: bound the cache
                self._limits[agent] = lim
        return lim

    # --- front door: span end -----------------------------------------------------------------
    def end(self, span: Any) -> None:
        try:
            tp = type(span)
            if tp is not ENDED_SPAN and tp not in FAST_SPANS:
                span = SpanView(span)
            a = span._attributes  # extract.attributes_of, inlined on this path (every span)
            attrs: dict[str, Any] = a._dict if type(a) is _BOUNDED else as_dict(a)
            op: Any = attrs.get(sc.OPERATION_NAME)  # the GenAI semconv case, decided without a call
            kind = OP_KIND.get(op) if op is not None else extract.classify(span, attrs)
            ctx: tuple[Any, ...] = span._context
            end_ns: int = span._end_time or 0
            if kind is TOOL:
                item: Any = extract.step_of(span, attrs, ctx, end_ns)
            elif kind is LLM:
                item = extract.usage(attrs)
            elif kind is AGENT:
                item = extract.agent_span(span, attrs)
            elif kind is None:
                item = None
            else:
                item = confirmations.from_span(span)
            sid: int = ctx[1]
            lock = self._lock
            lock.acquire()
            try:
                out = self._end_locked(span, kind, item, attrs, sid, end_ns)
            finally:
                lock.release()
            if out is not None:
                self._deliver(out[0], out[1])
        except Exception:
            self._stats["errors"]["on_end"] += 1

    def _end_locked(self, span: Any, kind: str | None, item: Any, attrs: dict[str, Any], sid: int,
                    end_ns: int) -> tuple[list[Violation], Sequence[Trajectory]] | None:
        """:meth:`end` under the lock: route the span to its run, then assemble and check."""
        out: tuple[list[Violation], Sequence[Trajectory]] | None
        if end_ns > self._now:
            self._now = end_ns
        root: _Root | None = self._pop_route(sid, None)
        t = None
        if root is not None and item is not None and sid != root.key and not root.done:
            t = root.traj
        if t is None or root is None or (self._needs_confirmations and span._events):
            out = self._end_slow(span, kind, item, attrs, root, end_ns)
        else:  # the common case: a step inside an open run, reached through its route
            t.last_seen_ns = end_ns  # no reordering of _open: see _evict_one
            violations: list[Violation] = []
            if kind is TOOL:
                self._n_tool += 1
                self._tool(root, t, item, violations)
            elif kind is LLM:
                self._n_llm += 1
                self._llm(t, span, attrs, item, violations, end_ns)
            elif kind is AGENT:
                self._n_agent += 1
                self._agent(root, t, item, False)
            else:
                self._n_confirmation += 1
                confirmations.keep(t.extra, item)
            if self._now >= self._next_sweep or self._evicted:
                out = self._with_swept(violations, [])
            else:
                out = (violations, ()) if violations else None
        return out

    def _end_slow(self, span: Any, kind: str | None, item: Any, attrs: dict[str, Any], routed: _Root | None,
                  end_ns: int) -> Any:
        """Everything but a step inside an open run: roots, spans keyed by trace, late spans."""
        stats = self._stats
        if kind is TOOL:
            self._n_tool += 1
        elif kind is LLM:
            self._n_llm += 1
        elif kind is AGENT:
            self._n_agent += 1
        elif kind is None:
            self._n_other += 1
        else:
            self._n_confirmation += 1
        ctx = span._context
        sid = ctx[1]
        by_trace = routed is None
        if routed is not None:
            root = routed
        else:
            tid = ctx[0]
            traced = self._trace_roots.get(tid)
            if traced is None:
                if tid in self._recent_done:
                    stats["late"] += 1
                    return None
                if item is None:  # no agent activity seen in this trace: nothing to keep
                    return self._with_swept([], []) if self._now >= self._next_sweep or self._evicted else None
                traced = _Root(tid, tid, span._start_time or 0, self._service(span))
                self._trace_roots[tid] = traced
            root = traced
        if root.done:
            stats["late"] += 1
            return None
        if self._needs_confirmations and span._events:
            for conf in confirmations.from_events(span):
                confirmations.keep(self._trajectory(root, span).extra, conf)
        violations: list[Violation] = []
        is_root_end = extract.is_local_root(span) if by_trace else sid == root.key
        if item is not None:
            t = root.traj
            if t is None:
                t = self._trajectory(root, span)
                t.queued_ns = end_ns  # its first step: queued as of now
            t.last_seen_ns = end_ns
            if kind is TOOL:
                self._tool(root, t, item, violations)
            elif kind is LLM:
                self._llm(t, span, attrs, item, violations, end_ns)
            elif kind is AGENT:
                self._agent(root, t, item, is_root_end)
            else:
                confirmations.keep(t.extra, item)
        finished = None
        if is_root_end:
            if attrs and attrs is not root.attributes:  # a foreign span's copy: merge the end's
                root.attributes.update(attrs)
            if by_trace:
                del self._trace_roots[root.key]
                self._remember_done(root.key)
            if root.traj is not None and root.traj.root is None:
                outcome, ok = extract.root_outcome(span)
                root.traj.root = AgentSpan(name=None, span_id=sid, trace_id=ctx[0], start_ns=span._start_time or 0,
                                           end_ns=end_ns, ok=ok, is_root=True, outcome=outcome)
            finished = self._finalise(root, "root_end", end_ns, violations)
        done = [finished] if finished is not None else []
        if self._now >= self._next_sweep or self._evicted:
            return self._with_swept(violations, done)
        return (violations, done) if violations or done else None

    def _with_swept(self, violations: list[Violation], done: list[Trajectory]) -> Any:
        swept = self._maybe_sweep()
        if swept is not None:
            violations.extend(swept[0])
            done.extend(swept[1])
        return (violations, done) if violations or done else None

    # --- assemble -------------------------------------------------------------------------------
    def _trajectory(self, root: _Root, span: Any) -> Trajectory:
        t = root.traj
        if t is None:
            start = root.start_ns or span._start_time or 0
            agent = root.agent_name or "unknown"
            t = Trajectory(key=root.key, trace_id=root.trace_id, service_name=root.service, started_ns=start,
                           agent_name=agent, last_seen_ns=start, limits=self._limits_for(agent),
                           root_attributes=root.attributes)
            t.extra["root"] = root
            root.traj = t
            cid = root.attributes.get(sc.CONVERSATION_ID) or root.attributes.get(sc.OI_SESSION_ID)
            if cid:
                self._bind_conversation(t, str(cid))
            if len(self._open) >= self._max_open:
                self._evict_one()
            self._open[root.key] = t
        return t

    def _evict_one(self) -> None:
        """Make room: evict the open trajectory idle longest, roughly (second chance).

        ``_open`` is kept in the order trajectories were queued, not reordered as their spans
        end: one seen since it was queued goes to the back once (its ``queued_ns`` updated)
        and the first one not seen since is evicted.
        """
        open_ = self._open
        while open_:
            key, t = open_.popitem(last=False)
            if t.last_seen_ns != t.queued_ns:
                t.queued_ns = t.last_seen_ns
                open_[key] = t
                continue
            self._evict(t, "capacity")
            return

    def _bind_conversation(self, t: Trajectory, cid: str | None) -> None:
        if cid is None or t.conversation_id is not None:
            return
        t.conversation_id = cid
        convs = self._conversations
        conv = convs.get(cid)
        if conv is not None and conv.last_seen_ns < self._now - self._conv_ttl_ns:
            del convs[cid]  # expired, even if no sweep has run since: the next turn starts afresh
            self._stats["conversations_evicted"]["ttl"] += 1
            conv = None
        if conv is None:
            conv = Conversation(id=cid, last_seen_ns=self._now)
            convs[cid] = conv
            if len(convs) > self._max_conv:
                convs.popitem(last=False)
                self._stats["conversations_evicted"]["capacity"] += 1
        else:
            convs.move_to_end(cid)
            conv.last_seen_ns = self._now
        t.conversation = conv

    def _check(self, t: Trajectory) -> Check:
        c: Check | None = t.extra.get("check")
        if c is None:
            c = Check(t, self.policy, self.policy.budget_for(t.agent_name))
            t.extra["check"] = c
        return c

    def _dispatch(self, policy: Policy) -> None:
        """Decide once which rules look at which events (and tools), from their declarations.

        Rules declared ``over_budget`` are left out of the per-event lists: the engine compares
        the run's counts with its budget inline and calls them only for an event that crosses it.
        Rules declared ``repeated_call`` likewise: called only for a write whose call ran before.
        """
        self._by_event: dict[type, tuple[Rule, ...]] = {}
        self._gated: dict[type, tuple[Rule, ...]] = {}
        self._tool_scope: list[tuple[Rule, frozenset[str] | None]] = []
        self._repeat_scope: list[tuple[Rule, frozenset[str] | None]] = []
        for kind in (ToolStep, LLMCall, Finish):
            chosen, gated = [], []
            for rule in self._rules:
                if kind not in getattr(rule, "agenteval_events", (kind,)):
                    continue
                scope = getattr(rule, "agenteval_tools", None)
                tools = scope(policy) if scope is not None else None
                if tools is not None and not tools:
                    continue  # nothing in this policy for it to look at
                if getattr(rule, "agenteval_over_budget", False):
                    gated.append(rule)
                    continue
                if kind is ToolStep and getattr(rule, "agenteval_repeated_call", False):
                    self._repeat_scope.append((rule, tools))
                    continue
                if kind is ToolStep:
                    self._tool_scope.append((rule, tools))
                chosen.append(rule)
            self._by_event[kind] = tuple(chosen)
            self._gated[kind] = tuple(gated)
        self._gated_any = any(self._gated.values())
        self._plans: dict[str, _ToolPlan] = {}
        self._llm_rules = self._by_event[LLMCall]
        self._writes = policy.write_tools

    def _plan(self, tool: str) -> _ToolPlan:
        """The plan for a tool name, made once (bounded: tool names come from models)."""
        write = tool in self._writes
        plan = _ToolPlan(tuple(r for r, tools in self._tool_scope if tools is None or tool in tools),
                         tuple(r for r, tools in self._repeat_scope if tools is None or tool in tools) if write else (),
                         write, tool in self._success_tools, tool in self._confirmation_tools)
        if len(self._plans) < 4096:
            self._plans[tool] = plan
        return plan

    def _repeated_write(self, t: Trajectory, step: ToolStep, out: list[Violation], rules: tuple[Rule, ...]) -> None:
        """Rules declared ``repeated_call``, for a write whose call already ran in this run or conversation."""
        if step.raw_arguments is None:
            return
        key = step.call_key
        conv = t.conversation
        if (key in t.writes_ok or key in t.writes_failed
                or (conv is not None and (key in conv.writes_ok or key in conv.writes_failed))):
            self._run_rules(step, t, out, rules)

    def _run_rules(self, event: Any, t: Trajectory, out: list[Violation], rules: tuple[Rule, ...]) -> None:
        check = self._check(t)
        for rule in rules:
            try:
                found = rule(event, check)
                if found:
                    if self._disabled:
                        found = [v for v in found if v.rule not in self._disabled]
                    out.extend(found)  # inside the guard: a rule may return something not iterable
            except Exception:  # a broken rule must not break the host or the other rules
                self._stats["errors"]["rule"] += 1

    def _tool(self, root: _Root, t: Trajectory, step: ToolStep, out: list[Violation]) -> None:
        if t.conversation_id is None:
            self._bind_conversation(t, step.conversation_id)
        if not root.named:
            name = step.agent_name
            if name:
                self._set_name(root, name, named=True)
        tool = step.tool
        plan = self._plans.get(tool)
        if plan is None:
            plan = self._plan(tool)
        if plan.on_repeat:
            self._repeated_write(t, step, out, plan.on_repeat)
        if plan.rules:
            self._run_rules(step, t, out, plan.rules)
        n = t.tool_calls + 1
        lim = t.limits
        if n > lim[0] or lim[5] or step.end_ns - t.started_ns > lim[4]:
            self._run_rules(step, t, out, self._gated[ToolStep])
        t.tool_calls = n
        ok = step.ok
        row = t.tool_row
        if row is None:
            row = self._tool_row(t)
        cell = row.get(tool)
        if cell is None:
            cell = self._tool_cell(row, tool)
        if ok:
            cell[0] += 1
        else:
            cell[1] += 1
        if not ok:
            t.tool_errors += 1
        elif plan.succeeds:
            t.succeeded = True
        steps = t.steps
        kept = len(steps)
        if kept < self._max_steps:
            step.index = kept
            steps.append(step)
        else:
            t.steps_dropped += 1
            self._stats["steps_dropped"] += 1
        if plan.write:
            (t.writes_ok if ok else t.writes_failed).setdefault(step.call_key, t.trace_hex)
        if plan.confirms:
            conf = confirmations.from_tool_step(step, self.policy)
            if conf is not None:
                confirmations.keep(t.extra, conf)

    def _tool_row(self, t: Trajectory) -> dict[str, list[int]]:
        """Tool call counts of the run's (service, agent): tool -> [ok, error], kept on the run."""
        rows = self._tool_rows
        key = (t.service_name, t.agent_name)
        row = rows.get(key)
        if row is None:
            if len(rows) >= 4096:  # agent names come from spans: bound the rows
                key = (t.service_name, "other")
                row = rows.get(key)
            if row is None:
                row = rows[key] = {}
        t.tool_row = row
        return row

    def _tool_cell(self, row: dict[str, list[int]], tool: str) -> list[int]:
        """A new tool's [ok, error] counts: bounded (tool names come from models), "other" past the cap."""
        if self._tool_cells >= self._max_tool_keys:
            tool = "other"
            cell = row.get(tool)
            if cell is not None:
                return cell
        cell = row[tool] = [0, 0]
        self._tool_cells += 1
        return cell

    def _tool_counts(self) -> dict[tuple[str, str, str, bool], int]:
        """The tool call counts as (service, agent, tool, ok) -> count, for the metrics (scrape time)."""
        out: dict[tuple[str, str, str, bool], int] = {}
        for (service, agent), row in list(self._tool_rows.items()):
            for tool, cell in list(row.items()):
                ok, err = cell[0], cell[1]
                if ok:
                    out[(service, agent, tool, True)] = ok
                if err:
                    out[(service, agent, tool, False)] = err
        return out

    def _llm(self, t: Trajectory, span: Any, attrs: dict[str, Any], usage: tuple[str | None, int, int],
             out: list[Violation], end_ns: int) -> None:
        model, inp, outp = usage
        if t.conversation_id is None:
            self._bind_conversation(t, extract.conversation(attrs))
        price = self._prices.get(model) or self._price(model)
        cost = inp * price[0] + outp * price[1]
        n = t.llm_calls + 1
        lim = t.limits
        gate = (n > lim[1] or t.input_tokens + t.output_tokens + inp + outp > lim[2] or t.cost_usd + cost > lim[3]
                or end_ns - t.started_ns > lim[4])
        if gate or self._llm_rules:  # only then is the call needed as an object
            call = extract.llm_call(span, attrs)
            call.cost_usd = cost
            if self._llm_rules:
                self._run_rules(call, t, out, self._llm_rules)
            if gate:
                self._run_rules(call, t, out, self._gated[LLMCall])
        t.llm_calls = n
        t.input_tokens += inp
        t.output_tokens += outp
        t.cost_usd += cost
        if self._needs_content:  # the latest model call's messages, for confirmation/grounding
            t.extra["prev_chat"] = t.extra.get("last_chat")
            t.extra["last_chat"] = (end_ns, span)

    def _price(self, model: str | None) -> tuple[float, float]:
        """USD per input and output token for a model (the policy's table), cached per model name."""
        p = self.policy.price_for(model)
        price = (p.input_per_mtok / 1e6, p.output_per_mtok / 1e6) if p is not None else (0.0, 0.0)
        if len(self._prices) < 1024:  # model names come from spans: bound the cache
            self._prices[model] = price
        return price

    def _agent(self, root: _Root, t: Trajectory, info: AgentSpan, own: bool) -> None:
        self._bind_conversation(t, info.conversation_id)
        if info.name and (own or not root.named):
            self._set_name(root, info.name, named=True)
        if own or t.root is None:
            t.root = info

    # --- finalise --------------------------------------------------------------------------------
    def _finalise(self, root: _Root, reason: str, end_ns: int, out: list[Violation]) -> Trajectory | None:
        root.done = True
        t = root.traj
        if t is None:
            return None
        self._open.pop(t.key, None)
        if end_ns > t.last_seen_ns:
            t.last_seen_ns = end_ns
        r = t.root
        if t.llm_calls == 0 and r is not None and (r.input_tokens or r.output_tokens):
            t.input_tokens, t.output_tokens = r.input_tokens, r.output_tokens
            price = self._prices.get(r.model) or self._price(r.model)
            t.cost_usd = r.input_tokens * price[0] + r.output_tokens * price[1]
        lim = t.limits
        rules = self._by_event[Finish]
        gate = ((t.llm_calls == 0 and t.input_tokens + t.output_tokens > lim[2]) or t.cost_usd > lim[3]
                or end_ns - t.started_ns > lim[4])
        if rules or gate:
            event = Finish(end_ns=end_ns, reason=reason)
            if rules:
                self._run_rules(event, t, out, rules)
            if gate:
                self._run_rules(event, t, out, self._gated[Finish])
        t.outcome = self._outcome(t, reason)
        steps = t.steps
        last = -1
        ordered = True
        for s in steps:
            if s.start_ns < last:
                ordered = False
                break
            last = s.start_ns
        if not ordered:  # spans end out of start order now and then
            steps.sort(key=_start_ns)
            for i, s in enumerate(steps):
                s.index = i
        conv = t.conversation
        if conv is not None:
            for k, v in t.writes_ok.items():
                conv.writes_ok.setdefault(k, v)
            for k, v in t.writes_failed.items():
                conv.writes_failed.setdefault(k, v)
            if t.last_seen_ns > conv.last_seen_ns:
                conv.last_seen_ns = t.last_seen_ns
            for conf in t.extra.get("confirmations", ()):
                if not conf.used:  # a yes given in this turn may authorise a write in the next
                    confirmations.keep(conv.extra, conf)
            if self._needs_content:
                texts = conv.extra.setdefault("grounding_texts", [])
                texts.extend(x for s in steps if (x := extract.result_text(s.raw_result)))
                del texts[:-32]
        t.finished = True
        t.tool_row = None  # the engine's live counts: not handed out with the run
        extra = t.extra
        for key in _SPAN_HOLDERS:
            if key in extra:
                del extra[key]  # drop span references: a finished trajectory holds no spans
        return t

    def _outcome(self, t: Trajectory, reason: str) -> Any:
        if reason != "root_end":
            return "incomplete"
        r = t.root
        if r is not None and r.outcome in ("success", "failure"):
            return r.outcome
        if t.succeeded:
            return "success"
        if r is not None and not r.ok:
            return "failure"
        return "unknown"

    def _evict(self, t: Trajectory, reason: str) -> None:
        """Finalise early as ``incomplete``; delivered with the next output (or at flush)."""
        root: _Root = t.extra["root"]
        self._stats["evicted"][reason] += 1
        if root.key == root.trace_id and self._trace_roots.get(root.key) is root:
            del self._trace_roots[root.key]
            self._remember_done(root.key)
        found: list[Violation] = []
        f = self._finalise(root, reason, max(self._now, t.last_seen_ns), found)
        if f is not None:
            self._evicted.append((f, found))

    def _remember_done(self, trace_id: int) -> None:
        rd = self._recent_done
        rd[trace_id] = None
        if len(rd) > self._late_memory:
            rd.popitem(last=False)

    def _maybe_sweep(self) -> Any:
        now = self._now
        if now >= self._next_sweep:
            self._next_sweep = now + 1_000_000_000  # at most once a second of span time
            open_ = self._open
            limit = now - self._ttl_ns
            while open_:
                t = next(iter(open_.values()))
                if t.last_seen_ns >= limit:
                    if t.last_seen_ns == t.queued_ns:
                        break  # not seen since queued, and fresh: so is everything queued after it
                    t.queued_ns = t.last_seen_ns  # seen since queued: to the back, as of then
                    open_.move_to_end(t.key)
                    continue
                open_.popitem(last=False)
                self._evict(t, "ttl")
            convs = self._conversations
            climit = now - self._conv_ttl_ns
            while convs:
                c = next(iter(convs.values()))
                if c.last_seen_ns >= climit:
                    break
                convs.popitem(last=False)
                self._stats["conversations_evicted"]["ttl"] += 1
        if not self._evicted:
            return None
        evicted, self._evicted = self._evicted, []
        return [v for _, found in evicted for v in found], [f for f, _ in evicted]

    # --- flush / shutdown -------------------------------------------------------------------------
    def finalise_all(self, reason: str = "shutdown") -> None:
        """Finalise everything still open as ``incomplete`` (flush and shutdown)."""
        with self._lock:
            for t in list(self._open.values()):
                self._open.pop(t.key, None)
                self._evict(t, reason)
            self._trace_roots.clear()
            evicted, self._evicted = self._evicted, []
        for f, found in evicted:
            self._deliver(found, [f])

    # --- count: sinks, outside the lock ----------------------------------------------------------
    def _deliver(self, violations: Sequence[Violation], finished: Sequence[Trajectory]) -> None:
        for v in violations:
            if self._log_violations:
                self._log(v)
            for cb in self._on_violation:
                try:
                    cb(v)
                except Exception:
                    self._stats["errors"]["callback"] += 1
        for t in finished:
            for done in self._on_finish:
                try:
                    done(t)
                except Exception:
                    self._stats["errors"]["finish"] += 1

    def _log(self, v: Violation) -> None:
        try:
            fields = {"rule": v.rule, "severity": v.severity, "agent": v.agent, "tool": v.tool,
                      "trace_id": v.trace_id, "span_id": v.span_id, "service_name": v.service_name,
                      "conversation": short_hash(v.conversation_id) if v.conversation_id else None,
                      **v.details}
            log.warning(f"agenteval.violation: {v.message}", **fields)
        except Exception:
            self._stats["errors"]["callback"] += 1

    def count_error(self, stage: str) -> None:
        """One more error at a stage (``agenteval_processor_errors_total``), without building :attr:`stats`."""
        self._stats["errors"][stage] += 1

    @property
    def stats(self) -> dict[str, Any]:
        """The engine's own counters: spans by kind, evictions, late spans, drops, errors (live, not a copy)."""
        s = self._stats
        s["spans"].update(tool=self._n_tool, llm=self._n_llm, agent=self._n_agent,
                          confirmation=self._n_confirmation, other=self._n_other)
        s["tool_calls"] = self._tool_counts()
        return s

    @property
    def open_trajectories(self) -> int:
        return len(self._open)


def load_custom_rules(policy: Policy) -> list[Rule]:
    """The policy's ``custom_rules`` ("module:attr"), imported once; errors name the entry."""
    import importlib

    out: list[Rule] = []
    for i, ref in enumerate(policy.custom_rules):
        module_name, _, attr = ref.partition(":")
        try:
            target: Any = importlib.import_module(module_name)
            for part in attr.split("."):
                target = getattr(target, part)
        except Exception as exc:
            raise PolicyError("policy", [f"custom_rules.{i}: cannot load {ref!r}: {exc}"]) from None
        if not callable(target):
            raise PolicyError("policy", [f"custom_rules.{i}: {ref!r} is not callable"])
        out.append(target)
    return out
