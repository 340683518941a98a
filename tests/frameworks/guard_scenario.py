"""The guard's scenario for frameworks driven in a process of their own (Strands, Google ADK).

A support agent, scripted: ``lookup_order`` and ``create_claim`` run; the identical
``create_claim`` again, ``delete_account`` (outside the agent's ``allowed_tools``) and
``issue_refund`` with nobody's yes are stopped by the guard before they run, and the model gets
a result that says why. The processor then reports no violation (nothing wrong ran), counts the
three in ``agenteval_blocked_actions_total`` and records only what ran as steps. A driver runs
:data:`TURNS` through its framework with the hook and writes :func:`outcome` to ``live.json``.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from otel_agenteval import Policy

AGENT = "support_agent"
POLICY = Policy.from_dict({
    "tools": {"create_claim": {"write": True},
              "issue_refund": {"write": True, "requires_confirmation": True},
              "delete_account": {"write": True}},
    "agents": {"*": {"allowed_tools": ["lookup_order", "create_claim", "issue_refund"]}},
})
CLAIM = {"order_id": "88120", "reason": "damaged"}
TURNS: list[tuple[str, dict[str, Any]]] = [
    ("lookup_order", {"order_id": "88120"}),
    ("create_claim", CLAIM),
    ("create_claim", CLAIM),
    ("delete_account", {"account": "A-1"}),
    ("issue_refund", {"order_id": "88120", "amount": 25}),
]
FINAL_TEXT = "Claim filed; the refund needs your confirmation."


def usage_of(turn: int) -> tuple[int, int]:
    """Input and output tokens of a model turn (the same for each)."""
    return 100, 5

RAN: list[str] = []  # the tools whose bodies ran, in order


def lookup_order(order_id: str) -> str:
    """Look up an order."""
    RAN.append("lookup_order")
    return "delivered"


def create_claim(order_id: str, reason: str) -> str:
    """Create a claim."""
    RAN.append("create_claim")
    return "CLM-1"


def delete_account(account: str) -> str:
    """Delete an account."""
    RAN.append("delete_account")
    return "deleted"


def issue_refund(order_id: str, amount: int) -> str:
    """Refund an order."""
    RAN.append("issue_refund")
    return "refunded"


TOOLS = [lookup_order, create_claim, delete_account, issue_refund]


def blocked(registry: CollectorRegistry) -> dict[str, float]:
    """``agenteval_blocked_actions_total`` as ``{"rule/tool": count}``."""
    return {f"{s.labels['rule']}/{s.labels['tool']}": s.value for m in registry.collect()
            if m.name == "agenteval_blocked_actions" for s in m.samples if s.name.endswith("_total")}


def outcome(run: Any, results: list[str]) -> dict[str, Any]:
    """What the test compares: what ran, what the model got back, what the processor saw.
    ``results``: the tool results the model was given, in call order (a stopped call's: its rule)."""
    spans = run.exporter.get_finished_spans()
    return {
        "ran": RAN,
        "results": results,
        "blocked": dict(sorted(blocked(run.registry).items())),
        "violations": [v.rule for v in run.violations],
        "steps": [[(s.tool, s.ok) for s in t.steps] for t in run.trajectories],
        "blocked_spans": sorted([str(s.attributes.get("agenteval.guard.rule")), s.name] for s in spans
                                if s.attributes.get("agenteval.blocked") is True),
    }


def expected(on_tool_span: bool) -> dict[str, Any]:
    """``on_tool_span``: the framework's tool span is open when the hook runs, and carries the
    decision; else each stopped call gets an ``agenteval.guard`` span of its own."""
    stopped = [("duplicate_write", "create_claim"), ("scope_violation", "delete_account"),
               ("write_without_confirmation", "issue_refund")]
    return {
        "ran": ["lookup_order", "create_claim"],
        "results": ["delivered", "CLM-1", "duplicate_write", "scope_violation", "write_without_confirmation"],
        "blocked": {"duplicate_write/create_claim": 1.0, "scope_violation/delete_account": 1.0,
                    "write_without_confirmation/issue_refund": 1.0},
        "violations": [],
        "steps": [[["lookup_order", True], ["create_claim", True]]],
        "blocked_spans": [[rule, f"execute_tool {tool}" if on_tool_span else "agenteval.guard"] for rule, tool in stopped],
    }


def stopped_by(text: str) -> str:
    """A tool result as the test compares it: a stopped call's by its rule, others as they are."""
    marker = "stopped by policy rule "
    if marker in text:
        return text.split(marker, 1)[1].split(":", 1)[0]
    return text
