"""The closing summary shared by ``demo`` and ``replay``: runs, outcomes, steps, cost, violations."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from .trajectory import Trajectory
from .violation import Violation


def counted_percentile(counts: Counter[int], q: float) -> float:
    """Nearest-rank percentile over ``{value: how many}``: exact, in memory bounded by distinct values."""
    total = sum(counts.values())
    if not total:
        return 0.0
    rank = max(1, math.ceil(q / 100 * total))
    seen = 0
    for value in sorted(counts):
        seen += counts[value]
        if seen >= rank:
            return float(value)
    return float(max(counts))


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return float(ordered[rank - 1])


class RunSummary:
    """Collects finished trajectories and violations; renders a table or a dict."""

    def __init__(self, *, outcome_rule: bool = True, priced: bool = True) -> None:
        self.outcome_rule = outcome_rule  # the policy says when a run succeeded (outcome.success_when)
        self.priced = priced  # the policy has prices (pricing:)
        self.runs = 0
        self.outcomes: Counter[str] = Counter()
        self.steps: Counter[int] = Counter()  # steps -> runs: constant memory for demo --forever
        self.llm_calls = 0
        self.cost_total = 0.0
        self.tokens = 0
        self.tool_errors = 0
        self.violations: Counter[str] = Counter()
        self.critical = 0
        self.by_agent: Counter[str] = Counter()

    def add_trajectory(self, t: Trajectory) -> None:
        self.runs += 1
        self.outcomes[t.outcome] += 1
        self.steps[t.tool_calls] += 1
        self.llm_calls += t.llm_calls
        self.cost_total += t.cost_usd
        self.tokens += t.input_tokens + t.output_tokens
        self.tool_errors += t.tool_errors
        self.by_agent[t.agent_name] += 1

    def add_violation(self, v: Violation) -> None:
        self.violations[v.rule] += 1
        if v.severity == "critical":
            self.critical += 1

    @property
    def cost_per_success(self) -> float | None:
        ok = self.outcomes.get("success", 0)
        return self.cost_total / ok if ok else None

    def to_dict(self) -> dict[str, Any]:
        steps = self.steps
        return {
            "runs": self.runs,
            "outcomes": dict(sorted(self.outcomes.items())),
            "agents": dict(sorted(self.by_agent.items())),
            "steps": {
                "p50": counted_percentile(steps, 50),
                "p95": counted_percentile(steps, 95),
                "p99": counted_percentile(steps, 99),
                "max": float(max(steps)) if steps else 0.0,
            },
            "llm_calls_total": self.llm_calls,
            "tokens_total": self.tokens,
            "tool_errors": self.tool_errors,
            "cost_total_usd": round(self.cost_total, 6),
            "cost_per_success_usd": None if self.cost_per_success is None else round(self.cost_per_success, 6),
            "violations": dict(sorted(self.violations.items())),
            "critical_violations": self.critical,
        }

    def render_table(self) -> str:
        d = self.to_dict()
        rows: list[tuple[str, str]] = [("runs, by outcome", str(d["runs"]))]
        for outcome, n in d["outcomes"].items():
            label = "unknown (no outcome on the run's span)" if outcome == "unknown" else outcome
            why = " (and no outcome: in the policy)" if outcome == "unknown" and not self.outcome_rule else ""
            rows.append((f"  {label}", f"{n} ({n / max(1, d['runs']):.0%}){why}"))
        s = d["steps"]
        rows.append(("steps p50 / p95 / max", f"{s['p50']:g} / {s['p95']:g} / {s['max']:g}"))
        rows.append(("LLM calls", str(d["llm_calls_total"])))
        rows.append(("tokens", str(d["tokens_total"])))
        rows.append(("tool errors", str(d["tool_errors"])))
        unpriced = not d["cost_total_usd"] and d["tokens_total"]
        rows.append(("cost total", f"${d['cost_total_usd']:.4f}" + (
            "" if not unpriced else " (no price for these models: pricing: in the policy)" if self.priced
            else " (no pricing: in the policy)")))
        cps = d["cost_per_success_usd"]
        rows.append(("cost per successful task", "n/a (no success)" if cps is None else f"${cps:.4f}"))
        rows.append(("violations", str(sum(d["violations"].values()))))
        for rule, n in d["violations"].items():
            rows.append((f"  {rule}", str(n)))
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)
