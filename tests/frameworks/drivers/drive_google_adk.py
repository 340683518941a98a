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
from google.adk.runners import InMemoryRunner  # noqa: E402
from google.genai import types  # noqa: E402
from scripted_adk import scripted_llm  # noqa: E402


def on_tool_error(tool: Any, args: Any, tool_context: Any, error: Exception) -> dict[str, str]:
    return {"error": f"{type(error).__name__}: {error}"}


async def scenario() -> None:
    agent = LlmAgent(name=sc.AGENT, model=scripted_llm(sc, sc.MODEL), instruction=sc.SYSTEM_PROMPT, tools=sc.TOOLS,
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
