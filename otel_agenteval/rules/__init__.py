"""Rules: small plain callables ``rule(event, check) -> violations`` (see :mod:`.check`).

The built-in rules, one module per family; :data:`KNOWN_RULES` names every rule a violation can carry.

Stage 4 of 6: imports ``model``, ``policy``, ``reading``. A rule reads; it changes nothing but its own
state on the check.
"""

from __future__ import annotations

from ..model.rule_names import EMITTED_BY, KNOWN_RULES
from .budgets import budget_breach
from .check import ALL_EVENTS, Check, Event, Finish, Preview, Rule, applies_to
from .confirmation import unauthorized_action, write_without_confirmation
from .grounding import ungrounded_argument
from .scope import conditional_forbidden, ordering_violation, scope_violation
from .taint import tainted_argument
from .writes import duplicate_write


def builtin_rules() -> dict[str, Rule]:
    """Every built-in rule, by the name used in ``policy.rules`` and metric labels."""
    return {
        "duplicate_write": duplicate_write,
        "budget_breach": budget_breach,
        "write_without_confirmation": write_without_confirmation,
        "unauthorized_action": unauthorized_action,
        "scope_violation": scope_violation,
        "ordering_violation": ordering_violation,
        "conditional_forbidden": conditional_forbidden,
        "ungrounded_argument": ungrounded_argument,
        "tainted_argument": tainted_argument,
    }


__all__ = ["ALL_EVENTS", "EMITTED_BY", "KNOWN_RULES", "Check", "Event", "Finish", "Preview", "Rule", "applies_to", "builtin_rules"]
