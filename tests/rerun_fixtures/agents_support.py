"""The refund agent on the OpenAI Agents SDK, its model scripted (offline)."""

from __future__ import annotations

import json
import re
import time
from typing import Any

from agents import Agent, function_tool
from agents.models.openai_responses import OpenAIResponsesModel
from openai import AsyncOpenAI
from openai.types.responses import (
    Response,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseUsage,
)
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

from .support import CALLS


class Scripted(OpenAIResponsesModel):
    """lookup_order, ask_user_confirmation, issue_refund, then the answer (``skip_check``: no ask).
    The real Responses model (so its spans capture the input as live), the HTTP call replaced."""

    def __init__(self, variant: str = "baseline") -> None:
        super().__init__(model="fake-gpt", openai_client=AsyncOpenAI(api_key="sk-offline", base_url="http://127.0.0.1:9/v1"))
        self.variant = variant

    async def _fetch_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> Response:  # type: ignore[override]
        items = input if isinstance(input, list) else [{"role": "user", "content": input}]
        text = next(str(i["content"]) for i in items if isinstance(i, dict) and i.get("role") == "user")
        amount, order = re.findall(r"\d+(?:\.\d+)?", text)[:2]
        done = sum(1 for i in items if isinstance(i, dict) and i.get("type") == "function_call_output")
        plan = [("lookup_order", {"order_id": order}), ("ask_user_confirmation", {"amount": float(amount)}),
                ("issue_refund", {"order_id": order, "amount": float(amount)})]
        if self.variant == "skip_check":
            del plan[1]
        output: list[Any]
        if done < len(plan):
            name, args = plan[done]
            output = [ResponseFunctionToolCall(id=f"fc{done}", type="function_call", call_id=f"c{done}", name=name,
                                               arguments=json.dumps(args), status="completed")]
        else:
            output = [ResponseOutputMessage(id="m", type="message", role="assistant", status="completed",
                                            content=[ResponseOutputText(type="output_text", text="refunded",
                                                                        annotations=[])])]
        return Response(id=f"resp_{done}", created_at=time.time(), model="fake-gpt", object="response", output=output,
                        parallel_tool_calls=True, tool_choice="auto", tools=[], status="completed",
                        usage=ResponseUsage(input_tokens=100, output_tokens=10, total_tokens=110,
                                            input_tokens_details=InputTokensDetails(cached_tokens=0,
                                                                                    cache_write_tokens=0),
                                            output_tokens_details=OutputTokensDetails(reasoning_tokens=0)))


@function_tool
def lookup_order(order_id: str) -> dict[str, Any]:
    CALLS.append("lookup_order")
    return {"order_id": order_id, "status": "delivered"}


@function_tool
def ask_user_confirmation(amount: float) -> dict[str, Any]:
    CALLS.append("ask_user_confirmation")
    return {"confirmed": True}


@function_tool
def issue_refund(order_id: str, amount: float) -> dict[str, Any]:
    CALLS.append("issue_refund")
    return {"refund_id": f"r-{order_id}"}


def build(variant: str = "baseline") -> Agent[Any]:
    return Agent(name="agent", model=Scripted(variant), tools=[lookup_order, ask_user_confirmation, issue_refund])


def _wrapped(variant: str) -> Any:
    from otel_agenteval.rerun.frameworks import for_openai_agents

    return for_openai_agents(build(variant))


baseline = _wrapped("baseline")
skip_check = _wrapped("skip_check")
