"""LangGraph + OpenInference's LangChain instrumentor with otel-agenteval: a scripted chat model
files the same claim twice, and the processor reports the duplicate write. Offline.

    pip install ../.. langgraph==1.2.24 langchain-core==1.8.3 openinference-instrumentation-langchain==0.1.80
    python main.py            # a summary; --json for the same as JSON
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import tool
from langgraph.prebuilt import ToolNode, create_react_agent
from openinference.instrumentation.langchain import LangChainInstrumentor
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


class ScriptedModel(FakeMessagesListChatModel):
    """Canned AI messages, one tool call each, then the answer; tools are bound by the script."""

    model_name: str = MODEL

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self


def script() -> ScriptedModel:
    def message(n: int) -> BaseMessage:
        calls = [{"name": TURNS[n][0], "args": TURNS[n][1], "id": f"call_{n}", "type": "tool_call"}] \
            if n < len(TURNS) else []
        inp, out = 100 + 10 * n, 5 + n
        return AIMessage(content="" if calls else ANSWER, tool_calls=calls, response_metadata={"model_name": MODEL},
                         usage_metadata={"input_tokens": inp, "output_tokens": out, "total_tokens": inp + out})
    return ScriptedModel(responses=[message(n) for n in range(len(TURNS) + 1)])


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
    LangChainInstrumentor().instrument(tracer_provider=provider)

    with warnings.catch_warnings():  # create_react_agent's successor lives in the `langchain` package
        warnings.simplefilter("ignore")
        graph = create_react_agent(script(), ToolNode([lookup_order, create_claim]), name="support_agent",
                                   prompt="You are a support agent for order claims.")
    # OpenInference sets nothing on LangChain spans until they end, so tool calls and violations
    # would carry agent_name="unknown": one agent span of your own names the run from its start.
    tracer = provider.get_tracer("support-app")
    with tracer.start_as_current_span("invoke_agent support_agent", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support_agent"}):
        out = graph.invoke({"messages": [("user", "My order 88120 arrived damaged, please file a claim.")]},
                           config={"metadata": {"session_id": "conv-1"}})
    provider.shutdown()
    return report(str(out["messages"][-1].content), finished, violations, registry)


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
