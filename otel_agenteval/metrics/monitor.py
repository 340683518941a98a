"""The engine with the metrics as its first sinks: what every live front door builds (the span
processor in process, ``serve`` collector-side), so both count the same way."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from opentelemetry.metrics import MeterProvider
from prometheus_client import CollectorRegistry

from ..engine.engine import Clock, Engine
from ..model.trajectory import Trajectory
from ..model.violation import Violation
from ..policy.policy import Policy
from ..rules import KNOWN_RULES, Rule
from .blindspots import checked_tools
from .prometheus import Metrics


@dataclass
class Monitor:
    engine: Engine
    metrics: Metrics


def build_monitor(policy: Policy, registry: CollectorRegistry | None, *,
                  on_violation: Iterable[Callable[[Violation], None]] = (),
                  on_trajectory: Iterable[Callable[[Trajectory], None]] = (),
                  rules: Sequence[Rule] | None = None, clock: Clock | None = None,
                  log_violations: bool = True, one_caller: bool = False,
                  meter_provider: MeterProvider | None = None) -> Monitor:
    """An :class:`Engine` whose findings go to a :class:`Metrics` on ``registry`` first, then to the callbacks.

    A callback that raises is counted (``agenteval_processor_errors_total{stage="callback"}``) and
    the others still run. ``meter_provider``: the metrics through OpenTelemetry too (``otel_metrics.py``)."""
    rule_names = {r: s for r, s in KNOWN_RULES.items() if policy.rule_enabled(r)}
    metrics = Metrics(registry, policy.tools, policy.limits.max_tool_labels, rule_names, policy.writes,
                      known_agents=policy.agents, max_agent_labels=policy.limits.max_agent_labels,
                      expected_tools=policy.expected_tools, loop_repeats=policy.outputs.loop_repeats)
    metrics.unchecked.checked = checked_tools(policy.tools, policy.outcome.success_when)
    on_finish: tuple[Callable[[Trajectory], None], ...] = (metrics.finished,)
    if meter_provider is not None:
        from .otel import MetricsBridge  # imported when asked for

        on_finish = (*on_finish, MetricsBridge(metrics, meter_provider).finished)
    engine = Engine(policy, rules=rules, on_violation=(metrics.violation, *on_violation),
                    on_finish=on_finish, on_trajectory=tuple(on_trajectory), clock=clock,
                    log_violations=log_violations, one_caller=one_caller)
    metrics.open_trajectories.set_function(lambda: engine.open_trajectories)
    return Monitor(engine, metrics)
