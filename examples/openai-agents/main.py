"""OpenAI Agents SDK + OpenInference's instrumentor with otel-agenteval: a scripted model files
the same claim twice, and the processor reports the duplicate write. Offline: the SDK's real
``OpenAIResponsesModel`` runs, with only its HTTP call replaced by canned responses.

    pip install ../.. openai-agents==0.24.0 openinference-instrumentation-openai-agents==2.6.0
    python main.py            # a summary; --json for the same as JSON
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from agents import Agent, Runner, function_tool
from agents.models.openai_responses import OpenAIResponsesModel
from openai import AsyncOpenAI
from openai.types.responses import (
    Response,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseUsage,
)
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails
from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry, generate_latest

from otel_agenteval import Policy, TrajectoryProcessor

HERE = Path(__file__).resolve().parent
MODEL = "scripted-model"
TURNS = [("lookup_order", {"order_id": "88120"}),
         ("create_claim", {"order_id": "88120", "reason": "damaged"}),
         ("create_claim", {"order_id": "88120", "reason": "damaged"})]
ANSWER = "I filed claim CLM-5531 for order 88120."


class ScriptedModel(OpenAIResponsesModel):
    """The real Responses model; ``_fetch_response`` answers from the script instead of the API."""

    def __init__(self) -> None:
        super().__init__(model=MODEL, openai_client=AsyncOpenAI(api_key="offline", base_url="http://127.0.0.1:9/v1"))
        self.turn = 0

    async def _fetch_response(self, *args: Any, **kwargs: Any) -> Response:  # type: ignore[override]
        n = self.turn
        self.turn += 1
        output: list[Any]
        if n < len(TURNS):
            name, arguments = TURNS[n]
            output = [ResponseFunctionToolCall(id=f"fc_{n}", call_id=f"call_{n}", type="function_call", name=name,
                                               arguments=json.dumps(arguments), status="completed")]
        else:
            output = [ResponseOutputMessage(id="msg", type="message", role="assistant", status="completed",
                                            content=[ResponseOutputText(text=ANSWER, type="output_text",
                                                                        annotations=[])])]
        inp, out = 100 + 10 * n, 5 + n
        return Response(id=f"resp_{n}", created_at=time.time(), model=MODEL, object="response", output=output,
                        parallel_tool_calls=False, tool_choice="auto", tools=[], status="completed",
                        usage=ResponseUsage(input_tokens=inp, output_tokens=out, total_tokens=inp + out,
                                            input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
                                            output_tokens_details=OutputTokensDetails(reasoning_tokens=0)))


@function_tool
def lookup_order(order_id: str) -> dict[str, Any]:
    """Look up an order by its id."""
    return {"order_id": order_id, "status": "delivered"}


@function_tool
def create_claim(order_id: str, reason: str) -> dict[str, str]:
    """Create a damage claim for an order."""
    return {"claim_id": "CLM-5531", "order_id": order_id, "reason": reason}


def main() -> int:
    registry = CollectorRegistry()
    finished: list[Any] = []
    violations: list[Any] = []
    processor = TrajectoryProcessor(Policy.from_file(HERE / "agenteval.yaml"), registry=registry,
                                    on_trajectory=[finished.append], on_violation=[violations.append])
    provider = TracerProvider(resource=Resource.create({"service.name": "support-svc"}))
    provider.add_span_processor(processor)
    OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)

    agent = Agent(name="support_agent", instructions="You are a support agent for order claims.",
                  model=ScriptedModel(), tools=[lookup_order, create_claim])
    result = asyncio.run(Runner.run(agent, "My order 88120 arrived damaged, please file a claim."))
    provider.shutdown()
    return report(str(result.final_output), finished, violations, registry)


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
