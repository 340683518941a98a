"""What every framework test shares: the support scenario, the policy, and a harness.

Each test drives the scenario of ``span-shapes.md`` through a real agent framework with an
offline fake model, on a fresh ``TracerProvider`` whose only processor is a
``TrajectoryProcessor`` with its own registry, then reads back the trajectory, the violations
and the Prometheus samples. (A helper module rather than ``conftest.py``: conftest files outside
packages share the module name ``conftest``, and ``tests/conftest.py`` is imported by name.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry

from otel_agenteval import Policy, Trajectory, TrajectoryProcessor, Violation

SERVICE = "support-svc"
USER_MESSAGE = "My order 88120 arrived damaged, please file a claim."
FINAL_TEXT = "I filed claim CLM-5531 for order 88120 (damaged in transit)."

# The scenario's tool calls: turn 1 two in parallel, turn 2 a write that raises, turn 3 the retry.
LOOKUP = ("lookup_order", {"order_id": "88120"})
POLICY_TEXT = ("get_policy", {"topic": "damaged_delivery"})
CLAIM_BAD = ("create_claim", {"order_id": "88120", "reason": "damaged"})
CLAIM_OK = ("create_claim", {"order_id": "88120", "reason": "damaged_in_transit"})
CLAIM_OK_REORDERED = ("create_claim", {"reason": "damaged_in_transit", "order_id": "88120"})
SCENARIO = [LOOKUP, POLICY_TEXT, CLAIM_BAD, CLAIM_OK]
SCENARIO_OK = [True, True, False, True]
# The duplicate run: the same successful write twice, the second with its keys in another order.
DUPLICATE = [LOOKUP, CLAIM_OK, CLAIM_OK_REORDERED]

PRICE_IN, PRICE_OUT = 2.5, 10.0  # USD per million tokens, the same for every fake model


def make_policy(*models: str) -> Policy:
    return Policy.from_dict({
        "tools": {"create_claim": {"write": True}},
        "pricing": {m: {"input_per_mtok": PRICE_IN, "output_per_mtok": PRICE_OUT} for m in models},
        "outcome": {"success_when": ["create_claim"]},
    })


def expected_cost(input_tokens: int, output_tokens: int) -> float:
    return (input_tokens * PRICE_IN + output_tokens * PRICE_OUT) / 1e6


@dataclass
class Harness:
    provider: TracerProvider
    processor: TrajectoryProcessor
    registry: CollectorRegistry
    trajectories: list[Trajectory] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)

    def sample(self, name: str, agent: str, **labels: str) -> float | None:
        """One sample of this service and ``agent``; ``None`` when the series does not exist."""
        return self.registry.get_sample_value(name, {"service_name": SERVICE, "agent_name": agent, **labels})

    def duplicates(self, agent: str) -> float | None:
        return self.sample("agenteval_violations_total", agent, rule="duplicate_write", tool="create_claim",
                           severity="critical")

    def only_trajectory(self) -> Trajectory:
        assert len(self.trajectories) == 1, [(t.agent_name, t.outcome, len(t.steps)) for t in self.trajectories]
        return self.trajectories[0]

    def tool_counts(self, agent: str) -> dict[tuple[str, str], float | None]:
        """``agenteval_tool_calls_total`` by (tool, status) for the scenario's tools."""
        return {(tool, status): self.sample("agenteval_tool_calls_total", agent, tool=tool, status=status)
                for tool in ("lookup_order", "get_policy", "create_claim") for status in ("ok", "error")}


def harness_factory() -> Iterator[Callable[[Policy], Harness]]:
    """Body of each module's fixture: makes harnesses, shuts their providers down afterwards."""
    made: list[Harness] = []

    def make(policy: Policy) -> Harness:
        registry = CollectorRegistry()
        trajectories: list[Trajectory] = []
        violations: list[Violation] = []
        processor = TrajectoryProcessor(policy, registry=registry, on_trajectory=[trajectories.append],
                                        on_violation=[violations.append])
        provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
        provider.add_span_processor(processor)
        h = Harness(provider, processor, registry, trajectories, violations)
        made.append(h)
        return h

    yield make
    for h in made:
        h.provider.shutdown()


def instrumented_factory(instrumentor: Any) -> Iterator[Callable[[Policy], Harness]]:
    """Like :func:`harness_factory`, with an OpenInference instrumentor exporting to each
    harness's provider, and uninstrumented afterwards."""
    factory = harness_factory()
    make_harness = next(factory)

    def make(policy: Policy) -> Harness:
        h = make_harness(policy)
        instrumentor.instrument(tracer_provider=h.provider)
        return h

    try:
        yield make
    finally:
        if instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.uninstrument()
        for _ in factory:
            pass


def observed(h: Harness, agent: str, tool_agent: str | None = None) -> dict[str, object]:
    """The one finished trajectory and the metrics it produced, as one comparable value.

    ``tool_agent`` is the agent label of tool-call series when it differs from the trajectory's
    (a framework that names its agent only when the run ends).
    """
    t = h.only_trajectory()
    return {
        "agent": t.agent_name,
        "outcome": t.outcome,
        "tools": [s.tool for s in t.steps],
        "arguments": [s.arguments for s in t.steps],
        "ok": [s.ok for s in t.steps],
        "llm_calls": t.llm_calls,
        "tokens": (t.input_tokens, t.output_tokens),
        "metric_tool_calls": h.tool_counts(tool_agent or agent),
        "metric_trajectories": {o: h.sample("agenteval_trajectories_total", agent, outcome=o)
                                for o in ("success", "failure", "unknown", "incomplete")},
        "metric_tokens": (h.sample("agenteval_tokens_total", agent, type="input"),
                          h.sample("agenteval_tokens_total", agent, type="output")),
        "metric_steps": (h.sample("agenteval_trajectory_steps_count", agent),
                         h.sample("agenteval_trajectory_steps_sum", agent)),
        "metric_llm_calls": h.sample("agenteval_trajectory_llm_calls_sum", agent),
        "violations": [(v.rule, v.tool, v.agent, v.severity) for v in h.violations],
    }


def expected(agent: str, tokens: tuple[int, int], *, tools: Sequence[tuple[str, dict[str, str]]] = SCENARIO,
             ok: Sequence[bool] = SCENARIO_OK, llm_calls: int = 4,
             arguments: Sequence[dict[str, str]] | None = None,
             violations: Sequence[tuple[str, str, str, str]] = ()) -> dict[str, object]:
    """What :func:`observed` should read for a successful run of ``tools`` (one trajectory)."""
    counts: dict[tuple[str, str], float | None] = {
        (tool, status): None for tool in ("lookup_order", "get_policy", "create_claim") for status in ("ok", "error")}
    for (tool, _), good in zip(tools, ok):
        key = (tool, "ok" if good else "error")
        counts[key] = (counts[key] or 0.0) + 1.0
    return {
        "agent": agent,
        "outcome": "success",
        "tools": [name for name, _ in tools],
        "arguments": list(arguments) if arguments is not None else [args for _, args in tools],
        "ok": list(ok),
        "llm_calls": llm_calls,
        "tokens": tokens,
        "metric_tool_calls": counts,
        "metric_trajectories": {"success": 1.0, "failure": 0.0, "unknown": 0.0, "incomplete": 0.0},
        "metric_tokens": (float(tokens[0]), float(tokens[1])),
        "metric_steps": (1.0, float(len(tools))),
        "metric_llm_calls": float(llm_calls),
        "violations": list(violations),
    }


def cost_sample(h: Harness, agent: str) -> float | None:
    return h.sample("agenteval_trajectory_cost_usd_sum", agent, outcome="success")
