"""What the guard does for one tool name, decided on its first check (kept per tool by the guard)."""

from __future__ import annotations

from collections.abc import Container

from ..engine.dispatch import ToolPlan
from ..policy.guard_section import GuardMode, GuardPolicy
from ..rules import Rule
from .decision import Decision


class GuardPlan:
    """What the guard does for one tool name, decided on its first check."""

    __slots__ = ("allowed", "fail_closed", "gated", "mode", "on_repeat", "rules", "write")

    def __init__(self, tool: str, rules: tuple[Rule, ...], on_repeat: tuple[Rule, ...], gated: tuple[Rule, ...],
                 write: bool, mode: GuardMode, fail_closed: bool) -> None:
        self.rules = rules
        self.on_repeat = on_repeat
        self.gated = gated
        self.write = write
        self.mode = mode
        self.fail_closed = fail_closed
        self.allowed = Decision(tool, True, mode=mode)  # the answer when no rule finds anything: built once


def guarding(rules: tuple[Rule, ...]) -> tuple[Rule, ...]:
    return tuple(r for r in rules if getattr(r, "agenteval_guard", False))


def plan_for(tool: str, d: ToolPlan, g: GuardPolicy, gated: tuple[Rule, ...], confirming: Container[str]) -> GuardPlan:
    """The plan for ``tool``: the dispatcher's rules for it that guard, and the policy's mode and
    failure mode (a tool's own, else the guard section's; fail closed by default for tools that
    need a confirmation)."""
    own = g.tools.get(tool)
    mode = own.mode if own is not None and own.mode is not None else g.mode
    fail = own.on_error if own is not None and own.on_error is not None else g.on_error
    rules = (*d.rules, *(s.rule for s in d.screened))  # the guard asks screened rules themselves
    return GuardPlan(tool, guarding(rules), guarding(d.on_repeat), gated, d.write, mode,
                     fail == "closed" if fail is not None else tool in confirming)
