"""``Guard``: the processor's rules asked about a tool call *before* it runs.

Built by :meth:`TrajectoryProcessor.guard`, it shares the processor's policy, rules and live
state: the run is found from the active OTel context (the tool span about to do the work, or
the agent span around it), and the same rule functions the processor runs after the fact are
called on a hypothetical step with ``check.preview`` set, so they read the state and change
nothing. What an allowed call will use up (its confirmation, its place as the one write of
those arguments) is promised to it (:mod:`.guard_holds`) until the engine records it.

No lock is held while a rule runs; the guard's own lock covers a few dict operations.

With ``background=True`` the span ends the app made before the call may still be queued for the
processor's consumer thread: ``settle`` (the hand-off's) waits until they are applied, so the
guard decides on everything the run and its conversation ended before the call, as inline. If
they are not applied in time (a rule or callback is stuck), the call is decided as a guard error:
the policy's ``fail`` says which way.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

from opentelemetry import trace
from opentelemetry.context import Context, attach, detach

from ..engine.dispatch import MAX_PLANS, Dispatch, repeated
from ..engine.routing import Run
from ..engine.store import Store, conversation_key
from ..engine.threadstate import enter, leave
from ..metrics.prometheus import GuardMetrics
from ..model.product_log import LineSampling
from ..model.trajectory import ToolStep, Trajectory
from ..model.violation import Violation
from ..reading import semconv as sc
from ..reading.confirmations import Hold, record_confirmation
from ..reading.spans import FAST_SPANS, attributes_of
from ..rules import Check, Preview
from .decision import CONFIRMATION_RULES, GUARD_ERROR, ActionBlocked, Decision, log_stopped
from .holds import Holds
from .plan import GuardPlan, guarding, plan_for

TRACER_NAME: Final = "otel_agenteval.guard"


class Guard:
    """Asks the processor's rules whether a tool call may run, from the run's state as it is now.

    >>> guard = processor.guard()
    >>> guard.enforce("issue_refund", {"order_id": "88120", "amount": 40})  # raises ActionBlocked
    """

    def __init__(self, dispatch: Dispatch, store: Store, routes: dict[int, Run], metrics: GuardMetrics,
                 lines: LineSampling, tracer_provider: trace.TracerProvider | None = None,
                 settle: Callable[[], bool] | None = None) -> None:
        self._dispatch = dispatch
        self._lines = lines  # the engine's: the stopped calls' log lines sampled with the violations'
        self._settle = settle  # background=True: apply the span ends queued before the call first
        self._policy = policy = dispatch.policy
        self._store = store
        self._routes = routes
        self._metrics = metrics
        self._tracer = trace.get_tracer(TRACER_NAME, tracer_provider=tracer_provider)
        self._holds = Holds(routes)
        self._plans: dict[str, GuardPlan] = {}
        self._gated = guarding(dispatch.gated_tool)
        self._allow = frozenset(policy.guard.allow_rules)
        self._disabled = dispatch.disabled
        self._confirming = frozenset(n for n, t in policy.tools.items()
                                     if t.requires_confirmation or t.destructive) | policy.write_tools
        if not _DEFAULT:
            _DEFAULT.append(self)

    # --- the front door ---------------------------------------------------------------------------
    def check(self, tool: str, arguments: Any = None, *, context: Context | None = None) -> Decision:
        """The decision for calling ``tool`` with ``arguments`` now, in the run of the span active in
        ``context`` (default: the current one). An allowed call's confirmation and write are promised
        to it. A blocked one is recorded on its tool span (or a span of its own) and counted."""
        plan = self._plan(tool)
        span = trace.get_current_span(context)
        try:
            if self._settle is not None and not self._settle():
                raise TimeoutError("the span ends before the call were not applied in time")
            on_tool_span = _is_tool_span(span, tool)
            decision, run, t = self._decide(tool, arguments, span, on_tool_span, plan)
        except Exception:  # noqa: BLE001 - a broken rule or state: the policy says which way to fail
            return self._failed(tool, plan, span)
        if decision.would_block or plan.write:
            try:
                self._record(span, decision, run is not None and on_tool_span, t)
            except Exception:  # noqa: BLE001 - the decision stands; the failure to record it is counted
                self._metrics.errors.labels("record").inc()
        return decision

    def peek(self, tool: str, arguments: Any = None, *, context: Context | None = None) -> Decision:
        """The decision :meth:`check` would give now, with nothing promised, recorded or counted
        (to ask whether a call will need the user's approval before asking for it)."""
        plan = self._plan(tool)
        span = trace.get_current_span(context)
        try:
            if self._settle is not None and not self._settle():
                raise TimeoutError("the span ends before the call were not applied in time")
            return self._decide(tool, arguments, span, _is_tool_span(span, tool), plan, promise=False)[0]
        except Exception:  # noqa: BLE001 - as check() would: the policy's way to fail
            return Decision(tool, allowed=not plan.fail_closed or plan.mode == "observe", would_block=plan.fail_closed,
                            mode=plan.mode, rule=GUARD_ERROR if plan.fail_closed else None, error=True)

    def enforce(self, tool: str, arguments: Any = None, *, context: Context | None = None) -> Decision:
        """:meth:`check`, raising :class:`ActionBlocked` when the call must not run."""
        decision = self.check(tool, arguments, context=context)
        if not decision.allowed:
            raise ActionBlocked(decision)
        return decision

    def record_confirmation(self, tool: str, arguments: Any = None, *, at_ns: int | None = None,
                            context: Context | None = None) -> None:
        """Record that the user confirmed calling ``tool`` with ``arguments``, in the run of the span
        active in ``context``, on the guard's tracer provider (see
        :func:`~otel_agenteval.record_confirmation`): a hook turns a framework's approval into the
        confirmation both the guard and the processor's rule then find."""
        args = arguments if isinstance(arguments, dict) else {} if arguments is None else {"input": arguments}
        token = attach(context) if context is not None else None
        try:
            record_confirmation(tool, args, self._tracer, at_ns=at_ns)
        finally:
            if token is not None:
                detach(token)

    def awaiting_approval(self, decision: Decision, *, context: Context | None = None) -> None:
        """Mark the tool span active in ``context`` as a call held for the user's approval (a
        framework asks for it, as ``needs_approval`` does): the call does not run now, so the
        processor takes the span as no step (the approved call, when it runs, is the step). Not
        counted as blocked: asking is not stopping."""
        span = trace.get_current_span(context)
        if _is_tool_span(span, decision.tool):
            span.set_attributes({sc.AE_GUARD_DECISION: "needs_approval", sc.AE_GUARD_RULE: decision.rule or GUARD_ERROR,
                                 sc.AE_BLOCKED: True})

    @property
    def in_flight(self) -> int:
        """Allowed calls still running (their confirmations and writes promised to them)."""
        return self._holds.live()

    # --- deciding ---------------------------------------------------------------------------------
    def _plan(self, tool: str) -> GuardPlan:
        plan = self._plans.get(tool)
        if plan is not None:
            return plan
        plan = plan_for(tool, self._dispatch.plan(tool), self._policy.guard, self._gated, self._confirming)
        if len(self._plans) < MAX_PLANS:
            self._plans[tool] = plan
        return plan

    def _decide(self, tool: str, arguments: Any, span: Any, on_tool_span: bool, plan: GuardPlan,
                promise: bool = True) -> tuple[Decision, Run | None, Trajectory]:
        ctx = span.get_span_context()
        sid: int = ctx.span_id
        run = self._routes.get(sid) if sid else None
        t = self._view(run, ctx.trace_id)
        bound = run is not None and on_tool_span
        start = getattr(span, "start_time", None) if bound else None
        now = start or time.time_ns()
        step = ToolStep(tool, now, now, sid if bound else 0, ctx.trace_id, raw_arguments=arguments or {})
        for _ in range(3):  # again if another call took the confirmation or the write meanwhile
            in_flight = self._holds.in_flight(run, sid) if run is not None and plan.write else frozenset()
            preview = Preview(in_flight)
            found = self._run(step, Check(t, self._policy, self._policy.budget_for(t.agent_name), preview),
                              plan, in_flight)
            decision = self._decision(tool, plan, found)
            if not promise or run is None or not decision.allowed or not (plan.write or preview.confirmation is not None):
                return decision, run, t
            if self._holds.take(run, t, Hold(sid if bound else 0, step.call_key, bound), plan.write,
                                preview.confirmation):
                return decision, run, t
        raise RuntimeError("guard: the state kept changing under the check")

    def _run(self, step: ToolStep, check: Check, plan: GuardPlan, in_flight: frozenset[tuple[str, str]]) -> list[Violation]:
        t = check.trajectory
        rules = plan.rules
        if plan.on_repeat and (repeated(t, step) or step.call_key in in_flight):
            rules = plan.on_repeat + rules
        lim = t.limits
        if plan.gated and (t.tool_calls + 1 > lim.max_steps or lim.check_repeats
                           or step.end_ns - t.started_ns > lim.max_duration_ns
                           or t.input_tokens + t.output_tokens > lim.max_tokens or t.cost_usd > lim.max_cost_usd):
            rules = rules + plan.gated
        out: list[Violation] = []
        if not rules:
            return out
        enter()  # a span a rule ends is the monitor's, not the agent's
        try:
            for rule in rules:
                found = rule(step, check)
                if found:
                    out.extend(found)
        finally:
            leave()
        if self._disabled:
            out = [v for v in out if v.rule not in self._disabled]
        return out

    def _decision(self, tool: str, plan: GuardPlan, found: list[Violation]) -> Decision:
        if not found:
            return plan.allowed
        allow = self._allow
        if allow:  # findings of rules the policy lets through are warnings
            blocking = tuple(v for v in found if v.rule not in allow)
            warnings = tuple(v for v in found if v.rule in allow)
            if not blocking:
                return Decision(tool, True, mode=plan.mode, warned=warnings)
        else:
            blocking, warnings = tuple(found), ()
        first = blocking[0]
        return Decision(tool, allowed=plan.mode == "observe", would_block=True, mode=plan.mode, rule=first.rule,
                        severity=first.severity, message=first.message,
                        needs_confirmation=all(v.rule in CONFIRMATION_RULES for v in blocking),
                        found=blocking, warned=warnings)

    def _view(self, run: Run | None, trace_id: int) -> Trajectory:
        """The run's trajectory as it is; for a run with nothing recorded yet (or none), an empty
        one that sees its conversation's earlier turns. Nothing is added to the store."""
        if run is not None and run.traj is not None:
            return run.traj
        d = self._dispatch
        if run is None:
            return Trajectory(key=0, trace_id=trace_id, service_name="unknown", started_ns=0,
                              limits=d.limits_for("unknown"))
        agent = run.agent_name or "unknown"
        t = Trajectory(key=run.key, trace_id=run.trace_id, service_name=run.service, started_ns=run.start_ns,
                       agent_name=agent, limits=d.limits_for(agent), root_attributes=run.attributes)
        cid = run.attributes.get(sc.CONVERSATION_ID) or run.attributes.get(sc.OI_SESSION_ID)
        if cid:
            key = conversation_key(cid)
            t.conversation_id = key
            t.conversation = self._store.conversations.get(key)  # a dict read: no lock
        return t

    # --- recording and counting -------------------------------------------------------------------
    def _record(self, span: Any, decision: Decision, on_tool_span: bool, t: Trajectory) -> None:
        """The decision on the tool span (its status then tells the outcome); a stopped call with no
        tool span open gets a span of its own. Counted either way."""
        if not decision.would_block:
            if on_tool_span:
                span.set_attribute(sc.AE_GUARD_DECISION, "allowed")
            return
        attrs: dict[str, Any] = {sc.AE_GUARD_DECISION: "blocked" if not decision.allowed else "would_block"}
        attrs[sc.AE_GUARD_RULE] = decision.rule or GUARD_ERROR
        if not decision.allowed:
            attrs[sc.AE_BLOCKED] = True
        if on_tool_span:
            span.set_attributes(attrs)
        else:
            attrs[sc.TOOL_NAME] = decision.tool
            self._tracer.start_span(sc.AE_GUARD_SPAN, context=trace.set_span_in_context(span),
                                    attributes=attrs).end()
        self._metrics.stopped(t.service_name, t.agent_name, decision.rule or GUARD_ERROR, decision.tool,
                              not decision.allowed)
        ctx = span.get_span_context()
        log_stopped(decision, t.agent_name, t.service_name, ctx.trace_id, ctx.span_id, t.conversation_id,
                    self._lines)

    def _failed(self, tool: str, plan: GuardPlan, span: Any) -> Decision:
        closed = plan.fail_closed
        self._metrics.errors.labels("closed" if closed else "open").inc()
        if not closed:
            return Decision(tool, True, mode=plan.mode, error=True)
        decision = Decision(tool, allowed=plan.mode == "observe", would_block=True, mode=plan.mode, rule=GUARD_ERROR,
                            severity="critical",
                            message=f"the guard could not decide on {tool} (internal error); it fails closed", error=True)
        try:
            run = self._routes.get(span.get_span_context().span_id)
            self._record(span, decision, run is not None and _is_tool_span(span, tool), self._view(run, 0))
        except Exception:  # noqa: BLE001 - recording is best effort here: the decision stands
            pass
        return decision


_DEFAULT: list[Guard] = []  # the first guard a processor built: what @guarded uses unless told


def default_guard() -> Guard:
    """The first guard built by :meth:`TrajectoryProcessor.guard` in this process."""
    if not _DEFAULT:
        raise RuntimeError("no guard yet: build one with TrajectoryProcessor(...).guard(), or pass guard=")
    return _DEFAULT[0]


def _is_tool_span(span: Any, tool: str) -> bool:
    """Whether the active span is a tool call's own span (so the decision goes on it): marked so
    by its attributes, or, for frameworks that set them only when it ends (Google ADK), named
    ``execute_tool <tool>`` as GenAI semconv names it."""
    attrs = attributes_of(span) if type(span) in FAST_SPANS else getattr(span, "attributes", None)
    if attrs and (attrs.get(sc.OPERATION_NAME) == sc.OP_EXECUTE_TOOL or attrs.get(sc.OI_SPAN_KIND) == sc.OI_TOOL):
        return True
    name = getattr(span, "name", None)
    return name is not None and name == f"{sc.OP_EXECUTE_TOOL} {tool}"


__all__ = ["ActionBlocked", "Decision", "Guard", "GuardPlan", "default_guard"]
