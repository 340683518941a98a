"""Microsoft Agent Framework (agent-framework-core; its own GenAI spans) with a scripted chat
client: ``python drive_agent_framework.py MODE OUT_DIR``.

Modes: ``default`` (zero configuration: no tool arguments on the spans) and ``sensitive``
(``ENABLE_SENSITIVE_DATA=true``). The client composes the framework's public layers as its
provider clients do: chat middleware, function invocation and telemetry over ``BaseChatClient``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

MODE, OUT = sys.argv[1], Path(sys.argv[2])
if MODE == "sensitive":
    os.environ["ENABLE_SENSITIVE_DATA"] = "true"

import scenario as sc  # noqa: E402

run = sc.Run(set_global=True)  # the framework's tracer comes from the global provider

from agent_framework import (  # noqa: E402
    Agent,
    BaseChatClient,
    ChatMiddlewareLayer,
    ChatResponse,
    Content,
    FunctionInvocationLayer,
    Message,
)
from agent_framework.observability import ChatTelemetryLayer  # noqa: E402


class ScriptedChatClient(ChatMiddlewareLayer, FunctionInvocationLayer, ChatTelemetryLayer, BaseChatClient):
    OTEL_PROVIDER_NAME = "fake"

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.turn = 0

    def _inner_get_response(self, *, messages: Any, stream: bool, options: Any, **kwargs: Any) -> Any:
        async def respond() -> ChatResponse:
            n = self.turn
            self.turn += 1
            if n < len(sc.TURNS):
                name, args = sc.TURNS[n]
                contents = [Content.from_function_call(f"call_{n}", name, arguments=json.dumps(args))]
                finish = "tool_calls"
            else:
                contents = [Content.from_text(sc.FINAL_TEXT)]
                finish = "stop"
            inp, out = sc.usage_of(n)
            return ChatResponse(messages=[Message(role="assistant", contents=contents)], model=sc.MODEL,
                                response_id=f"resp-{n}", finish_reason=finish,
                                usage_details={"input_token_count": inp, "output_token_count": out,
                                               "total_token_count": inp + out})
        return respond()


async def scenario() -> None:
    agent = Agent(client=ScriptedChatClient(), name=sc.AGENT, instructions=sc.SYSTEM_PROMPT, tools=sc.TOOLS)
    result = await agent.run(sc.USER_MESSAGE)
    assert result.text == sc.FINAL_TEXT, result.text


sc.drive(run, lambda: asyncio.run(scenario()), OUT)
