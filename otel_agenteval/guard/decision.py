"""What the guard says about a tool call before it runs: a :class:`Decision`, and the
:class:`ActionBlocked` error that carries one (see :mod:`.guard`)."""

from __future__ import annotations

from dataclasses import dataclass

from ..model.rule_names import Severity
from ..model.violation import Violation
from ..policy.guard_section import GuardMode

# the rules whose findings a confirmation from the user would clear
CONFIRMATION_RULES = frozenset({"write_without_confirmation", "unauthorized_action"})
GUARD_ERROR = "guard_error"  # the rule named when the guard could not decide and failed closed


@dataclass(frozen=True, slots=True)
class Decision:
    """The guard's answer for one tool call.

    ``allowed``: the call may run. ``would_block``: a rule stops it; in ``mode: observe`` the
    call is still ``allowed`` (decided and counted, not stopped). ``rule``, ``severity`` and
    ``message`` are the first blocking finding's, word for word what the after-the-fact check
    reports; ``violations`` all of them, ``warnings`` the findings that do not block
    (``guard.allow_rules``). ``needs_confirmation``: a confirmation from the user is all that is
    missing. ``error``: the guard could not decide, and failed closed or open as the policy says.
    """

    tool: str
    allowed: bool
    would_block: bool = False
    mode: GuardMode = "enforce"
    rule: str | None = None
    severity: Severity | None = None
    message: str | None = None
    needs_confirmation: bool = False
    violations: tuple[Violation, ...] = ()
    warnings: tuple[Violation, ...] = ()
    error: bool = False

    @property
    def blocked(self) -> bool:
        """The call must not run (``not allowed``)."""
        return not self.allowed

    @property
    def reason(self) -> str:
        """What to tell the agent in place of the tool's result, so it can ask the user."""
        if not self.would_block:
            return f"{self.tool} is allowed"
        text = f"Not done: {self.tool} was stopped by policy rule {self.rule}: {self.message}."
        if self.needs_confirmation:
            text += " Ask the user to confirm this exact action (tool and values), then call it again."
        return text


class ActionBlocked(Exception):  # noqa: N818 - the name users catch reads as what happened
    """Raised by :meth:`~otel_agenteval.guard.guard.Guard.enforce` (and the hooks set to ``raise``)
    for a call the guard stopped; ``decision`` says why."""

    def __init__(self, decision: Decision) -> None:
        super().__init__(decision.reason)
        self.decision = decision


__all__ = ["CONFIRMATION_RULES", "GUARD_ERROR", "ActionBlocked", "Decision"]
