"""Google ADK 2.x with otel-agenteval: a scripted model files the same claim twice, and the
processor reports the duplicate write. Offline. ADK takes the global tracer provider.

ADK records tool arguments only with content capture on: this example turns it on (below). Run it
with ``--no-content`` to see what happens without: no arguments, so no duplicate can be seen,
and ``agenteval_unchecked_calls_total{reason="no_arguments"}`` counts both create_claim calls
(the processor also logs, once, the setting that fixes it).

    pip install ../.. google-adk==2.13.0
    python main.py            # a summary; --json for the same as JSON
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

if "--no-content" not in sys.argv[1:]:  # read by ADK when it records a span: set before running it
    os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")

from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.models.base_llm import BaseLlm  # noqa: E402
from google.adk.models.llm_response import LlmResponse  # noqa: E402
from google.adk.runners import InMemoryRunner  # noqa: E402
from google.genai import types  # noqa: E402
from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from prometheus_client import CollectorRegistry, generate_latest  # noqa: E402

from otel_agenteval import Policy, TrajectoryProcessor  # noqa: E402

HERE = Path(__file__).resolve().parent
MODEL = "scripted-model"
TURNS = [("lookup_order", {"order_id": "88120"}),
         ("create_claim", {"order_id": "88120", "reason": "damaged"}),
         ("create_claim", {"order_id": "88120", "reason": "damaged"})]
ANSWER = "I filed claim CLM-5531 for order 88120."


class ScriptedLlm(BaseLlm):
    """An ADK model answering from the script: one function call a turn, then the answer."""

    turn: int = 0

    @classmethod
    def supported_models(cls) -> list[str]:
        return [r"scripted-.*"]

    async def generate_content_async(self, llm_request: Any, stream: bool = False) -> Any:
        n = self.turn
        self.turn += 1
        if n < len(TURNS):
            name, args = TURNS[n]
            parts = [types.Part(function_call=types.FunctionCall(id=f"call_{n}", name=name, args=args))]
        else:
            parts = [types.Part(text=ANSWER)]
        inp, out = 100 + 10 * n, 5 + n
        yield LlmResponse(content=types.Content(role="model", parts=parts), model_version=MODEL,
                          usage_metadata=types.GenerateContentResponseUsageMetadata(
                              prompt_token_count=inp, candidates_token_count=out, total_token_count=inp + out))


def lookup_order(order_id: str) -> dict[str, Any]:
    """Look up an order by its id."""
    return {"order_id": order_id, "status": "delivered"}


def create_claim(order_id: str, reason: str) -> dict[str, str]:
    """Create a damage claim for an order."""
    return {"claim_id": "CLM-5531", "order_id": order_id, "reason": reason}


async def ask(agent: LlmAgent, text: str) -> str:
    runner = InMemoryRunner(agent=agent, app_name="support_app")
    session = await runner.session_service.create_session(app_name="support_app", user_id="u1")
    answer = ""
    async for event in runner.run_async(user_id="u1", session_id=session.id,
                                        new_message=types.Content(role="user", parts=[types.Part(text=text)])):
        if event.content and event.content.parts and event.content.parts[0].text:
            answer = event.content.parts[0].text
    return answer


def main() -> int:
    registry = CollectorRegistry()
    finished: list[Any] = []
    violations: list[Any] = []
    processor = TrajectoryProcessor(Policy.from_file(HERE / "agenteval.yaml"), registry=registry,
                                    on_trajectory=[finished.append], on_violation=[violations.append])
    provider = TracerProvider(resource=Resource.create({"service.name": "support-svc"}))
    provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)

    agent = LlmAgent(name="support_agent", model=ScriptedLlm(model=MODEL),
                     instruction="You are a support agent for order claims.", tools=[lookup_order, create_claim])
    answer = asyncio.run(ask(agent, "My order 88120 arrived damaged, please file a claim."))
    provider.shutdown()
    return report(answer, finished, violations, registry)


def report(answer: str, finished: list[Any], violations: list[Any], registry: CollectorRegistry) -> int:
    summary = {
        "answer": answer,
        "trajectories": [{"agent": t.agent_name, "outcome": t.outcome, "tools": [[s.tool, s.ok] for s in t.steps],
                          "llm_calls": t.llm_calls, "tokens": [t.input_tokens, t.output_tokens],
                          "cost_usd": round(t.cost_usd, 6)} for t in finished],
        "violations": [[v.rule, v.tool, v.severity] for v in violations],
        # calls the checks could not see into (a framework that records no arguments, say)
        "unchecked": {f"{s.labels['tool']}/{s.labels['reason']}": s.value for m in registry.collect()
                      for s in m.samples if s.name == "agenteval_unchecked_calls_total" and s.value},
    }
    if "--json" in sys.argv[1:]:
        print(json.dumps(summary))
    else:
        print(f"answer: {answer}")
        for t in summary["trajectories"]:
            print(f"trajectory {t['agent']}: {t['outcome']}, tools {t['tools']}, {t['llm_calls']} model calls, "
                  f"tokens {t['tokens']}, ${t['cost_usd']}")
        for rule, tool, severity in summary["violations"]:
            print(f"violation: {rule} ({severity}) on {tool}")
        for what, n in summary["unchecked"].items():
            print(f"unchecked: {what} x{n:g}")
        print("\n".join(line for line in generate_latest(registry).decode().splitlines()
                        if line.startswith("agenteval_violations_total{") and not line.endswith(" 0.0")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
