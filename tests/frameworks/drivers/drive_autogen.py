"""AutoGen AgentChat 0.7 (its own GenAI spans), alone or with openinference-instrumentation-autogen-agentchat
on top, offline: ``python drive_autogen.py MODE OUT_DIR`` (``default`` | ``openinference``).

The model is autogen_ext's ``ReplayChatCompletionClient`` (AutoGen's own scripted client). AutoGen's
tracing uses the global tracer provider (``trace.get_tracer``), so the run's provider is made global.
With OpenInference each tool call is two nested tool spans (OpenInference's around AutoGen's): one step.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

MODE, OUT = sys.argv[1], Path(sys.argv[2])

import scenario as sc  # noqa: E402

run = sc.Run(set_global=True)
if MODE == "openinference":
    from openinference.instrumentation.autogen_agentchat import AutogenAgentChatInstrumentor

    AutogenAgentChatInstrumentor().instrument(tracer_provider=run.provider)

from autogen_agentchat.agents import AssistantAgent  # noqa: E402
from autogen_core import FunctionCall  # noqa: E402
from autogen_core.models import CreateResult, ModelFamily, ModelInfo, RequestUsage  # noqa: E402
from autogen_ext.models.replay import ReplayChatCompletionClient  # noqa: E402


def results() -> list[CreateResult]:
    out = []
    for n in range(sc.N_LLM):
        inp, o = sc.usage_of(n)
        usage = RequestUsage(prompt_tokens=inp, completion_tokens=o)
        if n < len(sc.TURNS):
            name, args = sc.TURNS[n]
            out.append(CreateResult(finish_reason="function_calls", usage=usage, cached=False,
                                    content=[FunctionCall(id=f"call_{n}", name=name, arguments=json.dumps(args))]))
        else:
            out.append(CreateResult(finish_reason="stop", content=sc.FINAL_TEXT, usage=usage, cached=False))
    return out


async def lookup_order(order_id: str) -> dict[str, Any]:
    """Look up an order by its id."""
    return sc.lookup_order(order_id)


async def get_policy(topic: str) -> str:
    """Get the support policy text for a topic."""
    return sc.get_policy(topic)


async def create_claim(order_id: str, reason: str) -> dict[str, Any]:
    """Create a damage claim for an order."""
    return sc.create_claim(order_id, reason)


client = ReplayChatCompletionClient(results(), model_info=ModelInfo(
    vision=False, function_calling=True, json_output=False, family=ModelFamily.UNKNOWN, structured_output=False))
agent = AssistantAgent(sc.AGENT, model_client=client, tools=[lookup_order, get_policy, create_claim],
                       system_message=sc.SYSTEM_PROMPT, description="Order claims support agent.",
                       max_tool_iterations=10, reflect_on_tool_use=False)
sc.drive(run, lambda: asyncio.run(agent.run(task=sc.USER_MESSAGE)), OUT)
