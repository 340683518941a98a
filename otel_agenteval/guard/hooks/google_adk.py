"""Google ADK: every tool call asked of the guard first, as a ``before_tool_callback``.

>>> agent = LlmAgent(name="support", model=model, tools=tools,
...                  before_tool_callback=guard_tool_call(processor.guard()))

ADK runs the callback inside the tool's ``execute_tool`` span, so the decision is recorded on
that span. A stopped call does not run: the callback's dict becomes the tool's result
(``{"status": "blocked", "rule": ..., "reason": ...}``, :attr:`Decision.reason`), so the model
can ask the user; ``on_block="raise"`` raises :class:`ActionBlocked` instead. The guard reads the
call's arguments from the callback, but earlier writes from the spans: with ADK's default
settings tool arguments are not recorded, so set
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY`` for duplicates to be seen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from google.adk.tools.base_tool import BaseTool

from ..decision import ActionBlocked
from ..guard import Guard

OnBlock = Literal["result", "raise"]
ToolCallback = Callable[[BaseTool, dict[str, Any], Any], "dict[str, Any] | None"]


def guard_tool_call(guard: Guard, on_block: OnBlock = "result") -> ToolCallback:
    """A ``before_tool_callback``: ``None`` (the tool runs) when ``guard`` allows the call, else
    the result that says why it did not."""

    def before_tool(tool: BaseTool, args: dict[str, Any], tool_context: Any) -> dict[str, Any] | None:
        decision = guard.check(tool.name, args)
        if decision.allowed:
            return None
        if on_block == "raise":
            raise ActionBlocked(decision)
        return {"status": "blocked", "rule": decision.rule, "needs_confirmation": decision.needs_confirmation,
                "reason": decision.reason}

    return before_tool


__all__ = ["guard_tool_call"]
