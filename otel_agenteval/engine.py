"""The one path every front door uses: a span in -> route -> assemble -> check -> count.

Two ways in: :meth:`Engine.start` + :meth:`Engine.end` in process (the span processor), which
routes each span to its run through its parent; and :meth:`Engine.end` alone (recorded traces),
which keys runs by trace and finalises one when the trace's local root ends.

Locking: the engine's lock guards only the store (:mod:`.store`) and run creation, for a few
dict operations, never user code. A run's events are applied by one thread at a time: the
thread that ends a span appends it to the run's inbox and applies the inbox itself unless
another thread is doing so (a lock only ever *tried*). Rules, metrics, logs and callbacks run
with no lock held, and a span ended by the monitor's own code (a rule, a callback) is not
checked again (counted as ``reentrant``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

import structlog
from opentelemetry.attributes import BoundedAttributes

from . import _semconv as sc
from . import confirmations, extract
from .assemble import Assembler, bounded_tool_name
from .dispatch import Dispatch, guard, in_monitor, load_custom_rules, repeated
from .extract import AGENT, ENDED_SPAN, FAST_SPANS, LLM, OP_KIND, STARTED_SPAN, TOOL, SpanView, as_dict
from .finalise import finish
from .policy import Policy
from .routing import FINISH, Arrival, Run, explicit_agent_name, guessed_agent_name
from .rules import Rule, builtin_rules
from .store import ProcessClock, SpanClock, Store, conversation_key
from .trajectory import AgentSpan, LLMCall, ToolStep, Trajectory, short_hash
from .violation import Violation

log = structlog.get_logger("otel_agenteval")

Sink = Callable[[Violation], None]
FinishSink = Callable[[Trajectory], None]
Clock = ProcessClock | SpanClock

_BOUNDED: Final = BoundedAttributes  # Final: read from a C static when compiled


class Engine:
    def __init__(
        self,
        policy: Policy,
        *,
        rules: Iterable[Rule] | None = None,
        on_violation: Sequence[Sink] = (),
        on_finish: Sequence[FinishSink] = (),
        log_violations: bool = True,
        clock: Clock | None = None,
    ) -> None:
        self.policy = policy
        if rules is None:
            rules = [r for name, r in builtin_rules().items() if policy.rule_enabled(name)]
            rules.extend(load_custom_rules(policy))
        self._stats: dict[str, Any] = {
            "spans": {"tool": 0, "llm": 0, "agent": 0, "confirmation": 0, "other": 0},
            "evicted": {"capacity": 0, "ttl": 0, "shutdown": 0},
            "conversations_evicted": {"capacity": 0, "ttl": 0},
            "tool_calls": {},  # (service, agent, tool, ok) -> count, made from the assembler's rows when read
            "late": 0,
            "steps_dropped": 0,
            "routes_dropped": 0,
            "dropped": {"reentrant": 0, "duplicate": 0, "after_shutdown": 0},  # spans not taken, by why
            "state_dropped": 0,  # entries of bounded per-run and conversation maps not kept
            "clock_skew": 0,  # recorded spans dated in the future (not moving the replay clock)
            "errors": {"on_start": 0, "on_end": 0, "rule": 0, "callback": 0, "finish": 0, "shutdown": 0},
        }
        self._spans: dict[str | None, int] = {TOOL: 0, LLM: 0, AGENT: 0, extract.CONFIRMATION: 0, None: 0}
        self._dispatch = Dispatch(policy, rules, self._stats["errors"])
        self._assembler = Assembler(policy, policy.limits.max_tool_labels, self._stats)
        self._store = Store(policy.limits, self._stats)
        self._clock: Clock = clock if clock is not None else ProcessClock()
        self._needs_confirmations = policy.needs_confirmations
        self._needs_content = policy.needs_content
        self._on_violation = tuple(on_violation)
        self._on_finish = tuple(on_finish)
        self._log_violations = log_violations  # off where violations are reported otherwise (replay)
        self._max_routes = policy.limits.max_open_spans
        self._lock = threading.Lock()
        self._routes: dict[int, Run] = {}  # span id -> its run, from its start to its end
        self._victims: list[Run] = []  # evicted runs to finalise once the lock is released
        self._last_service: tuple[Any, str] = (object(), "")  # (resource, its service.name)
        self._closed = False

    # --- front door: span start (in process only) ---------------------------------------------
    def start(self, span: Any, parent_context: Any = None) -> None:
        try:
            if self._closed:
                return
            tp = type(span)
            if tp is not STARTED_SPAN and tp not in FAST_SPANS:
                span = SpanView(span)
            parent: tuple[Any, ...] | None = span._parent  # SpanContext: a tuple (indexed natively when compiled)
            ctx: tuple[Any, ...] = span._context
            routes = self._routes
            run = None if parent is None or parent[2] else routes.get(parent[1])
            a = span._attributes
            attrs: dict[str, Any] = a._dict if type(a) is _BOUNDED else as_dict(a)
            op = attrs.get(sc.OPERATION_NAME)
            if isinstance(op, str):
                agent = op == sc.OP_INVOKE_AGENT
            else:
                agent = extract.is_agent_at_start(span) if op is None else False
            if run is None or (agent and not run.is_agent):
                # a local root, or the outermost agent span under a non-agent root
                run = Run(ctx[1], ctx[0], span._start_time or 0, self._service(span))
                if attrs or type(a) is _BOUNDED:
                    run.attributes = attrs  # the span's own dict: complete once it ends, nothing copied
                if agent:
                    run.is_agent = True
                    self._name_at_start(run, span, attrs, own=True)
            elif agent:
                self._name_at_start(run, span, attrs, own=False)
            routes[ctx[1]] = run  # a dict write is atomic: no lock
            if len(routes) > self._max_routes:
                self._drop_route()
        except Exception:
            self._stats["errors"]["on_start"] += 1

    def _service(self, span: Any) -> str:
        """``service.name`` of a span's resource, remembered for the last resource seen."""
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

    def _name_at_start(self, run: Run, span: Any, attrs: dict[str, Any], own: bool) -> None:
        explicit = explicit_agent_name(attrs)
        if explicit:
            if own or not run.named:
                self._rename(run, explicit, True)
        elif run.agent_name is None:
            guess = guessed_agent_name(span, attrs, own)
            if guess:
                self._rename(run, guess, False)

    def _rename(self, run: Run, name: str, named: bool) -> None:
        run.rename(name, named, self._dispatch.limits_for(name))

    # --- front door: span end -----------------------------------------------------------------
    def end(self, span: Any) -> None:
        try:
            tp = type(span)
            if tp is not ENDED_SPAN and tp not in FAST_SPANS:
                span = SpanView(span)
            ctx: tuple[Any, ...] = span._context
            sid: int = ctx[1]
            if self._closed or in_monitor():
                self._routes.pop(sid, None)
                self._stats["dropped"]["after_shutdown" if self._closed else "reentrant"] += 1
                return
            a = span._attributes
            attrs: dict[str, Any] = a._dict if type(a) is _BOUNDED else as_dict(a)
            op: Any = attrs.get(sc.OPERATION_NAME)  # the GenAI semconv case, decided without a call
            kind = OP_KIND.get(op) if op is not None else extract.classify(span, attrs)
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
            self._spans[kind] += 1
            now = self._clock.now(end_ns)
            run = self._routes.pop(sid, None)
            if (run is not None and item is not None and sid != run.key and not run.closed
                    and not (self._needs_confirmations and span._events)):
                self._submit(run, Arrival(kind, item, span, attrs, end_ns), now)  # a step inside an open run
            else:
                self._end_other(span, kind, item, attrs, run, end_ns, now)
            if now >= self._store.next_sweep or self._victims:
                self._sweep(now)
        except Exception:
            self._stats["errors"]["on_end"] += 1

    def _end_other(self, span: Any, kind: str | None, item: Any, attrs: dict[str, Any], run: Run | None,
                   end_ns: int, now: int) -> None:
        """Everything but a step inside an open run: root ends, spans keyed by trace, duplicates, late spans."""
        ctx = span._context
        if run is not None:
            if run.closed:
                self._stats["late"] += 1
                return
            root_end = ctx[1] == run.key
            if item is None and not root_end and not (self._needs_confirmations and span._events):
                return  # a span of no interest inside a run
        else:
            parent = span._parent
            if parent is not None and not parent[2] and parent[1] in self._routes:
                # its parent is open and routed, so this span was routed at its start: a second delivery
                self._stats["dropped"]["duplicate"] += 1
                return
            tid = ctx[0]
            with self._lock:
                store = self._store
                run = store.by_trace.get(tid)
                if run is None:
                    if tid in store.done_traces:
                        self._stats["late"] += 1
                        return
                    if item is None:  # no agent activity seen in this trace: nothing to keep
                        return
                    run = store.by_trace[tid] = Run(tid, tid, span._start_time or 0, self._service(span))
            root_end = extract.is_local_root(span)
        self._submit(run, Arrival(kind, item, span, attrs, end_ns, root_end=root_end), now)

    # --- a run's events, one thread at a time ---------------------------------------------------
    def _submit(self, run: Run, arrival: Arrival, now: int) -> None:
        """Queue ``arrival`` on its run and apply the run's inbox, unless another thread is at it."""
        run.inbox.append(arrival)
        self._drain(run, now)

    def _drain(self, run: Run, now: int) -> None:
        inbox = run.inbox
        busy = run.busy
        while inbox and busy.acquire(False):  # checked again after release: nothing is left behind
            try:
                while inbox:
                    self._apply(run, inbox.popleft(), now)
            finally:
                busy.release()

    def _apply(self, run: Run, a: Arrival, now: int) -> None:
        if run.done:
            self._stats["late"] += 1
            return
        out: list[Violation] = []
        finished = None
        if a.kind is FINISH:
            finished = self._finalise(run, a.reason, a.end_ns, out)
        else:
            run.seen_at = now
            span = a.span
            if self._needs_confirmations and span._events:
                for conf in confirmations.from_events(span):
                    confirmations.keep(self._trajectory(run, span, now).extra, conf)
            item = a.item
            if item is not None:
                t = run.traj
                if t is None:
                    t = self._trajectory(run, span, now)
                t.last_seen_ns = a.end_ns
                kind = a.kind
                if kind is TOOL:
                    self._tool(run, t, item, out, now)
                elif kind is LLM:
                    self._llm(run, t, span, a.attrs, item, out, a.end_ns, now)
                elif kind is AGENT:
                    self._agent(run, t, item, a.root_end, now)
                else:
                    confirmations.keep(t.extra, item)
            if a.root_end:
                finished = self._root_ended(run, span, a.attrs, a.end_ns, out)
        if out or finished is not None:
            self._deliver(out, finished)

    # --- assemble ---------------------------------------------------------------------------------
    def _trajectory(self, run: Run, span: Any, now: int) -> Trajectory:
        t = run.traj
        if t is None:
            start = run.start_ns or span._start_time or 0
            agent = run.agent_name or "unknown"
            t = Trajectory(key=run.key, trace_id=run.trace_id, service_name=run.service, started_ns=start,
                           agent_name=agent, last_seen_ns=start, limits=self._dispatch.limits_for(agent),
                           root_attributes=run.attributes)
            run.traj = t
            cid = run.attributes.get(sc.CONVERSATION_ID) or run.attributes.get(sc.OI_SESSION_ID)
            with self._lock:
                if cid:
                    self._bind_conversation(t, cid, now)
                victim = self._store.admit(run, now)
                if victim is not None:
                    self._evicted(victim, "capacity")
        return t

    def _bind_conversation(self, t: Trajectory, cid: Any, now: int) -> None:
        """Under the lock: ``t`` joins its conversation (the first id seen for it wins)."""
        if t.conversation_id is None:
            key = conversation_key(cid)
            t.conversation_id = key
            t.conversation = self._store.conversation(key, now, t.last_seen_ns)

    def _join(self, t: Trajectory, cid: Any, now: int) -> None:
        if cid and t.conversation_id is None:
            with self._lock:
                self._bind_conversation(t, cid, now)

    def _tool(self, run: Run, t: Trajectory, step: ToolStep, out: list[Violation], now: int) -> None:
        if t.conversation_id is None:
            self._join(t, step.conversation_id, now)
        if not run.named:
            name = step.agent_name
            if name:
                self._rename(run, name, True)
        bounded_tool_name(step)
        dispatch = self._dispatch
        plan = dispatch.plan(step.tool)
        if plan.on_repeat and repeated(t, step):
            dispatch.run(step, self._check(run, t), out, plan.on_repeat)
        if plan.rules:
            dispatch.run(step, self._check(run, t), out, plan.rules)
        lim = t.limits
        if t.tool_calls + 1 > lim.max_steps or lim.check_repeats or step.end_ns - t.started_ns > lim.max_duration_ns:
            dispatch.run(step, self._check(run, t), out, dispatch.gated_tool)
        self._assembler.tool(run, t, step, plan)

    def _llm(self, run: Run, t: Trajectory, span: Any, attrs: dict[str, Any], usage: tuple[str | None, int, int],
             out: list[Violation], end_ns: int, now: int) -> None:
        model, inp, outp = usage
        if t.conversation_id is None:
            self._join(t, extract.conversation(attrs), now)
        price = self._assembler.price(model)
        cost = inp * price[0] + outp * price[1]
        lim = t.limits
        dispatch = self._dispatch
        gate = (t.llm_calls + 1 > lim.max_llm_calls or t.input_tokens + t.output_tokens + inp + outp > lim.max_tokens
                or t.cost_usd + cost > lim.max_cost_usd or end_ns - t.started_ns > lim.max_duration_ns)
        if gate or dispatch.llm_rules:  # only then is the call needed as an object
            call: LLMCall = extract.llm_call(span, attrs)
            call.cost_usd = cost
            if dispatch.llm_rules:
                dispatch.run(call, self._check(run, t), out, dispatch.llm_rules)
            if gate:
                dispatch.run(call, self._check(run, t), out, dispatch.gated_llm)
        self._assembler.llm(t, inp, outp, cost)
        if self._needs_content:  # the latest model call's messages, for confirmation/grounding
            t.extra["prev_chat"] = t.extra.get("last_chat")
            t.extra["last_chat"] = (end_ns, span)

    def _agent(self, run: Run, t: Trajectory, info: AgentSpan, own: bool, now: int) -> None:
        self._join(t, info.conversation_id, now)
        if info.name and (own or not run.named):
            self._rename(run, info.name, True)
        if own or t.root is None:
            t.root = info

    def _check(self, run: Run, t: Trajectory) -> Any:
        c = run.check
        if c is None:
            c = run.check = self._dispatch.check_of(t)
        return c

    # --- finalise ---------------------------------------------------------------------------------
    def _root_ended(self, run: Run, span: Any, attrs: dict[str, Any], end_ns: int,
                    out: list[Violation]) -> Trajectory | None:
        if attrs and attrs is not run.attributes:  # a foreign span's copy: merge the end's
            run.attributes.update(attrs)
        with self._lock:
            self._store.discard(run)
        t = run.traj
        if t is not None and t.root is None:
            ctx = span._context
            outcome, ok = extract.root_outcome(span)
            t.root = AgentSpan(name=None, span_id=ctx[1], trace_id=ctx[0], start_ns=span._start_time or 0,
                               end_ns=end_ns, ok=ok, is_root=True, outcome=outcome)
        return self._finalise(run, "root_end", end_ns, out)

    def _finalise(self, run: Run, reason: str, end_ns: int, out: list[Violation]) -> Trajectory | None:
        run.done = True
        t = run.traj
        if t is None:
            return None
        if reason != "root_end":
            self._stats["evicted"][reason] += 1
            end_ns = max(end_ns, t.last_seen_ns)
        finish(t, reason, end_ns, run.check, self._dispatch, self._assembler, self._needs_content, out)
        if t.state_dropped:
            self._stats["state_dropped"] += t.state_dropped
        run.check = None
        run.tool_row = None
        return t

    def _evicted(self, run: Run, reason: str) -> None:
        """Under the lock: ``run`` was taken out of the store; finalised once the lock is released."""
        run.inbox.append(Arrival(FINISH, None, None, {}, self._clock.span_now(), reason=reason))
        self._victims.append(run)

    def _sweep(self, now: int) -> None:
        with self._lock:
            if now >= self._store.next_sweep:
                for run in self._store.expired(now):
                    self._evicted(run, "ttl")
            victims, self._victims = self._victims, []
        for run in victims:
            self._drain(run, now)

    # --- flush / shutdown -------------------------------------------------------------------------
    def finalise_all(self, reason: str = "shutdown") -> None:
        """Finalise everything still open as ``incomplete`` (flush and shutdown)."""
        now = self._clock.now(0)
        with self._lock:
            for run in self._store.all_open():
                self._evicted(run, reason)
            victims, self._victims = self._victims, []
        for run in victims:
            self._drain(run, now)

    def close(self) -> None:
        """Shutdown: finalise what is open; spans that end after this are counted, not processed."""
        self._closed = True
        self.finalise_all("shutdown")

    def after_fork(self) -> None:
        """In a forked child: a fresh lock and no runs of the parent's (they finish there)."""
        self._lock = threading.Lock()
        self._routes.clear()
        self._victims = []
        self._store.clear()
        self._assembler.clear()

    # --- count: sinks, outside the lock ----------------------------------------------------------
    def _deliver(self, violations: Sequence[Violation], finished: Trajectory | None) -> None:
        guard.active = True  # a span the sinks make is theirs, not the agent's
        try:
            for v in violations:
                if self._log_violations:
                    self._log(v)
                for cb in self._on_violation:
                    try:
                        cb(v)
                    except Exception:
                        self._stats["errors"]["callback"] += 1
            if finished is not None:
                for done in self._on_finish:
                    try:
                        done(finished)
                    except Exception:
                        self._stats["errors"]["finish"] += 1
        finally:
            guard.active = False

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
        n = self._spans
        s["spans"].update(tool=n[TOOL], llm=n[LLM], agent=n[AGENT], confirmation=n[extract.CONFIRMATION],
                          other=n[None])
        s["tool_calls"] = self._assembler.tool_counts()
        if isinstance(self._clock, SpanClock):
            s["clock_skew"] = self._clock.skewed
        return s

    @property
    def open_trajectories(self) -> int:
        return len(self._store.open)


__all__ = ["Engine", "ProcessClock", "SpanClock", "load_custom_rules"]
