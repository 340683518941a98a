"""Writes inferred from tool names: ``create_claim``, ``issueRefund``, ``orders.cancel`` write.

With no policy, or for a tool the policy does not name, a tool whose name starts with a write
verb is an *inferred write*: a second identical call is a ``duplicate_write`` (severity
``warning`` until the policy declares the tool a write). ``infer_writes: false`` in the policy
turns it off. Decided once per tool name (cached, bounded): tool names come from models.
"""

from __future__ import annotations

import functools
import re
from typing import Final

# The verbs a write tool's name starts with. Only whole words count: ``settings_get`` and
# ``address_lookup`` are reads. Words that start reads as often as writes (file, order, open,
# email, log, record, run, execute, start) are left out: declare those tools in the policy.
WRITE_VERBS: Final = frozenset((
    "accept", "activate", "add", "append", "apply", "approve", "archive", "assign", "attach", "ban", "block",
    "book", "buy", "cancel", "charge", "checkout", "close", "commit", "confirm", "create", "deactivate",
    "debit", "decline", "delete", "deny", "deploy", "deposit", "destroy", "detach", "disable", "downgrade",
    "drop", "edit", "enable", "enroll", "escalate", "grant", "import", "insert", "invite", "issue", "kill",
    "mark", "merge", "modify", "move", "notify", "patch", "pay", "place", "post", "publish", "purchase",
    "purge", "push", "put", "refund", "register", "reject", "remove", "rename", "renew", "replace", "reply",
    "reschedule", "reserve", "reset", "restore", "revoke", "rollback", "save", "schedule", "sell", "send",
    "set", "settle", "share", "ship", "sign", "submit", "subscribe", "suspend", "terminate", "transfer",
    "trigger", "truncate", "unblock", "unsubscribe", "update", "upgrade", "upload", "upsert", "void", "wipe",
    "withdraw", "write",
))

MAX_NAMES: Final = 4096  # names decided and remembered (beyond it, decided again: a regex, no growth)

_NAMESPACE = re.compile(r"__|[./:]")  # "crm.create_contact", "mcp__github__create_issue", "orders/cancel"
_FIRST_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")  # snake_case, kebab-case, camelCase, PascalCase


def first_word(tool: str) -> str:
    """The verb position of a tool name: the first word of its last namespace segment, lower-cased."""
    parts = [p for p in _NAMESPACE.split(tool) if p.strip(" _-")]
    if not parts:
        return ""
    m = _FIRST_WORD.search(parts[-1])
    return m.group(0).lower() if m else ""


_HANDOFF = re.compile(r"^(?:escalate|handoff|hand_?off)|^transfer[_\-.]?(?:to|agent|human|call|conversation|chat)"
                      r"|^transfer.*(?:agent|human|operator|supervisor|support)", re.IGNORECASE)


def is_handoff(tool: str) -> bool:
    """A hand-off to another agent or a person (``transfer_to_human_agents``, ``escalate_ticket``),
    not a write: it changes who answers, not the user's data. ``transfer_funds`` is a write."""
    parts = [p for p in _NAMESPACE.split(tool) if p.strip(" _-")]
    return bool(parts) and _HANDOFF.search(parts[-1]) is not None


@functools.lru_cache(maxsize=MAX_NAMES)
def is_inferred_write(tool: str) -> bool:
    """Whether the name of ``tool`` starts with a write verb and is no hand-off (the policy is not
    consulted here)."""
    return first_word(tool) in WRITE_VERBS and not is_handoff(tool)
