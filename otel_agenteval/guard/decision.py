"""What the guard says about a tool call before it runs: a :class:`Decision`, and the
:class:`ActionBlocked` error that carries one (see :mod:`.guard`)."""

from __future__ import annotations

from typing import Any, Final

from ..model.product_log import LineSampling, product_log
from ..model.rule_names import Severity
from ..model.trajectory import short_hash
from ..model.violation import Violation
from ..policy.guard_section import GuardMode
from ..reading.labels import safe_label
from ..rules.check import Finding, built

# the rules whose findings a confirmation from the user would clear
CONFIRMATION_RULES = frozenset({"write_without_confirmation", "unauthorized_action"})
GUARD_ERROR = "guard_error"  # the rule named when the guard could not decide and failed closed


log = product_log()  # structlog as the app set it up; stderr when it did not

_FIELDS = ("tool", "allowed", "would_block", "mode", "rule", "severity", "message", "needs_confirmation", "found",
           "warned", "error")


class Decision:
    """The guard's answer for one tool call (read-only).

    ``allowed``: the call may run. ``would_block``: a rule stops it; in ``mode: observe`` the
    call is still ``allowed`` (decided and counted, not stopped). ``rule``, ``severity`` and
    ``message`` are the first blocking finding's, word for word what the after-the-fact check
    reports; ``violations`` all of them, ``warnings`` the findings that do not block
    (``guard.allow_rules``), each built as a :class:`Violation` only when read.
    ``needs_confirmation``: a confirmation from the user is all that is missing. ``error``: the
    guard could not decide, and failed closed or open as the policy says.

    A plain class, not a frozen dataclass: compiled, it is built in a tenth of the time (one per
    stopped call). Its fields are ``Final``: the compiled build refuses to assign them
    (``AttributeError``), mypy flags it in either build.
    """

    __slots__ = _FIELDS

    def __init__(self, tool: str, allowed: bool, would_block: bool = False, mode: GuardMode = "enforce",
                 rule: str | None = None, severity: Severity | None = None, message: str | None = None,
                 needs_confirmation: bool = False, found: tuple[Violation | Finding, ...] = (),
                 warned: tuple[Violation | Finding, ...] = (), error: bool = False) -> None:
        self.tool: Final = tool
        self.allowed: Final = allowed
        self.would_block: Final = would_block
        self.mode: Final = mode
        self.rule: Final = rule
        self.severity: Final = severity
        self.message: Final = message
        self.needs_confirmation: Final = needs_confirmation
        self.found: Final = found  # the blocking findings, as the rules gave them
        self.warned: Final = warned  # the findings that do not block
        self.error: Final = error

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, f) for f in _FIELDS)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Decision):
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        return "Decision(" + ", ".join(f"{f}={getattr(self, f)!r}" for f in _FIELDS) + ")"

    def __reduce__(self) -> tuple[object, ...]:  # copied and pickled field by field (the compiled class too)
        return (Decision, self._values())

    @property
    def violations(self) -> tuple[Violation, ...]:
        """Every blocking finding, as the :class:`Violation` the processor would report."""
        return tuple(built(v) for v in self.found)

    @property
    def warnings(self) -> tuple[Violation, ...]:
        """The findings in ``guard.allow_rules``: noted, not blocking."""
        return tuple(built(v) for v in self.warned)

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


def log_stopped(decision: Decision, agent: str, service: str, trace_id: int, span_id: int,
                conversation_id: str | None, lines: LineSampling) -> None:
    """The log line for a call the guard stopped (``agenteval.blocked``) or, in ``mode: observe``,
    would have (``agenteval.would_block``): as a violation's line, ids in hex, the conversation id
    hashed (:func:`short_hash`), no argument values; sampled by ``lines`` as the violations' are."""
    event = "agenteval.blocked" if not decision.allowed else "agenteval.would_block"
    dropped = lines.admit(event, decision.rule, service, agent, decision.tool)
    if dropped is None:
        return  # sampled out, counted
    fields: dict[str, Any] = {"rule": decision.rule or GUARD_ERROR, "severity": decision.severity,
                              "agent": safe_label(agent, 256), "tool": safe_label(decision.tool, 256),
                              "service_name": safe_label(service, 256), "mode": decision.mode,
                              "trace_id": f"{trace_id:032x}", "span_id": f"{span_id:016x}"}
    if conversation_id:
        fields["conversation"] = short_hash(conversation_id)
    if dropped:
        fields["lines_dropped"] = dropped  # of this kind, since the last one written
    message = safe_label(f"{decision.tool} stopped before it ran: {decision.message or decision.rule}", 2048)
    log.warning(f"{event}: {message}", **fields)

