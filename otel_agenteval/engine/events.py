"""A run's events applied in the order they came: each checked by its rules, then recorded.

Called by the one thread applying a run's inbox (see :mod:`.engine`), with no lock held but the
store's, taken briefly for a new trajectory or conversation. The order a span's content travels:
:meth:`RunEvents.apply` -> the rules that see it (:mod:`.dispatch`) -> the trajectory
(:mod:`.assemble`) -> at the root's end, :mod:`.finalise` -> the sinks (:mod:`.sinks`).
"""

from __future__ import annotations

from typing import Any

from ..model.trajectory import AgentSpan, LLMCall, ToolStep, Trajectory
from ..model.violation import Violation
from ..reading import confirmations, extract
from ..reading import frameworks as fw
from ..reading import semconv as sc
from ..reading.extract import AGENT, LLM, TOOL
from ..reading.unread import count_fragment, is_workflow_root
from .assemble import Assembler
from .dispatch import Dispatch, repeated
from .finalise import finish
from .routing import FINISH, FRAMEWORK_SPAN, Arrival, Run
from .sinks import Sinks
from .store import ProcessClock, SpanClock, Store, conversation_key


class RunEvents:
    def __init__(self, dispatch: Dispatch, assembler: Assembler, store: Store, sinks: Sinks,
                 clock: ProcessClock | SpanClock, stats: dict[str, Any]) -> None:
        policy = dispatch.policy
        self.dispatch = dispatch
        self.assembler = assembler
        self.store = store
        self.sinks = sinks
        self.clock = clock
        self.stats = stats
        self.needs_confirmations = policy.needs_confirmations
        self.needs_content = policy.needs_content
        self.keeps_chat = policy.needs_messages  # confirmation, grounding or taint read the latest messages

    def apply(self, run: Run, a: Arrival, now: int) -> None:
        """An arrival that waited in the run's inbox: a span's end, or the run's early finalisation."""
        if a.kind is not FINISH:
            self.span_ended(run, a.kind, a.item, a.span, a.attrs, a.end_ns, a.root_end, now)
        elif run.done:
            self.stats["late"] += 1
        else:
            out: list[Violation] = []
            finished = self.finalise(run, a.reason, a.end_ns, out)
            if out or finished is not None:
                self.sinks.deliver(out, finished)

    def span_ended(self, run: Run, kind: str | None, item: Any, span: Any, attrs: dict[str, Any], end_ns: int,
                   root_end: bool, now: int) -> None:
        """A span of the run ended: ``item`` is what extract read from it (None: nothing to record);
        ``root_end``: the run's own key span, so the run is finalised after it."""
        if run.done:
            self.stats["late"] += 1
            return
        out: list[Violation] = []
        finished = None
        run.seen_at = now
        if self.needs_confirmations and span._events:
            for conf in confirmations.from_events(span):
                confirmations.keep(self._trajectory(run, span, now).extra, conf)
        if item is not None:
            t = run.traj
            if t is None:
                t = self._trajectory(run, span, now)
            t.last_seen_ns = end_ns
            if kind is TOOL:
                self._tool(run, t, item, out, now)
            elif kind is LLM:
                parent = span._parent
                wrapper = run.llm_parent == span._context[1]  # a model call ended inside it: not a second call
                run.llm_parent = 0 if parent is None else parent[1]
                if not wrapper:
                    self._llm(run, t, span, attrs, item, out, end_ns, now)
            elif kind is AGENT:
                self._agent(run, t, item, root_end, now, attrs)
            else:
                confirmations.keep(t.extra, item)
        elif attrs and not root_end:
            run.note_marker(attrs)  # keyed by trace: a span of no interest
        if root_end:
            finished = self._root_ended(run, span, attrs, end_ns, out, kind)
        if out or finished is not None:
            self.sinks.deliver(out, finished)

    def _trajectory(self, run: Run, span: Any, now: int) -> Trajectory:
        t = run.traj
        if t is None:
            start = run.start_ns or span._start_time or 0
            agent = run.agent_name or "unknown"
            t = Trajectory(key=run.key, trace_id=run.trace_id, service_name=run.service, started_ns=start,
                           agent_name=agent, last_seen_ns=start, limits=self.dispatch.limits_for(agent),
                           root_attributes=run.attributes, outer_attributes=run.outer)
            run.traj = t
            cid = run.attributes.get(sc.CONVERSATION_ID) or run.attributes.get(sc.OI_SESSION_ID)
            with self.store.lock:
                if cid:
                    self._bind_conversation(t, cid, now)
                victim = self.store.admit(run, now)  # full: the least recently seen run makes room
                if victim is not None:
                    self.store.evict(victim, "capacity", self.clock.span_now())
        return t

    def _bind_conversation(self, t: Trajectory, cid: Any, now: int) -> None:
        """Under the lock: ``t`` joins its conversation (the first id seen for it wins)."""
        if t.conversation_id is None:
            key = conversation_key(cid)
            t.conversation_id = key
            t.conversation = self.store.conversation(key, now, t.last_seen_ns)

    def _join(self, t: Trajectory, cid: Any, now: int) -> None:
        if cid and t.conversation_id is None:
            with self.store.lock:
                self._bind_conversation(t, cid, now)

    def _tool(self, run: Run, t: Trajectory, step: ToolStep, out: list[Violation], now: int) -> None:
        if t.conversation_id is None:
            self._join(t, step.conversation_id, now)
        if not run.named:
            name = step.agent_name
            if name:
                run.rename(name, True, self.dispatch.limits_for(name))
        dispatch = self.dispatch
        plan = dispatch.plan(step.tool)
        if plan.on_repeat and repeated(t, step):
            dispatch.run(step, self._check(run, t), out, plan.on_repeat)
        if plan.rules:
            dispatch.run(step, self._check(run, t), out, plan.rules)
        for s in plan.screened:
            if dispatch.passes(s, step):  # false: the call alone can give the rule nothing, so it is not called
                dispatch.run(step, self._check(run, t), out, s.rules)
        lim = t.limits
        if t.tool_calls + 1 > lim.max_steps or lim.check_repeats or step.end_ns - t.started_ns > lim.max_duration_ns:
            dispatch.run(step, self._check(run, t), out, dispatch.gated_tool)
        self.assembler.tool(run, t, step, plan)

    def _llm(self, run: Run, t: Trajectory, span: Any, attrs: dict[str, Any], usage: tuple[str | None, int, int],
             out: list[Violation], end_ns: int, now: int) -> None:
        model, inp, outp = usage
        if t.conversation_id is None:
            self._join(t, extract.conversation(attrs), now)
        price = self.assembler.price(model)
        cost = inp * price[0] + outp * price[1]
        lim = t.limits
        dispatch = self.dispatch
        gate = (t.llm_calls + 1 > lim.max_llm_calls or t.input_tokens + t.output_tokens + inp + outp > lim.max_tokens
                or t.cost_usd + cost > lim.max_cost_usd or end_ns - t.started_ns > lim.max_duration_ns)
        if gate or dispatch.llm_rules:  # only then is the call needed as an object
            call: LLMCall = extract.llm_call(span, attrs)
            call.cost_usd = cost
            if dispatch.llm_rules:
                dispatch.run(call, self._check(run, t), out, dispatch.llm_rules)
            if gate:
                dispatch.run(call, self._check(run, t), out, dispatch.gated_llm)
        self.assembler.llm(t, inp, outp, cost)
        if self.keeps_chat:  # the latest model call's messages, for confirmation/grounding/taint
            t.saw_chat(end_ns, span)

    def _agent(self, run: Run, t: Trajectory, info: AgentSpan, own: bool, now: int, attrs: dict[str, Any]) -> None:
        self._join(t, info.conversation_id, now)
        name = info.name
        if own and run.named and name != run.agent_name and not extract.stated_agent_name(attrs):
            name = None  # the run's own span states no agent (its name is a guess): the innermost named one wins
        if name and (own or not run.named):
            run.rename(name, True, self.dispatch.limits_for(name))
        if own or t.root is None:
            t.root = info

    def _check(self, run: Run, t: Trajectory) -> Any:
        c = run.check
        if c is None:
            c = run.check = self.dispatch.check_of(t)
        return c

    def _root_ended(self, run: Run, span: Any, attrs: dict[str, Any], end_ns: int,
                    out: list[Violation], kind: str | None = None) -> Trajectory | None:
        if attrs and attrs is not run.attributes:  # a foreign span's copy: merge the end's
            run.attributes.update(attrs)
        with self.store.lock:
            self.store.discard(run)
        t = run.traj
        if t is None:
            if kind is None and not run.is_agent and attrs and is_workflow_root(attrs):
                self.lone_root(span, False)  # a workflow with no agent work in its trace
        elif kind is LLM and t.root is None and not run.is_agent and t.tool_calls == 0:
            # a model call at the root with nothing but model calls under it (a gateway such as
            # LiteLLM): model calls, not an agent run
            self.stats["model_only_runs"] += 1
            self.lone_root(span, False)
            self.finalise(run, "root_end", end_ns, out)
            return None
        elif kind is TOOL and t.root is None and not run.is_agent and t.tool_calls == 1 and t.llm_calls == 0:
            self.lone_root(span, True)  # a tool call alone in its trace, no agent around it
        if t is not None and t.root is None:
            if run.agent_name is None and fw.names_agent_by_root(attrs) and span._name:
                run.rename(span._name, False, self.dispatch.limits_for(span._name))
            ctx = span._context
            outcome, ok = extract.root_outcome(span)
            t.root = AgentSpan(name=None, span_id=ctx[1], trace_id=ctx[0], start_ns=span._start_time or 0,
                               end_ns=end_ns, ok=ok, is_root=True, outcome=outcome)
        return self.finalise(run, "root_end", end_ns, out)

    def lone_root(self, span: Any, tool: bool) -> None:
        """A root that may be a piece of a run arriving as a trace of its own (:func:`count_fragment`)."""
        count_fragment(self.stats["fragmented"], self.stats["fragment_suspects"], span, tool)

    def workflow_without_run(self, span: Any, attrs: dict[str, Any]) -> None:
        """Keyed by trace: a root with no agent work in its trace; a workflow may be a fragment."""
        if attrs and is_workflow_root(attrs):
            self.lone_root(span, False)

    def finalise(self, run: Run, reason: str, end_ns: int, out: list[Violation]) -> Trajectory | None:
        run.done = True
        t = run.traj
        if t is None:
            return None
        if run.marked is not None:
            t.extra[FRAMEWORK_SPAN] = run.marked
        if reason != "root_end":
            self.stats["evicted"][reason] += 1
            end_ns = max(end_ns, t.last_seen_ns)
        finish(t, reason, end_ns, run.check, self.dispatch, self.assembler, self.needs_content, out)
        if t.state_dropped:
            self.stats["state_dropped"] += t.state_dropped
        # spans of the run still open keep routes to it until they end: it holds nothing big
        run.traj = None
        run.check = None
        run.tool_row = None
        run.attributes = {}
        return t
