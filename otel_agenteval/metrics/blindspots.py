"""No silent blind spots: calls and runs the checks cannot see into, counted and said once.

A write, confirmation-required, destructive or success tool whose span carries no arguments
cannot be checked for duplicates or confirmation: many frameworks leave arguments off unless
a setting turns content capture on. Each such call counts in
``agenteval_unchecked_calls_total{reason="no_arguments"}``, and the first one of a (service, tool)
is logged once with the setting of the framework that made the span (or that it has none):
:data:`~otel_agenteval.reading.frameworks.CAPTURE_SETTINGS`. A run with model calls but
no token counts counts once, ``reason="no_token_usage"`` (``tool=""``): its token and cost
budgets cannot be checked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from ..model.product_log import product_log
from ..model.trajectory import Trajectory
from ..reading.frameworks import capture_setting
from .catalogue import UNCHECKED

NO_ARGUMENTS = "no_arguments"
NO_TOKEN_USAGE = "no_token_usage"
LABELS = UNCHECKED.labels
_MAX_KEYS = 4096  # (service, tool) pairs logged and (service, agent) pairs touched: bounded, like every cache

log = product_log()  # structlog as the app set it up; stderr when it did not


def checked_tools(tools: Mapping[str, Any] | Iterable[str], success_when: Iterable[str] = ()) -> frozenset[str]:
    """The tools whose checks read arguments: the policy's write, ``requires_confirmation`` and
    ``destructive`` tools (from a mapping of tool policies), and the ``success_when`` tools."""
    out = set(success_when)
    if isinstance(tools, Mapping):
        for name, t in tools.items():
            if getattr(t, "write", False) or getattr(t, "requires_confirmation", False) or getattr(
                    t, "destructive", False):
                out.add(name)
    return frozenset(out)


class UncheckedTally:
    """Unchecked calls of finished trajectories by (agent, tool), each with the framework's setting
    that turns arguments on: what ``replay`` and ``score`` print (bounded like the counters)."""

    def __init__(self, checked: frozenset[str]) -> None:
        self.checked = checked
        self.calls: dict[tuple[str, str], dict[str, Any]] = {}

    def finished(self, t: Trajectory) -> None:
        if not self.checked:
            return
        for step in t.steps:
            if step.tool in self.checked and step.raw_arguments is None:
                key = (t.agent_name, step.tool)
                row = self.calls.get(key)
                if row is None:
                    if len(self.calls) >= _MAX_KEYS:
                        continue
                    framework, setting = capture_setting(getattr(step, "span_attributes", None), t.root_attributes,
                                                         getattr(getattr(step, "scope", None), "name", None))
                    row = self.calls[key] = {"agent": t.agent_name, "tool": step.tool, "reason": NO_ARGUMENTS,
                                             "calls": 0, "framework": framework, "setting": setting}
                row["calls"] += 1

    def rows(self) -> list[dict[str, Any]]:
        return [self.calls[k] for k in sorted(self.calls)]


class UncheckedCalls:
    """``agenteval_unchecked_calls_total``, counted from each finished trajectory."""

    def __init__(self, registry: CollectorRegistry, checked: frozenset[str],
                 tool_label: Callable[[str | None], str]) -> None:
        self.checked = checked
        self._tool_label = tool_label
        self._logged: set[tuple[str, str]] = set()
        self._agents: set[tuple[str, str]] = set()
        self.counter = Counter(UNCHECKED.name, UNCHECKED.doc, LABELS, registry=registry)

    def finished(self, t: Trajectory, service: str, agent: str) -> None:
        """Count ``t``'s blind spots under ``service``/``agent``: the labels the metrics gave the run."""
        checked = self.checked
        if (service, agent) not in self._agents and len(self._agents) < _MAX_KEYS:
            self._touch(service, agent)
        if checked:
            for step in t.steps:
                if step.tool in checked and step.raw_arguments is None:
                    self.counter.labels(service, agent, self._tool_label(step.tool), NO_ARGUMENTS).inc()
                    self._say_once(service, step.tool, agent, getattr(step, "span_attributes", None),
                                   t.root_attributes, getattr(getattr(step, "scope", None), "name", None))
        if t.llm_calls and not (t.input_tokens or t.output_tokens):
            self.counter.labels(service, agent, "", NO_TOKEN_USAGE).inc()
            self._say_once(service, "", agent, None, None, None)

    def _touch(self, service: str, agent: str) -> None:
        """The agent's series, exported at 0 from its first run (so ``increase()`` sees the first call)."""
        self._agents.add((service, agent))
        for tool in self.checked:
            self.counter.labels(service, agent, self._tool_label(tool), NO_ARGUMENTS)
        self.counter.labels(service, agent, "", NO_TOKEN_USAGE)

    def _say_once(self, service: str, tool: str, agent: str, attributes: dict[str, Any] | None,
                  root_attributes: dict[str, Any] | None, scope: str | None) -> None:
        key = (service, tool)
        if key in self._logged or len(self._logged) >= _MAX_KEYS:
            return
        self._logged.add(key)
        if tool:
            framework, setting = capture_setting(attributes, root_attributes, scope)
            log.warning(f"agenteval.unchecked: {tool} spans carry no arguments, so duplicate and confirmation "
                        f"checks cannot run on them; {framework} records them with {setting}",
                        reason=NO_ARGUMENTS, service_name=service, agent=agent, tool=tool,
                        framework=framework, setting=setting)
        else:
            log.warning("agenteval.unchecked: model-call spans carry no token counts, so token and cost "
                        "budgets cannot be checked; the instrumentation must record gen_ai.usage.* "
                        "(or llm.token_count.*)", reason=NO_TOKEN_USAGE, service_name=service, agent=agent)
