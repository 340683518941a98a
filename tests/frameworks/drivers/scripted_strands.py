"""A scripted Strands ``Model`` for the drivers: turn n is the script's n-th tool call (``TURNS``), then
its ``FINAL_TEXT``; token usage as its ``usage_of(n)`` says. Import it once the tracer provider is set."""

from __future__ import annotations

import json
from typing import Any

from strands.models.model import Model


class ScriptedModel(Model):
    def __init__(self, script: Any, model_id: str) -> None:
        self.script = script
        self.turn = 0
        self.config: dict[str, Any] = {"model_id": model_id}

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
        script = self.script
        yield {"messageStart": {"role": "assistant"}}
        if n < len(script.TURNS):
            name, args = script.TURNS[n]
            yield {"contentBlockStart": {"start": {"toolUse": {"name": name, "toolUseId": f"call_{n}"}}}}
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(args)}}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "tool_use"}}
        else:
            yield {"contentBlockDelta": {"delta": {"text": script.FINAL_TEXT}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}
        inp, out = script.usage_of(n)
        yield {"metadata": {"usage": {"inputTokens": inp, "outputTokens": out, "totalTokens": inp + out},
                            "metrics": {"latencyMs": 5}}}
