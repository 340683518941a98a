"""strands-agents (its own GenAI spans) with a scripted ``Model``: ``python drive_strands.py MODE OUT_DIR``.

Modes: ``default`` (content in span events, older GenAI names) and ``latest``
(``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental``: arguments on the tool span).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

MODE, OUT = sys.argv[1], Path(sys.argv[2])
if MODE == "latest":
    os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"

import scenario as sc  # noqa: E402

run = sc.Run(set_global=True)  # Strands takes the global tracer provider

from strands import Agent, tool  # noqa: E402
from strands.models.model import Model  # noqa: E402


class ScriptedModel(Model):
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
        if n < len(sc.TURNS):
            name, args = sc.TURNS[n]
            yield {"contentBlockStart": {"start": {"toolUse": {"name": name, "toolUseId": f"call_{n}"}}}}
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(args)}}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "tool_use"}}
        else:
            yield {"contentBlockDelta": {"delta": {"text": sc.FINAL_TEXT}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}
        inp, out = sc.usage_of(n)
        yield {"metadata": {"usage": {"inputTokens": inp, "outputTokens": out, "totalTokens": inp + out},
                            "metrics": {"latencyMs": 5}}}


def scenario() -> None:
    agent = Agent(model=ScriptedModel(), name=sc.AGENT, system_prompt=sc.SYSTEM_PROMPT,
                  tools=[tool(f) for f in sc.TOOLS], callback_handler=None)
    assert str(agent(sc.USER_MESSAGE)).strip() == sc.FINAL_TEXT


sc.drive(run, scenario, OUT)
