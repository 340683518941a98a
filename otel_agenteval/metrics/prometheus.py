"""The monitor's Prometheus series, built from the declarations in :mod:`.metric_catalogue`
(names, help, labels, buckets: one place, which the OpenTelemetry bridge reads too).

Names and labels are a contract: dashboards and alert rules are written against them.
Hot counters (spans seen, late spans, drops, errors) are plain ints kept by the engine and
read at scrape time by :class:`~otel_agenteval.metrics.collectors.SelfCollector`, so the per-span path does no metric work.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Container, Iterable, Mapping
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge
from prometheus_client.core import CounterMetricFamily, Metric

from ..model.recovery import recoveries
from ..model.trajectory import Trajectory, looping_calls, redundant_calls
from ..model.violation import Violation
from ..reading.labels import MAX_LABEL_LEN, OTHER, AgentLabels, ToolLabels, safe_label
from ..rules import KNOWN_RULES
from . import catalogue as m
from .blindspots import UncheckedCalls, checked_tools
from .catalogue import AGENT_LABELS as AGENT_LABELS  # re-exported: declared in the catalogue
from .catalogue import COST_BUCKETS as COST_BUCKETS
from .catalogue import DURATION_BUCKETS as DURATION_BUCKETS
from .catalogue import STEP_BUCKETS as STEP_BUCKETS
from .catalogue import Declared
from .collectors import PlainCollector
from .series import Cell, PlainCounter, PlainHistogram, Series, record

OUTCOMES = ("success", "failure", "unknown", "incomplete")
BUDGETS = ("steps", "llm_calls", "tokens", "cost", "duration", "repeats")
DEFAULT_MAX_AGENT_LABELS = 64  # = Limits.max_agent_labels' default
ROW_CACHE = 4096  # (service, agent, outcome) keys whose series are bound once
ROW_TOOLS = 256  # per row: tool names whose runs-with-tool cell is bound once
MAX_GUARD_SERIES = 4096  # (service, agent, rule, tool) keys whose guard counter is bound once


def counter(d: Declared) -> PlainCounter:
    return PlainCounter(d.name, d.doc, d.labels)


def histogram(d: Declared) -> PlainHistogram:
    return PlainHistogram(d.name, d.doc, d.labels, d.buckets)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None, known_tools: Iterable[str], max_tool_labels: int,
                 rules: Mapping[str, str] | None = None, writes: Container[str] = frozenset(), *,
                 known_agents: Iterable[str] = (), max_agent_labels: int = DEFAULT_MAX_AGENT_LABELS,
                 expected_tools: Iterable[str] = (), loop_repeats: int = 5) -> None:
        r = REGISTRY if registry is None else registry
        self.registry = r
        self.tool_label = ToolLabels(known_tools, max_tool_labels)
        self.agent_label = AgentLabels(known_agents, max_agent_labels)
        self._rules = dict(KNOWN_RULES) if rules is None else rules
        self._writes = writes  # repeated writes are duplicate_write's business, not redundant calls
        self._lock = threading.Lock()
        self.trajectories = counter(m.TRAJECTORIES)
        self.steps = histogram(m.STEPS)
        self.llm_calls = histogram(m.LLM_CALLS)
        self.duration = histogram(m.DURATION)
        self.cost = histogram(m.COST)
        self.tokens = counter(m.TOKENS)
        self.with_tool_errors = counter(m.WITH_TOOL_ERRORS)
        self.redundant = counter(m.REDUNDANT)
        self._plain = PlainCollector((self.trajectories, self.steps, self.llm_calls, self.duration, self.cost,
                                      self.tokens, self.with_tool_errors, self.redundant), self._lock)
        r.register(self._plain)
        self.violations = Counter(m.VIOLATIONS.name, m.VIOLATIONS.doc, m.VIOLATIONS.labels, registry=r)
        self.budget_breaches = Counter(m.BUDGET_BREACHES.name, m.BUDGET_BREACHES.doc, m.BUDGET_BREACHES.labels,
                                       registry=r)
        self.open_trajectories = Gauge(m.OPEN_TRAJECTORIES.name, m.OPEN_TRAJECTORIES.doc, registry=r)
        # calls and runs the checks cannot see into (no arguments, no token counts): blindspots.py
        self.unchecked = UncheckedCalls(r, checked_tools(known_tools), self.tool_label)
        # what the agent did after each failed tool call (model/recovery.py): its own collector
        self.recoveries = counter(m.RECOVERIES)
        self._plain_recoveries = PlainCollector((self.recoveries,), self._lock)
        r.register(self._plain_recoveries)
        # the path mix: runs that called each tool (drift alert), runs that looped on one call
        self.runs_with_tool = counter(m.RUNS_WITH_TOOL)
        self.loops = counter(m.LOOPS)
        self._expected = tuple(sorted(safe_label(t) for t in expected_tools))
        self._loop_repeats = loop_repeats
        self._plain_paths = PlainCollector((self.runs_with_tool, self.loops), self._lock)
        r.register(self._plain_paths)
        if self._expected:
            expected = Gauge(m.EXPECTED_TOOL.name, m.EXPECTED_TOOL.doc, m.EXPECTED_TOOL.labels, registry=r)
            for tool in self._expected:
                expected.labels(tool).set(1)
        self._agents: dict[tuple[str, str], bool] = {}
        self._rows: dict[tuple[str, str, str], _Row] = {}
        self._guard: GuardMetrics | None = None
        self._bounds = (self.steps.bounds, self.llm_calls.bounds, self.duration.bounds, self.cost.bounds)

    # --- per-agent children, bound once ---------------------------------------------------------
    def _agent(self, service: str, agent: str) -> None:
        """Series known in advance for an agent (safe, capped labels), exported at 0 from its first sight."""
        key = (service, agent)
        if key in self._agents:
            return
        with self._lock:
            self.steps.touch(key)
            self.llm_calls.touch(key)
            for outcome in OUTCOMES:
                self.trajectories.touch((service, agent, outcome))
                self.with_tool_errors.touch((service, agent, outcome))
            self.tokens.touch((service, agent, "input"))
            self.tokens.touch((service, agent, "output"))
            for tool in self._expected:  # at 0 from the agent's first run: a share that falls to 0 shows
                self.runs_with_tool.touch((service, agent, tool))
        for rule, severity in self._rules.items():
            self.violations.labels(service, agent, rule, "", severity)
        for budget in BUDGETS:
            self.budget_breaches.labels(service, agent, budget)
        self._agents[key] = True

    def tool_calls(self, counts: dict[tuple[str, str, str, bool], int]) -> Metric:
        """``agenteval_tool_calls_total`` from the engine's plain counts (kept off the hot path)."""
        family = CounterMetricFamily(m.TOOL_CALLS.name, m.TOOL_CALLS.doc, labels=m.TOOL_CALLS.labels)
        summed: dict[tuple[str, str, str, str], int] = {}
        for (service, agent, tool, ok), n in list(counts.items()):
            s, a = self.agent_label(service, agent, count=False)  # scrape time: counted where they were made
            key = (s, a, self.tool_label(tool, count=False), "ok" if ok else "error")
            summed[key] = summed.get(key, 0) + n
        for labels, n in sorted(summed.items()):
            family.add_metric(labels, n)
        return family

    def violation(self, v: Violation) -> None:
        service, agent = self.agent_label(v.service_name, v.agent)
        self._agent(service, agent)
        trace = v.trace_id
        self.violations.labels(service, agent, safe_label(v.rule), self.tool_label(v.tool), safe_label(v.severity)).inc(
            exemplar={"trace_id": trace} if len(trace) <= MAX_LABEL_LEN and trace.isascii() else None)
        if v.rule == "budget_breach":
            self.budget_breaches.labels(service, agent, safe_label(v.details.get("budget", "unknown"))).inc()

    def guard(self) -> GuardMetrics:
        """The guard's counters (guard/guard.py), declared on first use: a monitor without a guard exports none."""
        with self._lock:
            g = self._guard
            if g is None:
                g = self._guard = GuardMetrics(self.registry, self.agent_label, self.tool_label)
        return g

    def after_fork(self) -> None:
        """In a forked child: a fresh lock (the parent's may have been held at the fork)."""
        self._lock = threading.Lock()
        self._plain.relock(self._lock)
        self._plain_recoveries.relock(self._lock)
        self._plain_paths.relock(self._lock)

    def finished(self, t: Trajectory) -> None:
        """One finished trajectory: four histograms and the counters, through the series and keys
        bound once per (service, agent, outcome), under one lock."""
        by_tool: dict[str, int] = {}
        for s in t.steps:
            by_tool[s.tool] = by_tool.get(s.tool, 0) + 1
        # a call can only repeat when some tool ran twice
        redundant = redundant_calls(t, self._writes) if len(by_tool) < len(t.steps) else []
        looping = looping_calls(t, self._loop_repeats, by_tool) if by_tool else []
        tool_label = self.tool_label
        okey = (t.service_name, t.agent_name, t.outcome)
        row = self._rows.get(okey)
        if row is None:
            row = self._row(okey)
        cells = row.tool_runs
        used: list[Cell] = []  # agenteval_runs_with_tool_total: one count per distinct tool, its cell bound once
        for tool in by_tool:
            cell = cells.get(tool)
            if cell is None:
                cell = self._tool_runs_cell(row, tool)
            used.append(cell)
        trace, now = t.trace_hex, time.time()
        bounds = self._bounds
        lock = self._lock
        lock.acquire()
        try:
            record(row.steps, bounds[0], t.tool_calls, trace, now)
            record(row.llm_calls, bounds[1], t.llm_calls, trace, now)
            record(row.duration, bounds[2], t.duration_s, trace, now)
            record(row.cost, bounds[3], t.cost_usd, trace, now)
            row.trajectories.value += 1
            if t.input_tokens:
                row.input_tokens.value += t.input_tokens
            if t.output_tokens:
                row.output_tokens.value += t.output_tokens
            if t.tool_errors:
                row.with_tool_errors.value += 1
            for tool in redundant:
                self.redundant.inc((row.service, row.agent, tool_label(tool)))
            for cell in used:
                cell.value += 1
            for tool in looping:
                self.loops.inc((row.service, row.agent, tool_label(tool)))
        finally:
            lock.release()
        self.unchecked.finished(t, row.service, row.agent)
        if t.tool_errors:
            self._recoveries(t, row.service, row.agent)

    def _tool_runs_cell(self, row: _Row, tool: str) -> Cell:
        """The runs-with-tool cell of ``tool`` for ``row``, remembered (bounded) when the name is its own label."""
        label = self.tool_label(tool)
        with self._lock:
            cell = self.runs_with_tool.cell((row.service, row.agent, label))
        if label == tool and len(row.tool_runs) < ROW_TOOLS:
            row.tool_runs[tool] = cell
        return cell

    def _recoveries(self, t: Trajectory, service: str, agent: str) -> None:
        """``agenteval_tool_error_recoveries_total``: one count per failed step, by what came next."""
        found = [(self.tool_label(r.tool), r.label) for r in recoveries(t.steps)]
        with self._lock:
            for tool, nxt in found:
                self.recoveries.inc((service, agent, tool, nxt))

    def _row(self, okey: tuple[str, str, str]) -> _Row:
        """The series and counter keys a (service, agent, outcome) writes to, bound once (bounded:
        labels safe and capped; only names that are their own label are remembered by that key)."""
        raw_service, raw_agent, outcome = okey
        service, agent = self.agent_label(raw_service, raw_agent)
        if (service, agent) not in self._agents:
            self._agent(service, agent)
        key = (service, agent)
        lkey = (service, agent, safe_label(outcome))
        with self._lock:
            row = _Row(service, agent, self.steps.series(key), self.llm_calls.series(key),
                       self.duration.series(lkey), self.cost.series(lkey), self.trajectories.cell(lkey),
                       self.with_tool_errors.cell(lkey), self.tokens.cell((service, agent, "input")),
                       self.tokens.cell((service, agent, "output")))
        if len(self._rows) < ROW_CACHE and service == raw_service and agent == raw_agent:
            self._rows[okey] = row  # names that are their own label: a folded one comes back here, counted
        return row


class _Row:
    """What one (service, agent, outcome) writes to: its histogram series and counter cells."""

    __slots__ = ("agent", "cost", "duration", "input_tokens", "llm_calls", "output_tokens", "service", "steps",
                 "tool_runs", "trajectories", "with_tool_errors")

    def __init__(self, service: str, agent: str, steps: Series, llm_calls: Series, duration: Series, cost: Series,
                 trajectories: Cell, with_tool_errors: Cell, input_tokens: Cell, output_tokens: Cell) -> None:
        self.service = service  # the labels (safe, capped) the row writes under
        self.agent = agent
        self.steps = steps
        self.llm_calls = llm_calls
        self.duration = duration
        self.cost = cost
        self.trajectories = trajectories
        self.with_tool_errors = with_tool_errors
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.tool_runs: dict[str, Cell] = {}  # raw tool name -> its agenteval_runs_with_tool_total cell


class GuardMetrics:
    """What the guard decided: calls it stopped, calls it would have stopped (``mode: observe``),
    and the times it could not decide. Labels made safe and capped like the violations'."""

    def __init__(self, registry: CollectorRegistry, agent_label: AgentLabels, tool_label: ToolLabels) -> None:
        self._agent_label = agent_label
        self._tool_label = tool_label
        self.blocked = Counter(m.BLOCKED_ACTIONS.name, m.BLOCKED_ACTIONS.doc, m.BLOCKED_ACTIONS.labels,
                               registry=registry)
        self.would_block = Counter(m.GUARD_WOULD_BLOCK.name, m.GUARD_WOULD_BLOCK.doc, m.GUARD_WOULD_BLOCK.labels,
                                   registry=registry)
        self.errors = Counter(m.GUARD_ERRORS.name, m.GUARD_ERRORS.doc, m.GUARD_ERRORS.labels, registry=registry)
        for fail in ("closed", "open"):
            self.errors.labels(fail)
        self._children: dict[tuple[str, str, str, str, bool], Any] = {}  # each series' counter, looked up once

    def stopped(self, service: str, agent: str, rule: str, tool: str, blocked: bool) -> None:
        key = (service, agent, rule, tool, blocked)
        child = self._children.get(key)
        if child is None:
            s, a = self._agent_label(service, agent)
            t = self._tool_label(tool)
            child = (self.blocked if blocked else self.would_block).labels(s, a, safe_label(rule), t)
            if OTHER not in (s, a, t) and len(self._children) < MAX_GUARD_SERIES:
                self._children[key] = child  # a folded label is looked up each time: its overflow is counted
        child.inc()

