"""Strands Agents: every tool call asked of the guard first, as a hook provider.

>>> agent = Agent(model=model, tools=tools, hooks=[GuardHooks(processor.guard())])

On ``BeforeToolCallEvent`` (inside the event loop cycle's span, before Strands opens the tool's
own span) the guard decides; a stopped call is cancelled with :attr:`Decision.reason` as its
message, which Strands hands the model as the tool's error result, so it can ask the user.
``on_block="raise"`` raises :class:`ActionBlocked` instead, which ends the run (Strands wraps
it: the agent call raises its ``EventLoopException``, the ``ActionBlocked`` as its
``__cause__``). A stopped call gets an ``agenteval.guard`` span of its own under the cycle's.
"""

from __future__ import annotations

from typing import Any, Literal

from strands.hooks import BeforeToolCallEvent, HookRegistry

from ..decision import ActionBlocked
from ..guard import Guard

OnBlock = Literal["result", "raise"]


class GuardHooks:
    """A hook provider (Strands' ``HookProvider`` protocol): ``guard`` decides each tool call before
    Strands runs it."""

    def __init__(self, guard: Guard, on_block: OnBlock = "result") -> None:
        self.guard = guard
        self.on_block = on_block

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        registry.add_callback(BeforeToolCallEvent, self.before_tool_call)

    def before_tool_call(self, event: BeforeToolCallEvent) -> None:
        use = event.tool_use
        decision = self.guard.check(use["name"], use.get("input") or {})
        if decision.allowed:
            return
        if self.on_block == "raise":
            raise ActionBlocked(decision)
        event.cancel_tool = decision.reason


__all__ = ["GuardHooks"]
