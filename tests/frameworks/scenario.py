"""The one scenario every framework of issue 13 runs, and the figures it must produce.

A user reports a damaged order; the scripted model then calls one tool per turn:
``lookup_order`` (ok), ``get_policy`` (the tool raises), ``create_claim`` (ok), the identical
``create_claim`` again (ok: a ``duplicate_write``), then answers. Five model calls, 600 input and
35 output tokens, agent ``support_agent``.

:func:`live` reads the figures from a real ``TrajectoryProcessor``'s registry (agent names read
back from the series' labels); :func:`replayed` reads the same figures from ``replay`` of the
exported spans, so a test asserts ``live == replayed == expected``. Used by the end-to-end tests
in each framework's own environment (``.ci/frameworks.sh``) and by ``test_captured_shapes.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from otel_agenteval import Policy, Trajectory, TrajectoryProcessor, Violation
from otel_agenteval.metrics.blindspots import UncheckedCalls, checked_tools
from otel_agenteval.replay import replay

SERVICE = "support-svc"
AGENT = "support_agent"
MODEL = "fake-model"
SYSTEM_PROMPT = "You are a support agent for order claims."
USER_MESSAGE = "My order 88120 arrived damaged, please file a claim."
FINAL_TEXT = "I filed claim CLM-5531 for order 88120 (damaged)."
POLICY = Policy.from_dict({"tools": {"create_claim": {"write": True}}, "outcome": {"success_when": ["create_claim"]}})

TURNS: list[tuple[str, dict[str, Any]]] = [
    ("lookup_order", {"order_id": "88120"}),
    ("get_policy", {"topic": "damaged_delivery"}),
    ("create_claim", {"order_id": "88120", "reason": "damaged"}),
    ("create_claim", {"order_id": "88120", "reason": "damaged"}),
]
TOOL_OK = [True, False, True, True]
# round 3 (issue 39, ../shared/reference/capture-scripts/round-3): the failing tool comes last
ROUND3_TURNS: list[tuple[str, dict[str, Any]]] = [
    ("lookup_order", {"order_id": "88120"}),
    ("create_claim", {"order_id": "88120", "reason": "damaged"}),
    ("create_claim", {"order_id": "88120", "reason": "damaged"}),
    ("issue_refund", {"order_id": "88120", "amount": 25}),
]
ROUND3_TOOL_OK = [True, True, True, False]
N_LLM = len(TURNS) + 1


def usage_of(turn: int) -> tuple[int, int]:
    """Model usage of turn 0..4: 600 input and 35 output tokens in all."""
    return 100 + 10 * turn, 5 + turn


def lookup_order(order_id: str) -> dict[str, Any]:
    """Look up an order by its id."""
    return {"order_id": order_id, "status": "delivered", "items": ["vase"]}


def get_policy(topic: str) -> str:
    """Get the support policy text for a topic."""
    raise RuntimeError("policy service unavailable")


def create_claim(order_id: str, reason: str) -> dict[str, Any]:
    """Create a damage claim for an order."""
    return {"claim_id": "CLM-5531", "order_id": order_id, "reason": reason}


TOOLS: list[Callable[..., Any]] = [lookup_order, get_policy, create_claim]


def policy_for(tool_prefix: str = "") -> Policy:
    """The scenario's policy, for tools named ``<prefix><tool>`` on spans (Semantic Kernel: ``orders-``)."""
    if not tool_prefix:
        return POLICY
    claim = f"{tool_prefix}create_claim"
    return Policy.from_dict({"tools": {claim: {"write": True}}, "outcome": {"success_when": [claim]}})


def expected(*, arguments: bool = True, llm_calls: int = N_LLM, tokens: tuple[int, int] = (600, 35),
             agent: str = AGENT, tool_prefix: str = "", round3: bool = False) -> dict[str, Any]:
    """The figures of one run. ``arguments=False``: the framework records none (content capture
    off), so no duplicate can be seen and both create_claim calls count as unchecked.
    ``round3``: the round-3 scenario (:data:`ROUND3_TURNS`)."""
    turns, tool_ok = (ROUND3_TURNS, ROUND3_TOOL_OK) if round3 else (TURNS, TOOL_OK)
    calls: dict[str, float] = {}
    for (name, _), ok in zip(turns, tool_ok):
        key = f"{agent}/{tool_prefix}{name}/{'ok' if ok else 'error'}"
        calls[key] = calls.get(key, 0.0) + 1.0
    unchecked = {} if arguments else {f"{agent}/{tool_prefix}create_claim/no_arguments": 2.0}
    if llm_calls and not any(tokens):
        unchecked[f"{agent}//no_token_usage"] = 1.0
    return {
        "trajectories": [(agent, "success")],
        "tool_calls": dict(sorted(calls.items())),
        "tokens": [tokens],
        "llm_calls": [llm_calls],
        "steps": [[(tool_prefix + name, ok) for (name, _), ok in zip(turns, tool_ok)]],
        "arguments": [[args if arguments else {} for _, args in turns]],
        "duplicate_write": 1.0 if arguments else 0.0,
        "unchecked": unchecked,
        "other_violations": [],
    }


@dataclass
class Run:
    """A real ``TracerProvider`` with an in-memory exporter and a ``TrajectoryProcessor`` behind it.

    ``set_global=True`` makes it the global provider, for frameworks that take that one (Strands,
    Google ADK, Agent Framework): once per process, so each such run is a process of its own
    (:func:`drive`).
    """

    set_global: bool = False
    policy: Policy = POLICY
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    exporter: InMemorySpanExporter = field(default_factory=InMemorySpanExporter)
    trajectories: list[Trajectory] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.processor = TrajectoryProcessor(self.policy, registry=self.registry, on_trajectory=[self.trajectories.append],
                                             on_violation=[self.violations.append])
        self.provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.provider.add_span_processor(self.processor)
        if self.set_global:
            from opentelemetry import trace

            trace.set_tracer_provider(self.provider)

    def finish(self, out: Path) -> list[ReadableSpan]:
        """Shut the provider down and write the finished spans as ``span.to_json()`` (a JSON list)."""
        self.provider.shutdown()
        spans = list(self.exporter.get_finished_spans())
        out.write_text(json.dumps([json.loads(s.to_json()) for s in spans], indent=1))
        return spans


def plain(value: Any) -> Any:
    """A value as JSON gives it back (tuples as lists): figures compared across processes."""
    return json.loads(json.dumps(value))


def drive(run: Run, scenario: Callable[[], Any], out_dir: Path) -> None:
    """A driver's body: run the scenario, then write ``spans.json`` and ``live.json`` to ``out_dir``."""
    scenario()
    run.finish(out_dir / "spans.json")
    (out_dir / "live.json").write_text(json.dumps(live(run), indent=1))


def _samples(registry: CollectorRegistry, name: str) -> Iterator[tuple[dict[str, str], float]]:
    for family in registry.collect():
        for s in family.samples:
            if s.name == name and s.value:
                yield s.labels, s.value


def live(run: Run) -> dict[str, Any]:
    """The figures as the processor counted them: metric series, plus the finished trajectories."""
    reg = run.registry
    calls: dict[str, float] = {}
    for labels, v in _samples(reg, "agenteval_tool_calls_total"):
        key = f"{labels['agent_name']}/{labels['tool']}/{labels['status']}"
        calls[key] = calls.get(key, 0.0) + v
    tokens = {labels["type"]: int(v) for labels, v in _samples(reg, "agenteval_tokens_total")}
    unchecked = {f"{labels['agent_name']}/{labels['tool']}/{labels['reason']}": v
                 for labels, v in _samples(reg, "agenteval_unchecked_calls_total")}
    dup = sum(v for labels, v in _samples(reg, "agenteval_violations_total") if labels["rule"] == "duplicate_write")
    return _figures(run.trajectories, run.violations, dict(sorted(calls.items())),
                    [(tokens.get("input", 0), tokens.get("output", 0))], unchecked, dup)


def replayed(path: Path | Sequence[Path], policy: Policy = POLICY) -> dict[str, Any]:
    """The same figures from ``replay`` of recorded spans (no processor, no on_start)."""
    result = replay([path] if isinstance(path, Path) else list(path), policy)
    blind_registry = CollectorRegistry()
    blind = UncheckedCalls(blind_registry, checked_tools(policy.tools, policy.outcome.success_when), str)
    calls: dict[str, float] = {}
    for t in result.trajectories:
        blind.finished(t, t.service_name, t.agent_name)
        for s in t.steps:
            key = f"{t.agent_name}/{s.tool}/{'ok' if s.ok else 'error'}"
            calls[key] = calls.get(key, 0.0) + 1.0
    unchecked = {f"{labels['agent_name']}/{labels['tool']}/{labels['reason']}": v
                 for labels, v in _samples(blind_registry, "agenteval_unchecked_calls_total")}
    dup = float(sum(1 for v in result.violations if v.rule == "duplicate_write"))
    return _figures(result.trajectories, result.violations, dict(sorted(calls.items())),
                    [(t.input_tokens, t.output_tokens) for t in result.trajectories], unchecked, dup)


def _figures(trajectories: Iterable[Trajectory], violations: Iterable[Violation], calls: dict[str, float],
             tokens: list[tuple[int, int]], unchecked: dict[str, float], dup: float) -> dict[str, Any]:
    ts = list(trajectories)
    return {
        "trajectories": [(t.agent_name, t.outcome) for t in ts],
        "tool_calls": calls,
        "tokens": tokens,
        "llm_calls": [t.llm_calls for t in ts],
        "steps": [[(s.tool, s.ok) for s in t.steps] for t in ts],
        "arguments": [[s.arguments for s in t.steps] for t in ts],
        "duplicate_write": dup,
        "unchecked": unchecked,
        "other_violations": sorted({v.rule for v in violations} - {"duplicate_write"}),
    }
