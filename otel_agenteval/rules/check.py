"""What a rule is: a small plain callable ``rule(event, check) -> violations``.

``event`` is a :class:`~otel_agenteval.model.trajectory.ToolStep` (a tool span just ended), an
:class:`~otel_agenteval.model.trajectory.LLMCall`, or :class:`Finish` (the trajectory is being
finalised). ``check`` is a :class:`Check`: a read-only view of the trajectory, its
conversation and the policy, plus :meth:`Check.violation` to build a finding. A rule returns
an iterable of violations, or ``None`` when nothing is wrong. Rules run before the engine
records the event, so the trajectory holds only what came *before* it.

The guard (:mod:`otel_agenteval.guard`) asks the same rules about a call *about to* run: then
``check.preview`` is a :class:`Preview` and a rule must leave the run's state as it found it
(what it would use up, it notes on the preview instead).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass
from typing import Any, Union

from ..model.rule_names import Severity
from ..model.trajectory import Conversation, LLMCall, ToolStep, Trajectory, short_hash
from ..model.violation import Violation
from ..policy.policy import Budget, Policy


@dataclass(frozen=True, slots=True)
class Finish:
    """The trajectory is ending: its root span ended, or it was evicted (``reason``)."""

    end_ns: int
    reason: str  # "root_end" | "ttl" | "capacity" | "shutdown"


Event = Union[ToolStep, LLMCall, Finish]


class Preview:
    """A hypothetical step being checked before it runs: what it would use, noted, not taken."""

    __slots__ = ("confirmation", "in_flight")

    def __init__(self, in_flight: frozenset[tuple[str, str]] = frozenset()) -> None:
        self.confirmation: Any = None  # the confirmation (or chat turn) the call would use up
        self.in_flight = in_flight  # call keys of writes allowed by the guard, still running


class Finding:
    """A finding made while the guard asks (``check.preview`` set): its rule, severity and
    message at once, its :class:`Violation` (hashes, ids) built on first use of anything else.
    Most stopped calls never need the whole record; those that do get the same one the
    processor would have built."""

    __slots__ = ("_check", "_details", "_step", "_violation", "message", "rule", "severity")

    def __init__(self, check: Check, rule: str, severity: Severity, message: str, step: ToolStep | LLMCall | None,
                 details: dict[str, Any]) -> None:
        self.rule = rule
        self.severity = severity
        self.message = message
        self._check = check
        self._step = step
        self._details = details
        self._violation: Violation | None = None

    def violation(self) -> Violation:
        v = self._violation
        if v is None:
            v = self._violation = self._check.build(self.rule, self.severity, self.message, self._step, self._details)
        return v

    def __getattr__(self, name: str) -> Any:  # any other field of the Violation
        return getattr(self.violation(), name)


def built(found: Violation | Finding) -> Violation:
    """The :class:`Violation` of a rule's finding (built now if the guard deferred it)."""
    return found.violation() if isinstance(found, Finding) else found


class Check:
    """What a rule sees: the trajectory so far, its conversation, the policy."""

    __slots__ = ("budget", "policy", "preview", "trajectory")

    def __init__(self, trajectory: Trajectory, policy: Policy, budget: Budget, preview: Preview | None = None) -> None:
        self.trajectory = trajectory
        self.policy = policy
        self.budget = budget
        self.preview = preview  # set when the guard asks about a call before it runs: change nothing

    @property
    def has_budget(self) -> bool:
        """Whether the agent's budget sets any limit (read only by the budget rule, when a run crosses one)."""
        return any(v is not None for v in self.budget.__dict__.values())

    @property
    def conversation(self) -> Conversation | None:
        return self.trajectory.conversation

    def violation(
        self,
        rule: str,
        default_severity: Severity,
        message: str,
        step: ToolStep | LLMCall | None = None,
        **details: Any,
    ) -> Violation:
        """The finding: a :class:`Violation`, or, when the guard asks, a :class:`Finding` that
        builds it only if it is needed (reads like one)."""
        severity = self.policy.severity_of(rule, default_severity)
        if self.preview is not None:
            return Finding(self, rule, severity, message, step, details)  # type: ignore[return-value]
        return self.build(rule, severity, message, step, details)

    def build(self, rule: str, severity: Severity, message: str, step: ToolStep | LLMCall | None,
              details: dict[str, Any]) -> Violation:
        t = self.trajectory
        tool = step.tool if isinstance(step, ToolStep) else None
        if isinstance(step, ToolStep) and step.raw_arguments is not None:
            details.setdefault("arguments_hash", short_hash(step.arguments_key))
        return Violation(
            rule=rule,
            severity=severity,
            agent=t.agent_name,
            tool=tool,
            trace_id=t.trace_hex,
            span_id=format(step.span_id, "016x") if step is not None else None,
            conversation_id=t.conversation_id,
            message=message,
            details=details,
            service_name=t.service_name,
        )


Rule = Callable[[Event, Check], Iterable[Violation] | None]

ALL_EVENTS = (ToolStep, LLMCall, Finish)


def applies_to(events: tuple[type, ...] = ALL_EVENTS,
               tools: Callable[[Policy], Container[str] | None] | None = None,
               over_budget: bool = False, repeated_call: bool = False, guard: bool = False,
               when: Callable[[Policy], Callable[[Any], bool]] | None = None) -> Callable[[Rule], Rule]:
    """Optional: say which events (and, for tool steps, which tools) a rule looks at.

    The engine then calls it only for those, so a rule costs nothing where it cannot fire.
    ``tools(policy)`` returns the tool names (a set, or a container that decides per name, asked
    once per tool name), or ``None`` for every tool; an empty set means the
    policy gives the rule nothing to check, and it is not called at all. A rule without this
    declaration is called for every event.

    ``over_budget=True``: call it only for an event at which the run's counts (steps, LLM calls,
    tokens, cost, duration) go over the agent's budget, or for every call when the budget sets
    ``max_repeats``. The engine makes that comparison inline, without building the event.

    ``repeated_call=True`` (write tools only): call it only for a write whose normalised call
    (tool and arguments) already ran in this run or its conversation, as recorded in
    ``writes_ok``/``writes_failed``. The engine looks the call up inline.

    ``guard=True``: the guard may ask it about a tool call before the call runs (``check.preview``
    set): it then reads the state and changes nothing, and its findings block the call.

    ``when(policy)`` (tool steps) makes, once per policy, a cheap test of a call alone,
    ``test(step) -> bool``, false where the rule can find nothing: the engine then does not call the
    rule, nor make what a rule call needs. The guard still asks the rule itself.
    """

    def mark(rule: Rule) -> Rule:
        rule.agenteval_events = events  # type: ignore[attr-defined]
        rule.agenteval_tools = tools  # type: ignore[attr-defined]
        rule.agenteval_over_budget = over_budget  # type: ignore[attr-defined]
        rule.agenteval_repeated_call = repeated_call  # type: ignore[attr-defined]
        rule.agenteval_guard = guard  # type: ignore[attr-defined]
        rule.agenteval_when = when  # type: ignore[attr-defined]
        return rule

    return mark
