"""The one path every front door uses: a span in -> route -> extract -> check -> assemble -> count.

In process, :meth:`Engine.start` + :meth:`Engine.end` route each span to its run through its
parent; recorded traces use :meth:`Engine.end` alone, runs keyed by trace, finalised when the
trace's local root ends. The lock guards only the store and run creation, never user code; a run's
events are applied by one thread at a time (docs/architecture.md, "Locking model")."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from opentelemetry.attributes import BoundedAttributes

from ..policy.policy import Policy
from ..reading import confirmations, extract, tool_steps
from ..reading import semconv as sc
from ..reading.extract import AGENT, LLM, OP_KIND, TOOL
from ..reading.spanfields import SpanView
from ..reading.spans import ENDED_SPAN, FAST_SPANS, STARTED_SPAN, ServiceNames, as_dict
from ..reading.unread import count_unread
from ..rules import Rule, builtin_rules
from .assemble import Assembler
from .dispatch import Dispatch, load_custom_rules
from .errors import caught
from .events import RunEvents
from .fragments.held import HeldFragments
from .routing import Arrival, Run, drop_oldest, name_at_start, name_root, outer_context
from .self_stats import SpanCounts, new_stats, read_stats
from .sinks import FinishSink, Sink, Sinks
from .store import ProcessClock, SpanClock, Store
from .threadstate import forget_all, in_monitor

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
        on_trajectory: Sequence[FinishSink] = (),
        log_violations: bool = True,
        clock: Clock | None = None,
        one_caller: bool = False,
    ) -> None:
        self.policy = policy
        self._one_caller = one_caller  # calls never overlap (replay; serve, one at a time): no run lock
        if rules is None:
            rules = [r for name, r in builtin_rules().items() if policy.rule_enabled(name)]
            rules.extend(load_custom_rules(policy))
        self._stats: dict[str, Any] = new_stats()
        self._spans = SpanCounts()
        self._clock: Clock = clock if clock is not None else ProcessClock()
        self._dispatch = Dispatch(policy, rules, self._stats["errors"], log_violations)
        self._store = Store(policy.limits, self._stats)
        self._assembler = Assembler(policy, policy.limits.max_tool_labels, self._stats)
        sinks = Sinks(on_violation, on_finish, on_trajectory, log_violations, policy.outputs, self._stats, self._clock)
        self._events = RunEvents(self._dispatch, self._assembler, self._store, sinks, self._clock, self._stats)
        self._needs_confirmations = policy.needs_confirmations
        self._max_routes = policy.limits.max_open_spans
        self._reads_baggage = bool(on_trajectory)  # a case id in baggage is for whoever takes finished runs
        self._routes: dict[int, Run] = {}  # span id -> its run, from its start to its end
        self._services = ServiceNames()
        self._closed = False
        self.fragments = HeldFragments(self, not one_caller)  # pieces of runs, a trace each: held until complete

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
            tool = False
            if isinstance(op, str):
                agent = op == sc.OP_INVOKE_AGENT
            else:
                agent = extract.is_agent_at_start(span) if op is None else False
                # an OpenInference tool span may wrap the framework's own span of the same call
                tool = op is None and attrs.get(sc.OI_SPAN_KIND) == sc.OI_TOOL
            if run is None or (agent and not run.is_agent):  # a local root, or an agent run under a non-agent root
                outer = outer_context(run, parent_context, routes, self._reads_baggage)  # what it inherits: a case id
                run = Run(ctx[1], ctx[0], span._start_time or 0, self._services.of(span), outer)
                if attrs or type(a) is _BOUNDED:
                    run.attributes = attrs  # the span's own dict: complete once it ends, nothing copied
                run.is_agent = agent
                name_root(run, span, attrs, self._dispatch)
                if parent is None:
                    self.fragments.root_started(span, run.service, attrs)
            elif agent:
                name_at_start(run, span, attrs, False, self._dispatch)
            elif not run.is_agent and (sc.AE_CASE_ID in attrs or sc.AGENTEVALS_CASE_ID in attrs):
                run.names_case(ctx[1], attrs)  # a span around the agent runs to come names their case
            if tool:
                run.open_tool(ctx[1], attrs)
            routes[ctx[1]] = run  # a dict write is atomic: no lock
            if len(routes) > self._max_routes and drop_oldest(routes):
                self._stats["routes_dropped"] += 1
        except Exception:
            caught(self._stats["errors"], "on_start")

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
            counts = self._spans
            item: Any
            if kind is TOOL:
                if attrs.get(sc.AE_BLOCKED) is True:  # stopped by the guard: it did not run
                    kind = item = None
                    counts.other += 1
                else:
                    item = tool_steps.step_of(span, attrs, ctx, end_ns)
                    counts.tool += 1
            elif kind is LLM:
                item = extract.usage(attrs)
                counts.llm += 1
            elif kind is AGENT:
                item = extract.agent_span(span, attrs)
                counts.agent += 1
            elif kind is None:
                item = None
                counts.other += 1
                if attrs:
                    count_unread(self._stats["unread"], span, attrs)
            else:
                item = confirmations.from_span(span)
                counts.confirmation += 1
            now = self._clock.now(end_ns)
            run = self._routes.pop(sid, None)
            if run is not None and run.open_tools is not None:
                if kind is TOOL:
                    parent = span._parent
                    item = run.nest(item, sid, None if parent is None else parent[1])
                    if item is None:
                        return  # the inner span of one call: merged when the outer one ends
                elif sid == run.key and run.nested:
                    for held in run.held_steps():
                        self._submit(run, TOOL, held, span, attrs, end_ns, now)
            if (run is not None and item is not None and sid != run.key and not run.closed
                    and not (self._needs_confirmations and span._events)):
                self._submit(run, kind, item, span, attrs, end_ns, now)  # a step inside an open run
            else:
                self._end_other(span, kind, item, attrs, run, end_ns, now)
            if now >= self._store.next_sweep or self._store.victims:
                self._sweep(now)
        except Exception:
            caught(self._stats["errors"], "on_end")

    def _end_other(self, span: Any, kind: str | None, item: Any, attrs: dict[str, Any], run: Run | None,
                   end_ns: int, now: int) -> None:
        """Everything but a step inside an open run: root ends, spans keyed by trace, duplicates, late spans."""
        ctx = span._context
        if run is not None:
            if run.closed:
                self._stats["late"] += 1
                return
            root_end = ctx[1] == run.key
            if root_end and span._parent is None and self.fragments.root_ended(span, kind, attrs, run, now):
                return  # a piece of a run, held (fragments/)
            if item is None and not root_end and not (self._needs_confirmations and span._events):
                run.note_marker(attrs)
                return  # a span of no interest inside a run (a framework's marker on it is remembered)
        else:
            parent = span._parent
            if parent is not None and not parent[2] and parent[1] in self._routes:
                # its parent is open and routed, so this span was routed at its start: a second delivery
                self._stats["dropped"]["duplicate"] += 1
                return
            tid = ctx[0]
            store = self._store
            run = store.by_trace.get(tid)  # a dict read is atomic: the lock only to add a run
            if run is None:
                with store.lock:
                    run = store.by_trace.get(tid)
                    if run is None:
                        if tid in store.done_traces:
                            self._stats["late"] += 1
                            return
                        if item is None:  # no agent activity seen in this trace: nothing to keep
                            return self._events.workflow_without_run(span, attrs) if parent is None else None
                        run = store.by_trace[tid] = Run(tid, tid, span._start_time or 0, self._services.of(span))
            root_end = parent is None or bool(parent[2])  # a local root: no parent, or a remote one
        self._submit(run, kind, item, span, attrs, end_ns, now, root_end)

    # --- a run's events, one thread at a time ---------------------------------------------------
    def _submit(self, run: Run, kind: str | None, item: Any, span: Any, attrs: dict[str, Any], end_ns: int, now: int,
                root_end: bool = False) -> None:
        """Apply a span's end to its run, or queue it (an :class:`Arrival`) for the thread applying
        that run's events: the usual case, nobody else at this run, makes no object for it."""
        events = self._events
        if self._one_caller and not run.inbox:  # no other thread: nobody to wait for
            events.span_ended(run, kind, item, span, attrs, end_ns, root_end, now)
            return
        turn = run.turn
        if not run.inbox and turn.take():  # the usual case: nobody else at this run
            try:
                events.span_ended(run, kind, item, span, attrs, end_ns, root_end, now)
            finally:
                turn.give_back()
            if run.inbox:  # queued meanwhile by other threads
                self._drain(run, now)
            return
        run.inbox.append(Arrival(kind, item, span, attrs, end_ns, root_end))
        self._drain(run, now)

    def _drain(self, run: Run, now: int) -> None:
        inbox = run.inbox
        turn = run.turn
        apply = self._events.apply
        while inbox and turn.take():  # checked again after giving it back: nothing is left behind
            try:
                while inbox:
                    apply(run, inbox.pop(0), now)  # atomic, like append: another thread may be queueing
            finally:
                turn.give_back()

    def _sweep(self, now: int) -> None:
        """Expiry (once a second of the clock), then the evicted runs finalised, outside the lock."""
        store = self._store
        with store.lock:
            if now >= store.next_sweep:
                for run in store.expired(now):
                    store.evict(run, "ttl", self._clock.span_now())
            victims, store.victims = store.victims, []
        for run in victims:
            self._drain(run, now)

    # --- flush / shutdown ------------------------------------------------------------------------
    def finalise_all(self, reason: str = "shutdown") -> None:
        """Finalise everything still open as ``incomplete`` (flush and shutdown)."""
        self.fragments.flush()
        now = self._clock.now(0)
        store = self._store
        with store.lock:
            for run in store.all_open():
                store.evict(run, reason, self._clock.span_now())
            victims, store.victims = store.victims, []
        for run in victims:
            self._drain(run, now)

    def close(self) -> None:
        """Shutdown: finalise what is open; spans that end after this are counted, not processed."""
        self._closed = True
        self.finalise_all("shutdown")

    def after_fork(self) -> None:
        """In a forked child: a fresh lock and no runs of the parent's (they finish there)."""
        self._routes.clear()
        self._store.clear()  # with a fresh lock
        self.fragments.clear()
        forget_all()
        self._assembler.clear()

    # --- the engine's own counters ----------------------------------------------------------------
    def count_error(self, stage: str) -> None:
        """One more error at a stage (``agenteval_processor_errors_total``), without building :attr:`stats`."""
        self._stats["errors"][stage] += 1

    def count_drop(self, reason: str) -> None:
        self._stats["dropped"][reason] += 1  # a span not taken (agenteval_spans_dropped_total)

    @property
    def stats(self) -> dict[str, Any]:
        """The engine's own counters: spans by kind, evictions, late spans, drops, errors (live, not a copy)."""
        skewed = self._clock.skewed if isinstance(self._clock, SpanClock) else None
        return read_stats(self._stats, self._spans, self._assembler.tool_counts(), skewed)

    @property
    def open_trajectories(self) -> int:
        return len(self._store.open)


__all__ = ["Engine", "ProcessClock", "SpanClock", "load_custom_rules"]
