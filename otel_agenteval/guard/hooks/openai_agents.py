"""OpenAI Agents SDK: the guard as a tool input guardrail, and as ``needs_approval``.

>>> refund = function_tool(issue_refund, tool_input_guardrails=[guard_input(guard)],
...                        needs_approval=needs_confirmation(guard, "issue_refund"))

``guard_input``: each call decided before the tool runs (inside the SDK's function span, which
OpenInference's instrumentor makes the current OTel span); a stopped call's result is
:attr:`Decision.reason` (``reject_content``), or the run halts with ``on_block="raise"``
(``ToolInputGuardrailTripwireTriggered``, the decision in ``output_info``).
``needs_confirmation``: the SDK asks for approval exactly when a confirmation is all the guard
misses. The user's yes must reach the guard as a confirmation too (``record_confirmation``, or a
confirmation tool) in the same run or conversation, or the guardrail still stops the call.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from agents import ToolGuardrailFunctionOutput, ToolInputGuardrail, ToolInputGuardrailData, tool_input_guardrail

from ..guard import Guard


def _arguments(raw: str | None) -> Any:
    try:
        return json.loads(raw) if raw else {}
    except ValueError:
        return raw  # the rules read a bare value as {"input": ...}


def guard_input(guard: Guard, on_block: Literal["result", "raise"] = "result") -> ToolInputGuardrail[Any]:
    """A ``tool_input_guardrail`` that asks ``guard`` about each call of the tools it is given to."""

    @tool_input_guardrail(name="agenteval_guard")
    def agenteval_guard(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        ctx = data.context
        decision = guard.check(ctx.tool_name, _arguments(ctx.tool_arguments))
        if decision.allowed:
            return ToolGuardrailFunctionOutput.allow(output_info=decision)
        if on_block == "raise":
            return ToolGuardrailFunctionOutput.raise_exception(output_info=decision)
        return ToolGuardrailFunctionOutput.reject_content(decision.reason, output_info=decision)

    return agenteval_guard


def needs_confirmation(guard: Guard, tool: str) -> Any:
    """A ``needs_approval`` callable for ``tool``: approval is asked for when the guard would stop
    the call for want of a confirmation, and only then (nothing is promised or counted by asking)."""

    async def needs(run_context: Any, params: dict[str, Any], call_id: str) -> bool:
        return guard.peek(tool, params).needs_confirmation

    return needs


__all__ = ["guard_input", "needs_confirmation"]
