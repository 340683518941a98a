"""strands-agents with the guard's hook (``GuardHooks``) and a scripted ``Model``:
``python drive_guard_strands.py MODE OUT_DIR`` (modes as drive_strands.py's). Writes the
guard scenario's outcome (guard_scenario.py) to ``OUT_DIR/live.json``."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

MODE, OUT = sys.argv[1], Path(sys.argv[2])
if MODE == "latest":
    os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"

import guard_scenario as gs  # noqa: E402
import scenario as sc  # noqa: E402

run = sc.Run(set_global=True, policy=gs.POLICY)  # Strands takes the global tracer provider

from scripted_strands import ScriptedModel  # noqa: E402
from strands import Agent, tool  # noqa: E402

from otel_agenteval.guard.hooks.strands import GuardHooks  # noqa: E402

agent = Agent(model=ScriptedModel(gs, sc.MODEL), name=gs.AGENT, system_prompt="Support.", tools=[tool(f) for f in gs.TOOLS],
              hooks=[GuardHooks(run.processor.guard())], callback_handler=None)
assert str(agent("my order 88120 arrived damaged")).strip() == gs.FINAL_TEXT
results = [gs.stopped_by(block["toolResult"]["content"][0]["text"]) for message in agent.messages
           for block in message["content"] if "toolResult" in block]
run.finish(OUT / "spans.json")
(OUT / "live.json").write_text(json.dumps(gs.outcome(run, results), indent=1))
