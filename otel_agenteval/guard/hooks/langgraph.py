"""LangGraph: the guard around each call a ``ToolNode`` makes.

>>> node = guarded_tool_node(tools, processor.guard(), handle_tool_errors=True)
>>> graph = create_react_agent(model, node)

A stopped call becomes a ``ToolMessage`` with :attr:`Decision.reason` (status ``error``), so the
model can ask the user; ``on_block="raise"`` raises :class:`ActionBlocked` instead. The wrapper
runs before LangChain opens the tool's span, so a stopped call gets an ``agenteval.guard`` span
of its own under the node's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

from langchain_core.messages import ToolMessage
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest
from opentelemetry import trace
from opentelemetry.context import Context

from ..decision import ActionBlocked, Decision
from ..guard import Guard

OnBlock = Literal["result", "raise"]


class GuardToolCalls:
    """``wrap_tool_call`` / ``awrap_tool_call`` for a ``ToolNode``: the guard decides first."""

    def __init__(self, guard: Guard, on_block: OnBlock = "result") -> None:
        self.guard = guard
        self.on_block = on_block

    def _decide(self, request: ToolCallRequest) -> tuple[Decision, ToolMessage | None]:
        call = request.tool_call
        decision = self.guard.check(call["name"], call.get("args") or {}, context=_context())
        if decision.allowed:
            return decision, None
        if self.on_block == "raise":
            raise ActionBlocked(decision)
        return decision, ToolMessage(content=decision.reason, tool_call_id=call.get("id") or "", name=call["name"],
                                     status="error")

    def __call__(self, request: ToolCallRequest, execute: Callable[[ToolCallRequest], Any]) -> Any:
        stopped = self._decide(request)[1]
        return stopped if stopped is not None else execute(request)

    async def run_async(self, request: ToolCallRequest, execute: Callable[[ToolCallRequest], Awaitable[Any]]) -> Any:
        stopped = self._decide(request)[1]
        return stopped if stopped is not None else await execute(request)


def _context() -> Context | None:
    """The OTel context of the node's run: LangChain's instrumentation (OpenInference) keeps its
    spans by LangChain run, not in the OTel context, so the current one is asked of it."""
    if trace.get_current_span().get_span_context().is_valid:
        return None
    try:
        from openinference.instrumentation.langchain import get_current_span
    except ImportError:
        return None
    span = get_current_span()
    return trace.set_span_in_context(span) if span is not None else None


def guarded_tool_node(tools: Sequence[Any], guard: Guard, *, on_block: OnBlock = "result", **kwargs: Any) -> ToolNode:
    """A ``ToolNode`` over ``tools`` whose every call is asked of ``guard`` first (``kwargs``: ToolNode's)."""
    wrapper = GuardToolCalls(guard, on_block)
    return ToolNode(tools, wrap_tool_call=wrapper, awrap_tool_call=wrapper.run_async, **kwargs)


__all__ = ["GuardToolCalls", "guarded_tool_node"]
