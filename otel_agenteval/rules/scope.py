"""``scope_violation``, ``ordering_violation`` and ``conditional_forbidden``: where and when a tool may run."""

from __future__ import annotations

from ..model.patterns import PolicyPattern, compile_pattern
from ..model.trajectory import ToolStep
from ..model.violation import Violation
from ..reading.confirmations import _compare
from ..reading.span_values import result_text
from .check import Check, Event, applies_to

_REGEX: dict[str, PolicyPattern] = {}


@applies_to((ToolStep,), lambda p: None if any(a.allowed_tools is not None for a in p.agents.values()) else frozenset(),
            guard=True)
def scope_violation(event: Event, check: Check) -> list[Violation] | None:
    """A tool not in the agent's ``allowed_tools`` (an agent's own list, else ``"*"``'s)."""
    if not isinstance(event, ToolStep):
        return None
    allowed = check.policy.allowed_tools_for(check.trajectory.agent_name)
    if allowed is None or event.tool in allowed:
        return None
    return [check.violation("scope_violation", "critical",
                            f"{event.tool} is not in the allowed tools of agent {check.trajectory.agent_name}", event)]


def _succeeded_before(check: Check, tool: str, start_ns: int) -> list[ToolStep]:
    return [s for s in check.trajectory.steps if s.tool == tool and s.ok and s.end_ns <= start_ns]


@applies_to((ToolStep,), lambda p: frozenset(n for n, t in p.tools.items() if t.requires_before), guard=True)
def ordering_violation(event: Event, check: Check) -> list[Violation] | None:
    """A tool ran before every tool in its ``requires_before`` had succeeded earlier in the run."""
    if not isinstance(event, ToolStep):
        return None
    tp = check.policy.tools.get(event.tool)
    if tp is None or not tp.requires_before:
        return None
    steps, start = check.trajectory.steps, event.start_ns
    missing = [r for r in tp.requires_before if not any(s.tool == r and s.ok and s.end_ns <= start for s in steps)]
    if not missing:
        return None
    return [check.violation("ordering_violation", "critical",
                            f"{event.tool} ran before {', '.join(missing)} had succeeded", event, missing=missing)]


@applies_to((ToolStep,), lambda p: frozenset(n for n, t in p.tools.items() if t.forbidden_if), guard=True)
def conditional_forbidden(event: Event, check: Check) -> list[Violation] | None:
    """``forbidden_if``: after a matching result of another tool, or on another subject than the caller's."""
    if not isinstance(event, ToolStep):
        return None
    tp = check.policy.tools.get(event.tool)
    if tp is None or not tp.forbidden_if:
        return None
    out: list[Violation] = []
    for cond in tp.forbidden_if:
        if cond.after is not None and cond.result_matches is not None:
            rx = _REGEX.get(cond.result_matches)
            if rx is None:
                rx = _REGEX[cond.result_matches] = compile_pattern(cond.result_matches)
            for earlier in _succeeded_before(check, cond.after, event.start_ns):
                text = result_text(earlier.raw_result)
                if text is not None and rx.search(text):
                    out.append(check.violation(
                        "conditional_forbidden", "critical",
                        f"{event.tool} ran after a {cond.after} result that forbids it", event,
                        condition=f"after {cond.after} matching the policy pattern"))
                    break
        if cond.same_subject is not None:
            subject = check.trajectory.root_attributes.get(cond.same_subject.attribute)
            value = event.arguments.get(cond.same_subject.argument)
            if subject is None or value is None:
                continue
            if not _compare(check.policy, event.tool, cond.same_subject.argument, str(subject), str(value)):
                out.append(check.violation(
                    "conditional_forbidden", "critical",
                    f"{event.tool} acted on a {cond.same_subject.argument} that is not the caller's", event,
                    condition=f"same_subject {cond.same_subject.argument} = {cond.same_subject.attribute}"))
    return out or None
