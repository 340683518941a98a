"""strands-agents (its own GenAI spans) with a scripted ``Model``: ``python drive_strands.py MODE OUT_DIR``.

Modes: ``default`` (content in span events, older GenAI names) and ``latest``
(``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental``: arguments on the tool span).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

MODE, OUT = sys.argv[1], Path(sys.argv[2])
if MODE == "latest":
    os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"

import scenario as sc  # noqa: E402

run = sc.Run(set_global=True)  # Strands takes the global tracer provider

from scripted_strands import ScriptedModel  # noqa: E402
from strands import Agent, tool  # noqa: E402


def scenario() -> None:
    agent = Agent(model=ScriptedModel(sc, sc.MODEL), name=sc.AGENT, system_prompt=sc.SYSTEM_PROMPT,
                  tools=[tool(f) for f in sc.TOOLS], callback_handler=None)
    assert str(agent(sc.USER_MESSAGE)).strip() == sc.FINAL_TEXT


sc.drive(run, scenario, OUT)
