"""A scripted Google ADK model for the drivers: turn n is the script's n-th tool call (``TURNS``), then
its ``FINAL_TEXT``; token usage as its ``usage_of(n)`` says. Import it once the tracer provider is set."""

from __future__ import annotations

from typing import Any

from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_response import LlmResponse
from google.genai import types


def scripted_llm(script: Any, model: str) -> BaseLlm:
    class ScriptedLlm(BaseLlm):
        turn: int = 0

        @classmethod
        def supported_models(cls) -> list[str]:
            return [r"fake-.*"]

        async def generate_content_async(self, llm_request: Any, stream: bool = False) -> Any:
            n = self.turn
            self.turn += 1
            if n < len(script.TURNS):
                name, args = script.TURNS[n]
                parts = [types.Part(function_call=types.FunctionCall(id=f"call_{n}", name=name, args=args))]
            else:
                parts = [types.Part(text=script.FINAL_TEXT)]
            inp, out = script.usage_of(n)
            yield LlmResponse(content=types.Content(role="model", parts=parts), model_version=model,
                              usage_metadata=types.GenerateContentResponseUsageMetadata(
                                  prompt_token_count=inp, candidates_token_count=out, total_token_count=inp + out))

    return ScriptedLlm(model=model)
