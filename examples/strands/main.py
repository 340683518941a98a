"""Strands Agents with otel-agenteval: a scripted model files the same claim twice, and the
processor reports the duplicate write. Offline. Strands takes the global tracer provider.

    pip install ../.. strands-agents==1.62.0
    python main.py            # a summary; --json for the same as JSON
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry, generate_latest
from strands import Agent, tool
from strands.models.model import Model

from otel_agenteval import Policy, TrajectoryProcessor

HERE = Path(__file__).resolve().parent
MODEL = "scripted-model"
TURNS = [("lookup_order", {"order_id": "88120"}),
         ("create_claim", {"order_id": "88120", "reason": "damaged"}),
         ("create_claim", {"order_id": "88120", "reason": "damaged"})]
ANSWER = "I filed claim CLM-5531 for order 88120."


class ScriptedModel(Model):
    """A Strands model that streams the script's events: one tool call a turn, then the answer."""

    def __init__(self) -> None:
        self.turn = 0
        self.config: dict[str, Any] = {"model_id": MODEL}

    def update_config(self, **config: Any) -> None:
        self.config.update(config)

    def get_config(self) -> dict[str, Any]:
        return self.config

    async def structured_output(self, output_model: Any, prompt: Any, system_prompt: Any = None, **kw: Any) -> Any:
        raise NotImplementedError
        yield

    async def stream(self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, **kw: Any) -> Any:
        n = self.turn
        self.turn += 1
        yield {"messageStart": {"role": "assistant"}}
        if n < len(TURNS):
            name, args = TURNS[n]
            yield {"contentBlockStart": {"start": {"toolUse": {"name": name, "toolUseId": f"call_{n}"}}}}
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(args)}}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "tool_use"}}
        else:
            yield {"contentBlockDelta": {"delta": {"text": ANSWER}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}
        inp, out = 100 + 10 * n, 5 + n
        yield {"metadata": {"usage": {"inputTokens": inp, "outputTokens": out, "totalTokens": inp + out},
                            "metrics": {"latencyMs": 1}}}


@tool
def lookup_order(order_id: str) -> dict[str, Any]:
    """Look up an order by its id."""
    return {"order_id": order_id, "status": "delivered"}


@tool
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
    trace.set_tracer_provider(provider)

    agent = Agent(model=ScriptedModel(), name="support_agent", system_prompt="You are a support agent for order claims.",
                  tools=[lookup_order, create_claim], callback_handler=None)
    answer = str(agent("My order 88120 arrived damaged, please file a claim.")).strip()
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
