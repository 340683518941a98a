"""Capture the spans real pydantic-ai emits for the benchmark's support run, as replayable JSON.

Drives pydantic-ai (offline, ``FunctionModel``, its own instrumentation at the default version)
through the mix ``overhead.py`` measures: 1 agent run, 5 model turns, 8 tool calls over
the first 4 turns (2 each), the last turn a text answer. Two variants: ``clean``, and
``tool_retry`` where the 3rd tool call raises ``ModelRetry``. Writes ``pydantic_ai_shape.json``
beside this file: per span, in creation order, the name, kind, parent index, the attributes
present at start, the attributes set later, the span API calls that set them (in order, as
pydantic-ai made them), events and status.

    .venv/bin/python benchmarks/capture_pydantic_ai_shape.py [--out PATH]

Needs ``pydantic-ai-slim`` (installed in the dev venv); the benchmark itself does not.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import traceback
from importlib.metadata import version
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.usage import RequestUsage

OUT = Path(__file__).with_name("pydantic_ai_shape.json")

# Values the benchmark gives each run its own copy of (found and replaced in every string).
ORDER_ID = "88120"
CONVERSATION_ID = "conv-7f3a9c2e41"
MODEL = "gpt-4o"
USER_MESSAGE = f"Hi, my order {ORDER_ID} arrived damaged. Can you open a claim and tell me when the replacement ships?"
INSTRUCTIONS = (
    "You are the customer support agent of an online shop. Be brief and polite. Look the order up "
    "before acting, check the returns policy, and open a claim only when the policy allows it. "
    "Never promise refunds the policy does not cover."
)
FINAL_TEXT = (f"I have opened claim CL-{ORDER_ID} for your damaged order. A replacement ships by UPS within "
              "2 days, and you will get a confirmation email shortly.")

# The 8 tool calls, two per turn; arguments as JSON strings, as OpenAI models send them.
CALLS = (
    ("lookup_order", {"order_id": ORDER_ID}),
    ("get_policy", {"topic": "damaged_delivery"}),
    ("search_kb", {"query": "damaged item refund", "top_k": 3}),
    ("get_customer", {"customer_id": "c-1042"}),
    ("check_inventory", {"sku": "SKU-1182"}),
    ("create_claim", {"order_id": ORDER_ID, "reason": "damaged"}),
    ("get_shipping", {"order_id": ORDER_ID}),
    ("send_email", {"template": "claim_opened"}),
)
FAILING_CALL = 2  # in the tool_retry variant, search_kb raises ModelRetry
RETRY_MESSAGE = "The knowledge base is being reindexed, try again in a minute."
_rng = random.Random(20261201)
CALL_IDS = tuple("call_" + "".join(_rng.choices("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", k=24))
                 for _ in CALLS)


def usage_of(turn: int) -> RequestUsage:
    return RequestUsage(input_tokens=900 + 250 * turn, output_tokens=40 + turn)


def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Turn n (0-3): a line of text and two tool calls; turn 4: the answer."""
    turn = sum(isinstance(m, ModelResponse) for m in messages)
    if turn == 4:
        return ModelResponse(parts=[TextPart(FINAL_TEXT)], usage=usage_of(turn), model_name=MODEL)
    parts: list[Any] = [TextPart(("Let me look that up.", "Checking a few more details.",
                                  "Opening the claim now.", "Sending you a confirmation.")[turn])]
    for i in (2 * turn, 2 * turn + 1):
        name, args = CALLS[i]
        parts.append(ToolCallPart(name, json.dumps(args, separators=(",", ":")), tool_call_id=CALL_IDS[i]))
    return ModelResponse(parts=parts, usage=usage_of(turn), model_name=MODEL)


def support_agent(provider: TracerProvider, failing: bool) -> Agent:
    agent = Agent(FunctionModel(script, model_name=MODEL), name="support_agent", instructions=INSTRUCTIONS)
    agent.instrument = InstrumentationSettings(tracer_provider=provider)

    @agent.tool_plain
    def lookup_order(order_id: str) -> dict[str, Any]:
        """Look up an order by its id: status, items and delivery date."""
        return {"order_id": order_id, "status": "delivered", "items": [{"sku": "SKU-1182", "qty": 1}],
                "delivered_at": "2026-11-28"}

    @agent.tool_plain
    def get_policy(topic: str) -> str:
        """Return the shop's policy text on a topic."""
        return "Damaged items can be refunded or replaced within 30 days of delivery."

    @agent.tool_plain
    def search_kb(query: str, top_k: int = 3) -> list[dict[str, Any]]:
        """Search the support knowledge base."""
        if failing:
            raise ModelRetry(RETRY_MESSAGE)
        return [{"id": "kb-12", "title": "Damaged deliveries", "score": 0.91},
                {"id": "kb-40", "title": "Replacements", "score": 0.77}][:top_k]

    @agent.tool_plain
    def get_customer(customer_id: str) -> dict[str, Any]:
        """Look up a customer's tier and history."""
        return {"customer_id": customer_id, "tier": "gold", "since": "2021-04-02"}

    @agent.tool_plain
    def check_inventory(sku: str) -> dict[str, Any]:
        """Stock level of a product."""
        return {"sku": sku, "in_stock": 14}

    @agent.tool_plain
    def create_claim(order_id: str, reason: str) -> dict[str, Any]:
        """Open a damage or loss claim on an order (writes to the claims system)."""
        return {"claim_id": f"CL-{order_id}", "order_id": order_id, "reason": reason, "status": "open"}

    @agent.tool_plain
    def get_shipping(order_id: str) -> dict[str, Any]:
        """Carrier and expected delivery of an order's replacement."""
        return {"carrier": "ups", "eta_days": 2}

    @agent.tool_plain
    def send_email(template: str) -> str:
        """Send the customer a templated email."""
        return "queued"

    return agent


# --- what the spans saw ---------------------------------------------------------------------------
SPAN_CALLS: dict[int, list[dict[str, Any]]] = {}  # span id -> the later calls made on it, in order


class Capture(SpanProcessor):
    """Per span, in creation order: what it looked like at start, and at end."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.index: dict[int, int] = {}  # span id -> position
        self.ended: dict[int, ReadableSpan] = {}
        self.sequence: list[list[Any]] = []  # ["start" | "end", position], as the SDK saw them

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        sid = span.context.span_id
        parent = span.parent.span_id if span.parent is not None else None
        scope = span.instrumentation_scope
        self.index[sid] = len(self.spans)
        SPAN_CALLS[sid] = []
        self.sequence.append(["start", self.index[sid]])
        self.spans.append({
            "name": span.name, "kind": span.kind.name, "parent": self.index[parent] if parent else None,
            "scope": scope.name if scope else None,
            "attributes_at_start": dict(span.attributes or {}),
        })

    def on_end(self, span: ReadableSpan) -> None:
        self.ended[span.context.span_id] = span
        self.sequence.append(["end", self.index[span.context.span_id]])

    def finish(self) -> list[dict[str, Any]]:
        out = []
        for sid, pos in self.index.items():
            rec, span, calls = self.spans[pos], self.ended[sid], SPAN_CALLS.pop(sid)
            assert span.name == rec["name"], f"renamed: {rec['name']} -> {span.name}"
            start = rec["attributes_at_start"]
            later = {k: v for k, v in (span.attributes or {}).items() if k not in start or start[k] != v}
            assert {k for c in calls for k in c.get("values", ())} == set(later), (rec["name"], calls, later)
            for c in calls:  # keys name their value in attributes_later, unless a later call overwrote it
                if "values" in c:
                    values = c.pop("values")
                    c["keys"] = list(values)
                    if overwritten := {k: v for k, v in values.items() if v != later[k]}:
                        c["overwritten"] = overwritten
            out.append({
                **rec, "attributes_later": later, "calls": calls,
                "events": [{"name": e.name, "attributes": dict(e.attributes or {})} for e in span.events],
                "status": {"code": span.status.status_code.name, "description": span.status.description},
            })
        return out


def watch_span_calls() -> None:
    """Log each later call made on an SDK span (set_attribute(s), record_exception, set_status,
    add_event, update_name) into ``SPAN_CALLS``, to replay them as pydantic-ai makes them."""
    inside = [False]  # record_exception calls add_event: log the outer call only

    def wrap(name: str, describe: Any) -> None:
        original = getattr(Span, name)

        def method(self: Span, *args: Any, **kwargs: Any) -> Any:
            calls = SPAN_CALLS.get(self.context.span_id)
            if calls is not None and not inside[0]:
                calls.append({"call": name, **describe(*args, **kwargs)})
            outer, inside[0] = inside[0], True
            try:
                return original(self, *args, **kwargs)
            finally:
                inside[0] = outer

        setattr(Span, name, method)

    def described(exc: BaseException) -> dict[str, Any]:
        kind = type(exc)
        out = {"type": f"{kind.__module__}.{kind.__qualname__}", "message": str(exc),
               "traceback_frames": len(traceback.extract_tb(exc.__traceback__))}
        if exc.__cause__ is not None:  # the SDK formats the whole chain into exception.stacktrace
            out["cause"] = described(exc.__cause__)
        return out

    def exception(exc: BaseException, attributes: Any = None, timestamp: Any = None,
                  escaped: bool = False) -> dict[str, Any]:
        return {**described(exc), "escaped": escaped, "attributes": dict(attributes or {})}

    def status(st: Any, description: str | None = None) -> dict[str, Any]:
        code = getattr(st, "status_code", st)
        return {"code": code.name, "description": getattr(st, "description", description)}

    wrap("set_attribute", lambda key, value: {"values": {key: value}})
    wrap("set_attributes", lambda attributes: {"values": dict(attributes)})
    wrap("record_exception", exception)
    wrap("set_status", status)
    wrap("add_event", lambda name, attributes=None, timestamp=None: {"name": name, "attributes": dict(attributes or {})})
    wrap("update_name", lambda name: {"name": name})


def capture_run(failing: bool) -> dict[str, Any]:
    cap = Capture()
    provider = TracerProvider()
    provider.add_span_processor(cap)
    result = support_agent(provider, failing).run_sync(USER_MESSAGE, conversation_id=CONVERSATION_ID)
    assert result.output == FINAL_TEXT
    provider.shutdown()
    spans = cap.finish()
    kinds = [s["attributes_at_start"].get("gen_ai.operation.name") for s in spans]
    assert (kinds.count("invoke_agent"), kinds.count("chat"), kinds.count("execute_tool")) == (1, 5, 8), kinds
    return {"spans": spans, "sequence": cap.sequence}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=OUT, help=f"where to write (default {OUT.name} beside this script)")
    args = p.parse_args(argv)
    watch_span_calls()
    runs = {variant: capture_run(failing) for variant, failing in (("clean", False), ("tool_retry", True))}
    run_ids = {v: run["spans"][0]["attributes_at_start"]["gen_ai.agent.call.id"] for v, run in runs.items()}
    doc = {
        "source": {
            "script": "benchmarks/capture_pydantic_ai_shape.py",
            "pydantic_ai_slim": version("pydantic-ai-slim"), "opentelemetry_sdk": version("opentelemetry-sdk"),
            "python": sys.version.split()[0],
            "instrumentation": "InstrumentationSettings(tracer_provider=...), defaults: version "
                               f"{InstrumentationSettings().version}, include_content=True",
            "model": f"FunctionModel(model_name={MODEL!r}) (it reports its own name as the response model)",
            "scenario": "1 agent run, 5 model turns, 8 tool calls (2 per turn over 4 turns), final text; "
                        f"tool_retry: tool call {FAILING_CALL} ({CALLS[FAILING_CALL][0]}) raises ModelRetry",
            "calls": "per span, the span API calls made after start, in order; set_attribute(s) name the keys "
                     "whose values are in attributes_later, or in the call's 'overwritten' when a later call "
                     "set the key again",
        },
        # literal values of the capture that the benchmark replaces, in every string, by per-run ones
        "per_run": {"order_id": ORDER_ID, "conversation_id": CONVERSATION_ID, "run_ids": run_ids,
                    "call_ids": list(CALL_IDS)},
        "runs": runs,
    }
    args.out.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    for variant, run in runs.items():
        spans = run["spans"]
        n_start = sum(len(s["attributes_at_start"]) for s in spans)
        n_later = sum(len(s["attributes_later"]) for s in spans)
        chars = sum(len(v) for s in spans for d in (s["attributes_at_start"], s["attributes_later"])
                    for v in d.values() if isinstance(v, str))
        print(f"{variant}: {len(spans)} spans, {n_start} attributes at start, {n_later} later, "
              f"{chars:,} characters in string values")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
