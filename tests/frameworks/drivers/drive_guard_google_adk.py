"""Google ADK 2.x with the guard's ``before_tool_callback`` (``guard_tool_call``) and a scripted
``BaseLlm``: ``python drive_guard_google_adk.py MODE OUT_DIR``. Modes: ``content`` (tool
arguments recorded: ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY``) and
``schema1`` (``ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1``). Writes the guard scenario's outcome
(guard_scenario.py) to ``OUT_DIR/live.json``."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

MODE, OUT = sys.argv[1], Path(sys.argv[2])
if MODE == "content":
    os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "SPAN_ONLY"
if MODE == "schema1":
    os.environ["ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN"] = "1"

import guard_scenario as gs  # noqa: E402
import scenario as sc  # noqa: E402

run = sc.Run(set_global=True, policy=gs.POLICY)  # ADK takes the global tracer provider

from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.runners import InMemoryRunner  # noqa: E402
from google.genai import types  # noqa: E402
from scripted_adk import scripted_llm  # noqa: E402

from otel_agenteval.guard.hooks.google_adk import guard_tool_call  # noqa: E402


async def scenario() -> list[str]:
    agent = LlmAgent(name=gs.AGENT, model=scripted_llm(gs, sc.MODEL), instruction="Support.", tools=gs.TOOLS,
                     before_tool_callback=guard_tool_call(run.processor.guard()))
    runner = InMemoryRunner(agent=agent, app_name="support_app")
    session = await runner.session_service.create_session(app_name="support_app", user_id="u1")
    message = types.Content(role="user", parts=[types.Part(text="my order 88120 arrived damaged")])
    results: list[str] = []
    final = None
    async for event in runner.run_async(user_id="u1", session_id=session.id, new_message=message):
        for part in (event.content.parts or []) if event.content else []:
            if part.function_response is not None:
                response = part.function_response.response or {}
                results.append(gs.stopped_by(str(response.get("reason", response.get("result")))))
            elif part.text:
                final = part.text
    assert final == gs.FINAL_TEXT, final
    return results


results = asyncio.run(scenario())
run.finish(OUT / "spans.json")
(OUT / "live.json").write_text(json.dumps(gs.outcome(run, results), indent=1))
