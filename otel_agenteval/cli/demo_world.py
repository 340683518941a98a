"""A simulated customer-support agent for ``otel-agenteval demo``.

It emits spans shaped like the official GenAI instrumentation (``invoke_agent`` →
``chat`` + ``execute_tool``) through the real OTel SDK, with simulated timestamps so runs
take realistic wall time without sleeping. Seeded: the same seed gives the same runs.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from ..guard.guard import Guard

MODELS = ("gpt-4o", "gpt-4o-mini")

DEMO_POLICY: dict[str, Any] = {
    "version": 1,
    "tools": {
        "create_claim": {"write": True},
        "issue_refund": {"write": True, "requires_confirmation": True, "confirm_arguments": ["amount"]},
        "update_address": {"write": True, "requires_confirmation": True},
    },
    "confirmation": {"tools": ["ask_user_confirmation"]},
    "agents": {
        "*": {"budget": {"max_steps": 12, "max_tokens": 50000, "max_cost_usd": 1.0}},
        "support": {"budget": {"max_steps": 8, "max_duration_s": 60}},
    },
    "pricing": {
        "gpt-4o": {"input_per_mtok": 2.50, "output_per_mtok": 10.00},
        "gpt-4o-mini": {"input_per_mtok": 0.15, "output_per_mtok": 0.60},
    },
    "outcome": {"success_when": ["create_claim", "issue_refund", "update_address"]},
    "guard": {"mode": "observe"},  # every call asked of the guard first; counted, nothing stopped
    "outputs": {"loop_repeats": 2},  # the demo's runs repeat a lookup at most twice: shown as loops
}


@dataclass
class Run:
    """What one simulated run did, for the demo's own bookkeeping."""

    agent: str
    intent: str
    steps: int = 0
    anomalies: list[str] = field(default_factory=list)


class ToolFailure(Exception):
    pass


def _user_message(intent: str, write_args: dict[str, Any], order: str) -> str:
    """The user's turn, as captured on the agent span (what ``rerun`` feeds a candidate agent)."""
    text = {
        "claim": f"Order {order} arrived {write_args.get('reason', '').replace('_', ' ')}: I want to file a claim.",
        "refund": f"Please refund {write_args.get('amount')} for order {order}.",
        "address": f"Please send order {order} to {write_args.get('address')}.",
    }.get(intent, f"Where is my order {order}?")
    return json.dumps([{"role": "user", "parts": [{"type": "text", "content": text}]}])


class SupportWorld:
    """Drives one run at a time through a tracer; every choice comes from ``rng``."""

    def __init__(self, tracer: trace.Tracer, rng: random.Random, start_ns: int, guard: Guard | None = None) -> None:
        self.tracer = tracer
        self.guard = guard  # asked before each tool call (the built-in policy: mode observe)
        self.rng = rng
        self.clock = start_ns
        self.conversations: list[tuple[str, str, dict[str, Any]]] = []  # (id, intent, write args)
        self.n = 0
        self.trials: dict[str, int] = {}  # per intent: runs are trials of a case (agenteval.case.id)
        self.order = ""  # the order the current run is about

    # --- time ---------------------------------------------------------------------------------
    def _advance(self, lo: float, hi: float) -> int:
        self.clock += int(self.rng.uniform(lo, hi) * 1e9)
        return self.clock

    # --- spans --------------------------------------------------------------------------------
    def _chat(self, agent: str, model: str, turn: int, conv: str) -> None:
        start = self.clock
        inp = self.rng.randint(350, 900) + turn * self.rng.randint(150, 400)
        out = self.rng.randint(25, 220)
        span = self.tracer.start_span(f"chat {model}", start_time=start, attributes={
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": model,
            "gen_ai.agent.name": agent, "gen_ai.conversation.id": conv})
        span.set_attribute("gen_ai.response.model", model)
        span.set_attribute("gen_ai.usage.input_tokens", inp)
        span.set_attribute("gen_ai.usage.output_tokens", out)
        span.end(end_time=self._advance(0.3, 2.2))

    def _tool(self, agent: str, conv: str, name: str, args: dict[str, Any], fail: str | None = None,
              result: Any = None) -> bool:
        self.n += 1
        start = self._advance(0.01, 0.05)
        span = self.tracer.start_span(f"execute_tool {name}", start_time=start, attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.type": "function",
            "gen_ai.tool.call.id": f"call_{self.n}", "gen_ai.agent.name": agent, "gen_ai.conversation.id": conv,
            "gen_ai.tool.call.arguments": json.dumps(args)})
        if self.guard is not None and not self.guard.check(name, args, context=trace.set_span_in_context(span)).allowed:
            span.end(end_time=self._advance(0.001, 0.002))  # stopped: the tool never ran
            return False
        if fail:
            span.set_status(Status(StatusCode.ERROR, fail))
            span.set_attribute("error.type", "ToolFailure")
        else:
            span.set_attribute("gen_ai.tool.call.result", json.dumps(result or {"ok": True, "tool": name}))
        span.end(end_time=self._advance(0.05, 0.8))
        return fail is None

    # --- one run --------------------------------------------------------------------------------
    def run(self) -> Run:
        rng = self.rng
        follow_up = bool(self.conversations) and rng.random() < 0.12
        write_args: dict[str, Any]
        if follow_up:
            conv, intent, write_args = rng.choice(self.conversations)
            if rng.random() < 0.6:
                intent = "status"  # most follow-ups only ask how it is going
        else:
            conv = f"conv-{rng.getrandbits(48):012x}"
            intent = rng.choices(("claim", "refund", "address", "status"), (40, 25, 15, 20))[0]
            order = str(rng.randint(10000, 99999))
            write_args = {  # type: ignore[assignment]
                "claim": {"order_id": order, "reason": rng.choice(("damaged", "missing_item"))},
                "refund": {"order_id": order, "amount": rng.choice((19.99, 45.0, 120.5))},
                "address": {"order_id": order, "address": f"{rng.randint(1, 99)} Harbour Road"},
                "status": {},
            }[intent]
            self.conversations.append((conv, intent, write_args))
            if len(self.conversations) > 200:
                self.conversations.pop(0)
        agent = "returns" if intent == "refund" else "support"
        model = rng.choice(MODELS)
        result = Run(agent=agent, intent=intent)
        trial = self.trials[intent] = self.trials.get(intent, 0) + 1
        root = self.tracer.start_span(f"invoke_agent {agent}", start_time=self.clock, attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent,
            "gen_ai.conversation.id": conv, "gen_ai.request.model": model,
            "agenteval.case.id": f"{intent}-{'follow-up' if follow_up else 'new'}", "agenteval.trial": trial})
        ctx = trace.set_span_in_context(root)
        turn = 0
        crashed = False
        with trace.use_span(root, end_on_exit=False):
            try:
                turn = self._script(agent, model, conv, intent, write_args, result, follow_up)
            except ToolFailure:
                crashed = True
            if not crashed:
                self._chat(agent, model, turn, conv)  # the final answer
        del ctx
        if crashed:
            root.set_status(Status(StatusCode.ERROR, "agent run failed"))
            result.anomalies.append("crash")
        root.set_attribute("gen_ai.input.messages", _user_message(intent, write_args, self.order))
        root.end(end_time=self._advance(0.01, 0.1))
        self.clock += int(rng.uniform(0.5, 3) * 1e9)  # think time between runs
        return result

    def _script(self, agent: str, model: str, conv: str, intent: str, write_args: dict[str, Any],
                r: Run, follow_up: bool) -> int:
        rng = self.rng
        order = self.order = write_args.get("order_id", str(rng.randint(10000, 99999)))
        turn = 0

        def step(name: str, args: dict[str, Any], fail: str | None = None, result: Any = None) -> bool:
            nonlocal turn
            self._chat(agent, model, turn, conv)
            turn += 1
            r.steps += 1
            return self._tool(agent, conv, name, args, fail, result)

        # the order the user asked about, as a real lookup returns it: what grounds a write's order_id
        found = {"order_id": order, "status": "delivered"}
        step("lookup_order", {"order_id": order}, result=found)
        if rng.random() < 0.10:
            step("lookup_order", {"order_id": order}, result=found)
            r.anomalies.append("redundant_lookup")
        if rng.random() < 0.06:  # wanders: a search loop that blows the step budget
            for i in range(rng.randint(8, 16)):
                step("search_orders", {"query": f"{order} page {i}"})
            r.anomalies.append("wander")
        if intent == "status":
            return turn
        topic = {"claim": "damaged_delivery", "refund": "refunds", "address": "address_change"}[intent]
        step("get_policy", {"topic": topic})
        if rng.random() < 0.03:
            self.clock += int(rng.uniform(45, 90) * 1e9)  # a slow backend
            r.anomalies.append("slow")
        write = {"claim": "create_claim", "refund": "issue_refund", "address": "update_address"}[intent]
        if rng.random() < 0.03:
            step(write, write_args, fail="backend unavailable")
            raise ToolFailure(write)
        if write != "create_claim" and rng.random() > 0.07:  # 7% forget to ask first
            asked = {"tool": write, **({"amount": write_args["amount"]} if write == "issue_refund" else write_args)}
            self._chat(agent, model, turn, conv)
            turn += 1
            r.steps += 1
            self._tool(agent, conv, "ask_user_confirmation", asked, result={"confirmed": True})
        elif write != "create_claim":
            r.anomalies.append("no_confirmation")
        if rng.random() < 0.10:  # a failed write, then a retry
            step(write, write_args, fail="timeout from backend")
            r.anomalies.append("write_error")
            if rng.random() < 0.5:
                changed = dict(write_args, note="retry")
                step(write, changed)
                return turn
        step(write, write_args)
        if rng.random() < 0.06 and not follow_up:
            step(write, dict(reversed(list(write_args.items()))))  # same call again, keys reordered
            r.anomalies.append("duplicate_write")
        return turn
