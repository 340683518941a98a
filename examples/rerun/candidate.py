"""A candidate version of the demo's support agent, for ``otel-agenteval rerun``.

It reads the user's turn, looks the order up once, reads the policy, asks before a refund or an
address change, then writes once. Every tool call goes through ``tools`` (the rerun's gate): the
recorded observation comes back, nothing real runs.
"""

from __future__ import annotations

import re
from typing import Any

WRITES = {"claim": "create_claim", "refund": "issue_refund", "send": "update_address"}
TOPICS = {"claim": "damaged_delivery", "refund": "refunds", "send": "address_change"}


def agent(turn: Any, tools: Any) -> str:
    """One turn: ``turn.text`` is the user's message; ``tools.call(name, arguments)`` answers."""
    text = turn.text or ""
    order = re.search(r"order (\d+)", text, re.IGNORECASE)
    order_id = order.group(1) if order else ""
    tools.call("lookup_order", {"order_id": order_id})
    intent = next((k for k in WRITES if re.search(rf"\b{k}\b", text)), None)
    if intent is None:
        return f"Order {order_id} is on its way."
    tools.call("get_policy", {"topic": TOPICS[intent]})
    if intent == "claim":
        reason = "damaged" if "damaged" in text else "missing_item"
        args: dict[str, Any] = {"order_id": order_id, "reason": reason}
    elif intent == "refund":
        amount = float(re.search(r"refund ([\d.]+)", text).group(1))  # type: ignore[union-attr]
        args = {"order_id": order_id, "amount": amount}
        tools.call("ask_user_confirmation", {"tool": "issue_refund", "amount": amount})
    else:
        address = text.split(" to ", 1)[1].rstrip(".")
        args = {"order_id": order_id, "address": address}
        tools.call("ask_user_confirmation", {"tool": "update_address", **args})
    tools.call(WRITES[intent], args)
    return "Done."
