"""Every rule name a violation can carry, and the severities: the names the policy, the metrics
and the rules share (a module of its own, so none of them imports another for them)."""

from __future__ import annotations

from typing import Literal

Severity = Literal["critical", "warning", "info"]

# Every rule name a violation can carry, with its default severity (a rule function may emit
# more than one name: duplicate_write also emits write_retried_after_error). Used to validate
# policy names and to pre-initialise metric series.
KNOWN_RULES: dict[str, Severity] = {
    "duplicate_write": "critical",
    "write_retried_after_error": "warning",
    "budget_breach": "warning",
    "write_without_confirmation": "critical",
    "unauthorized_action": "critical",
    "scope_violation": "critical",
    "ordering_violation": "critical",
    "conditional_forbidden": "critical",
    "ungrounded_argument": "warning",
    "tainted_argument": "critical",  # a warning when the user pointed at the content it came from
}

# Which rule function emits a name (to switch off `write_retried_after_error` alone, say).
EMITTED_BY = {"write_retried_after_error": "duplicate_write"}
