"""Google ADK 2.x, driven offline by a scripted ``BaseLlm``: ``python drive_google_adk.py MODE OUT_DIR``.

Modes: ``default`` (zero configuration: ADK records no tool arguments), ``content``
(``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY``), ``schema1``
(``ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1``: arguments in ``gcp.vertex.agent.*``), ``openinference``
(``GoogleADKInstrumentor`` on the processor's provider). A tool that raises would abort the run,
so the agent turns errors into results with ``on_tool_error_callback``, ADK's own way.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

MODE, OUT = sys.argv[1], Path(sys.argv[2])
if MODE == "content":
    os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "SPAN_ONLY"
if MODE == "schema1":
    os.environ["ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN"] = "1"

import scenario as sc  # noqa: E402

run = sc.Run(set_global=MODE != "openinference")
if MODE == "openinference":
    from openinference.instrumentation.google_adk import GoogleADKInstrumentor

    GoogleADKInstrumentor().instrument(tracer_provider=run.provider)

from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.models.base_llm import BaseLlm  # noqa: E402
from google.adk.models.llm_response import LlmResponse  # noqa: E402
from google.adk.runners import InMemoryRunner  # noqa: E402
from google.genai import types  # noqa: E402


class ScriptedLlm(BaseLlm):
    """Turn n: the scenario's n-th tool call, then the final text; usage as the scenario says."""

    turn: int = 0

    @classmethod
    def supported_models(cls) -> list[str]:
        return [r"fake-.*"]

    async def generate_content_async(self, llm_request: Any, stream: bool = False) -> Any:
        n = self.turn
        self.turn += 1
        if n < len(sc.TURNS):
            name, args = sc.TURNS[n]
            parts = [types.Part(function_call=types.FunctionCall(id=f"call_{n}", name=name, args=args))]
        else:
            parts = [types.Part(text=sc.FINAL_TEXT)]
        inp, out = sc.usage_of(n)
        yield LlmResponse(content=types.Content(role="model", parts=parts), model_version=sc.MODEL,
                          usage_metadata=types.GenerateContentResponseUsageMetadata(
                              prompt_token_count=inp, candidates_token_count=out, total_token_count=inp + out))


def on_tool_error(tool: Any, args: Any, tool_context: Any, error: Exception) -> dict[str, str]:
    return {"error": f"{type(error).__name__}: {error}"}


async def scenario() -> None:
    agent = LlmAgent(name=sc.AGENT, model=ScriptedLlm(model=sc.MODEL), instruction=sc.SYSTEM_PROMPT, tools=sc.TOOLS,
                     on_tool_error_callback=on_tool_error)
    runner = InMemoryRunner(agent=agent, app_name="support_app")
    session = await runner.session_service.create_session(app_name="support_app", user_id="u1")
    message = types.Content(role="user", parts=[types.Part(text=sc.USER_MESSAGE)])
    final = None
    async for event in runner.run_async(user_id="u1", session_id=session.id, new_message=message):
        if event.content and event.content.parts and event.content.parts[0].text:
            final = event.content.parts[0].text
    assert final == sc.FINAL_TEXT, final


sc.drive(run, lambda: asyncio.run(scenario()), OUT)
