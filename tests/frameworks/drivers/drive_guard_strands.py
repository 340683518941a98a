"""strands-agents with the guard's hook (``GuardHooks``) and a scripted ``Model``:
``python drive_guard_strands.py MODE OUT_DIR`` (modes as drive_strands.py's). Writes the
guard scenario's outcome (guard_scenario.py) to ``OUT_DIR/live.json``."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

MODE, OUT = sys.argv[1], Path(sys.argv[2])
if MODE == "latest":
    os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"

import guard_scenario as gs  # noqa: E402
import scenario as sc  # noqa: E402

run = sc.Run(set_global=True, policy=gs.POLICY)  # Strands takes the global tracer provider

from strands import Agent, tool  # noqa: E402
from strands.models.model import Model  # noqa: E402

from otel_agenteval.guard.hooks.strands import GuardHooks  # noqa: E402


class ScriptedModel(Model):
    """Turn n: the guard scenario's n-th tool call, then the final text."""

    def __init__(self) -> None:
        self.turn = 0
        self.config: dict[str, Any] = {"model_id": sc.MODEL}

    def update_config(self, **config: Any) -> None:
        self.config.update(config)

    def get_config(self) -> dict[str, Any]:
        return self.config

    async def structured_output(self, output_model: Any, prompt: Any, system_prompt: Any = None, **kw: Any) -> Any:
        raise NotImplementedError
        yield  # an async generator, as the interface says

    async def stream(self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, **kw: Any) -> Any:
        n = self.turn
        self.turn += 1
        yield {"messageStart": {"role": "assistant"}}
        if n < len(gs.TURNS):
            name, args = gs.TURNS[n]
            yield {"contentBlockStart": {"start": {"toolUse": {"name": name, "toolUseId": f"call_{n}"}}}}
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(args)}}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "tool_use"}}
        else:
            yield {"contentBlockDelta": {"delta": {"text": gs.FINAL_TEXT}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}
        yield {"metadata": {"usage": {"inputTokens": 100, "outputTokens": 5, "totalTokens": 105},
                            "metrics": {"latencyMs": 5}}}


agent = Agent(model=ScriptedModel(), name=gs.AGENT, system_prompt="Support.", tools=[tool(f) for f in gs.TOOLS],
              hooks=[GuardHooks(run.processor.guard())], callback_handler=None)
assert str(agent("my order 88120 arrived damaged")).strip() == gs.FINAL_TEXT
results = [gs.stopped_by(block["toolResult"]["content"][0]["text"]) for message in agent.messages
           for block in message["content"] if "toolResult" in block]
run.finish(OUT / "spans.json")
(OUT / "live.json").write_text(json.dumps(gs.outcome(run, results), indent=1))
