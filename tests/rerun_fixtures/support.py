"""A pydantic-ai refund agent with a scripted model (FunctionModel): record it live, rerun variants."""

from __future__ import annotations

import re
import time
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import FunctionModel

POLICY = {
    "version": 1,
    "tools": {"issue_refund": {"write": True, "requires_confirmation": True}},
    "confirmation": {"tools": ["ask_user_confirmation"]},
}
CALLS: list[str] = []  # tools that really ran (live only; a rerun must never add to it)


def _script(variant: str) -> Any:
    def model(messages: list[Any], _info: Any) -> ModelResponse:
        text = next(p.content for m in messages for p in getattr(m, "parts", ()) if isinstance(p, UserPromptPart))
        amount, order = re.findall(r"\d+(?:\.\d+)?", str(text))[:2]
        done = sum(isinstance(p, ToolReturnPart) for m in messages for p in getattr(m, "parts", ()))
        plan = [("lookup_order", {"order_id": order}), ("ask_user_confirmation", {"amount": float(amount)}),
                ("issue_refund", {"order_id": order, "amount": float(amount)})]
        if variant == "skip_check":
            del plan[1]
        elif variant == "write_twice":
            plan.append(plan[-1])
        elif variant == "wrong_amount":
            plan[2] = ("issue_refund", {"order_id": order, "amount": float(amount) + 1})
        elif variant == "answer_early":
            del plan[1:]
        if variant.startswith("parallel") and done == 0:  # two calls in one response: run concurrently
            both = [ToolCallPart(tool, args) for tool, args in plan[:2]]
            return ModelResponse(parts=both[::-1] if variant == "parallel_reversed" else both, model_name="scripted")
        if done < len(plan):
            tool, args = plan[done]
            return ModelResponse(parts=[ToolCallPart(tool, args)], model_name="scripted")
        return ModelResponse(parts=[TextPart("refunded")], model_name="scripted")

    return model


def build(variant: str = "baseline", instrument: Any = None) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(FunctionModel(_script(variant)))
    if instrument is not None:
        agent.instrument = instrument

    @agent.tool_plain
    def lookup_order(order_id: str) -> dict[str, Any]:
        CALLS.append("lookup_order")
        time.sleep(0.005)  # long enough for a call made beside it to start meanwhile
        return {"order_id": order_id, "status": "delivered"}

    @agent.tool_plain
    def ask_user_confirmation(amount: float) -> dict[str, Any]:
        CALLS.append("ask_user_confirmation")
        return {"confirmed": True}

    @agent.tool_plain
    def issue_refund(order_id: str, amount: float) -> dict[str, Any]:
        CALLS.append("issue_refund")
        return {"refund_id": f"r-{order_id}"}

    return agent


def _wrapped(variant: str) -> Any:
    from otel_agenteval.rerun.frameworks import for_pydantic_ai

    return for_pydantic_ai(build(variant))


baseline = _wrapped("baseline")
skip_check = _wrapped("skip_check")
write_twice = _wrapped("write_twice")
wrong_amount = _wrapped("wrong_amount")
answer_early = _wrapped("answer_early")
parallel_reversed = _wrapped("parallel_reversed")


def raises(turn: Any, tools: Any) -> None:
    raise KeyError("the candidate's own bug")


def hangs(turn: Any, tools: Any) -> None:
    time.sleep(30)


def loops(turn: Any, tools: Any) -> None:
    while True:
        tools.call("lookup_order", {"order_id": "again"})


def slow_loop(turn: Any, tools: Any) -> None:
    while True:  # past the timeout, only the gate's refusal ends it
        time.sleep(0.02)
        tools.call("lookup_order", {"order_id": "again"})
