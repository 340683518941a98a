"""The guard tests' scenario: a support agent's policy, and one tool call made the way a framework
makes it (a tool span, current while the guard is asked, ended after)."""

from __future__ import annotations

import json
from typing import Any

from conftest import Harness
from opentelemetry import trace
from opentelemetry.sdk.trace import Span

from otel_agenteval import Decision, Guard

GUARD_POLICY = r"""
tools:
  lookup_order: {}
  check_fraud: {}
  ask_user_confirmation: {}
  create_claim: {write: true}
  issue_refund: {write: true, requires_confirmation: true, confirm_arguments: [amount]}
  update_payment: {write: true, forbidden_if: [{after: check_fraud, result_matches: '"flagged":\s*true'}]}
  delete_account: {write: true}
confirmation:
  tools: [ask_user_confirmation]
agents:
  support:
    allowed_tools: [lookup_order, check_fraud, ask_user_confirmation, create_claim, issue_refund, update_payment]
"""

CLAIM = {"order_id": "88120", "reason": "damaged_in_transit"}
REFUND_A = {"order_id": "88120", "amount": 25}
REFUND_B = {"order_id": "77001", "amount": 25}
REFUND_40 = {"order_id": "88120", "amount": 40}
YES_25 = ("ask_user_confirmation", {"tool": "issue_refund", "amount": 25}, json.dumps({"confirmed": True}))

# (tool, arguments, result, error): the seed cases in one conversation, in order
SCENARIO: list[tuple[str, dict[str, Any], str | None, str | None]] = [
    ("lookup_order", {"order_id": "88120"}, '{"status": "delivered"}', None),   # in-scope read: allowed
    ("create_claim", CLAIM, '{"claim_id": "CLM-1"}', None),                    # allowed
    ("create_claim", CLAIM, '{"claim_id": "CLM-2"}', None),                    # the second identical one
    ("issue_refund", REFUND_40, "ok", None),                                    # no confirmation
    (*YES_25, None),                                                            # the user says yes to 25
    ("issue_refund", REFUND_40, "ok", None),                                    # a yes for another amount
    ("issue_refund", REFUND_A, "ok", None),                                     # the confirmed refund
    ("issue_refund", REFUND_B, "ok", None),                                     # a second refund on that yes
    ("check_fraud", {"account": "A-1"}, '{"flagged": true}', None),
    ("update_payment", {"account": "A-1", "card": "4111"}, "ok", None),        # fraud flag set
    ("delete_account", {"account": "A-1"}, "ok", None),                         # outside allowed_tools
    ("create_claim", {"order_id": "55555", "reason": "lost"}, None, "timeout"),  # a write that fails
    ("create_claim", {"order_id": "55555", "reason": "lost"}, '{"claim_id": "CLM-3"}', None),  # its retry
]
# what enforce mode decides for each call of SCENARIO (None: allowed)
BLOCKED_BY = [None, None, "duplicate_write", "write_without_confirmation", None, "write_without_confirmation", None,
              "write_without_confirmation", None, "conditional_forbidden", "scope_violation", None, None]


def call(h: Harness, guard: Guard, parent: Span, tool: str, args: dict[str, Any], at: float,
         result: str | None = None, error: str | None = None) -> Decision:
    """One tool call as a framework hook makes it: the guard asked inside the tool span; the tool
    runs (its result or error on the span) only if allowed."""
    span = h.start(f"execute_tool {tool}", parent, at, {"gen_ai.operation.name": "execute_tool",
                                                       "gen_ai.tool.name": tool,
                                                       "gen_ai.tool.call.arguments": json.dumps(args)})
    with trace.use_span(span, end_on_exit=False):
        decision = guard.check(tool, args)
    ran = decision.allowed
    h.end(span, at + 0.1, {"gen_ai.tool.call.result": result} if ran and result is not None else None,
          error=error if ran else None)
    return decision
