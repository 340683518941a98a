"""pydantic-ai: every tool call of an agent asked of the guard first, as a toolset wrapper.

>>> agent = Agent(model, capabilities=[GuardTools(processor.guard())])

The wrapper runs inside pydantic-ai's ``execute_tool`` span, so the decision is recorded on it.
A stopped call returns :attr:`Decision.reason` as the tool's result (the model can ask the
user), or raises :class:`ActionBlocked` with ``on_block="raise"``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.toolsets import AbstractToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from ..decision import ActionBlocked
from ..guard import Guard

OnBlock = Literal["result", "raise"]


@dataclass
class GuardedToolset(WrapperToolset[Any]):
    """``wrapped``'s tools, each call decided by ``guard`` before it runs."""

    guard: Guard | None = None
    on_block: OnBlock = "result"

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]) -> Any:
        assert self.guard is not None, "GuardedToolset needs guard="
        decision = self.guard.check(name, tool_args)
        if not decision.allowed:
            if self.on_block == "raise":
                raise ActionBlocked(decision)
            return decision.reason
        return await self.wrapped.call_tool(name, tool_args, ctx, tool)


@dataclass
class GuardTools(AbstractCapability[Any]):
    """A capability that wraps the agent's toolset in a :class:`GuardedToolset`."""

    guard: Guard
    on_block: OnBlock = "result"

    def get_wrapper_toolset(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any] | None:
        return GuardedToolset(toolset, guard=self.guard, on_block=self.on_block)


__all__ = ["GuardTools", "GuardedToolset"]
