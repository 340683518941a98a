"""An existing agent rerun as it is: its tools answered by the gate, without editing them.

``for_pydantic_ai(agent)`` wraps each of the agent's toolsets so that every tool call goes to the
gate (pydantic-ai's ``WrapperToolset.call_tool``); ``for_openai_agents(agent)`` clones the agent
with each function tool's ``on_invoke_tool`` answered by the gate. Both keep the conversation's
message history across its turns (in ``turn.memory``) and report each model response's tokens as
a model call, so the candidate's cost is priced by the policy. The framework is imported only
when one of these is called.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from .gate import RecordedToolError, ToolGate
from .harness import UserTurn


def for_pydantic_ai(agent: Any, **run_kwargs: Any) -> Any:
    """A rerun callable for a ``pydantic_ai.Agent``; ``run_kwargs`` go to each ``run_sync``."""
    from pydantic_ai.messages import ModelResponse
    from pydantic_ai.toolsets import WrapperToolset

    @dataclasses.dataclass
    class _Gated(WrapperToolset[Any]):
        gate: ToolGate | None = None

        async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: Any, tool: Any) -> Any:
            assert self.gate is not None
            return self.gate.call(name, tool_args)

    def run(turn: UserTurn, tools: ToolGate) -> Any:
        history = turn.memory.get("pydantic_ai")
        with agent.override(toolsets=[_Gated(t, gate=tools) for t in agent.toolsets], tools=[]):
            result = agent.run_sync(turn.text or "", message_history=history, **run_kwargs)
        messages = result.all_messages()
        for m in messages[len(history or ()):]:
            if isinstance(m, ModelResponse):
                tools.model_call(m.model_name, m.usage.input_tokens, m.usage.output_tokens)
        turn.memory["pydantic_ai"] = messages
        return result.output

    return run


_AGENTS_ERROR = "An error occurred while running the tool. Please try again. Error: {}"  # the SDK's default


def for_openai_agents(agent: Any, **run_kwargs: Any) -> Any:
    """A rerun callable for an OpenAI Agents SDK ``Agent``; ``run_kwargs`` go to ``Runner.run_sync``
    (default ``run_config``: the SDK's own tracing off, the rerun makes the spans).

    A recorded tool failure reaches the model as the SDK's default failure text, as it did live
    with the default ``failure_error_function``."""
    from agents import FunctionTool, RunConfig, Runner

    run_kwargs.setdefault("run_config", RunConfig(tracing_disabled=True))  # the rerun makes its own spans

    def gated(tools: ToolGate, name: str) -> Any:
        async def invoke(_ctx: Any, arguments: str) -> Any:
            try:
                return tools.call(name, json.loads(arguments or "{}"))
            except RecordedToolError as exc:
                return _AGENTS_ERROR.format(exc.error)

        return invoke

    def run(turn: UserTurn, tools: ToolGate) -> Any:
        clone = agent.clone(tools=[dataclasses.replace(t, on_invoke_tool=gated(tools, t.name))
                                   if isinstance(t, FunctionTool) else t for t in agent.tools])
        history = turn.memory.get("openai_agents", [])
        result = Runner.run_sync(clone, [*history, {"role": "user", "content": turn.text or ""}], **run_kwargs)
        model = agent.model if isinstance(agent.model, str) else getattr(agent.model, "model", None)
        for response in result.raw_responses:
            tools.model_call(model, response.usage.input_tokens, response.usage.output_tokens)
        turn.memory["openai_agents"] = result.to_input_list()
        return result.final_output

    return run


__all__ = ["for_openai_agents", "for_pydantic_ai"]
