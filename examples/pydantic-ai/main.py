"""pydantic-ai with otel-agenteval: a scripted model files the same claim twice, and the
processor reports the duplicate write. Offline: no API key, no network.

    pip install ../.. pydantic-ai-slim==2.68.0
    python main.py            # a summary; --json for the same as JSON
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry, generate_latest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.usage import RequestUsage

from otel_agenteval import Policy, TrajectoryProcessor

HERE = Path(__file__).resolve().parent
MODEL = "scripted-model"
# what the model asks for, turn by turn: the second create_claim repeats the first
TURNS = [("lookup_order", {"order_id": "88120"}),
         ("create_claim", {"order_id": "88120", "reason": "damaged"}),
         ("create_claim", {"order_id": "88120", "reason": "damaged"})]
ANSWER = "I filed claim CLM-5531 for order 88120."


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The model: one tool call a turn, then the answer (turn n: 100+10n input, 5+n output tokens)."""
    n = sum(isinstance(m, ModelResponse) for m in messages)
    usage = RequestUsage(input_tokens=100 + 10 * n, output_tokens=5 + n)
    if n < len(TURNS):
        name, args = TURNS[n]
        return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"call_{n}")], usage=usage, model_name=MODEL)
    return ModelResponse(parts=[TextPart(ANSWER)], usage=usage, model_name=MODEL)


def main() -> int:
    registry = CollectorRegistry()  # or the default registry, served with prometheus_client.start_http_server
    finished: list[Any] = []
    violations: list[Any] = []
    processor = TrajectoryProcessor(Policy.from_file(HERE / "agenteval.yaml"), registry=registry,
                                    on_trajectory=[finished.append], on_violation=[violations.append])
    provider = TracerProvider(resource=Resource.create({"service.name": "support-svc"}))
    provider.add_span_processor(processor)

    agent = Agent(FunctionModel(scripted, model_name=MODEL), name="support_agent",
                  instructions="You are a support agent for order claims.")
    agent.instrument = InstrumentationSettings(tracer_provider=provider)  # or Agent.instrument_all()

    @agent.tool_plain
    def lookup_order(order_id: str) -> dict[str, Any]:
        """Look up an order by its id."""
        return {"order_id": order_id, "status": "delivered"}

    @agent.tool_plain
    def create_claim(order_id: str, reason: str) -> dict[str, str]:
        """Create a damage claim for an order."""
        return {"claim_id": "CLM-5531", "order_id": order_id, "reason": reason}

    answer = agent.run_sync("My order 88120 arrived damaged, please file a claim.").output
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
