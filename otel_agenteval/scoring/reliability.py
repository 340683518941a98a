"""Reliability across trials, and what it cost: pass^k, pass@k, cost per success, percentiles.

pass^k for one case with ``n`` trials and ``c`` passes is ``C(c, k) / C(n, k)``: the chance
that ``k`` trials drawn from the ``n`` all pass. Over cases it is the mean. pass@k
(``1 - C(n-c, k) / C(n, k)``) is the flattering contrast: at least one of ``k`` passes.
Capability and regression cases are summarised apart and never mixed into one number.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from math import comb
from typing import Any, Protocol

from ..model.summary import percentile
from .cases.references import ResolvedCase


class ScoredRun(Protocol):
    """A scored run as the summaries see it: a :class:`~.run_score.RunScore` or a spooled record."""

    trial: int | None
    verdict: str
    cost_usd: float
    duration_s: float
    run_steps: int
    reference_steps: int
    tool_errors: int
    recovered: int
    redundant_calls: int
    coverage: bool
    argument_accuracy: float | None
    extra_steps: int
    duplicate_writes: int

    @property
    def passed(self) -> bool: ...

    def to_dict(self, show_arguments: bool = False) -> dict[str, Any]: ...

DEFAULT_K_CAP = 32  # without --k-max, curves stop here: nobody reads pass^500


class TrialsError(ValueError):
    """pass^k asked for more trials than a case has."""


def pass_hat_k(n: int, c: int, k: int) -> float:
    """``C(c, k) / C(n, k)``; ``TrialsError`` when ``n < k``."""
    if k < 1:
        raise TrialsError(f"k must be at least 1, got {k}")
    if n < k:
        raise TrialsError(f"pass^{k} needs at least {k} trials, the case has {n}")
    return comb(c, k) / comb(n, k)


def pass_at_k(n: int, c: int, k: int) -> float:
    """``1 - C(n - c, k) / C(n, k)``; ``TrialsError`` when ``n < k``."""
    if k < 1 or n < k:
        raise TrialsError(f"pass@{k} needs at least {k} trials, the case has {n}")
    return 1.0 - comb(n - c, k) / comb(n, k)


def mean_pass_hat_k(counts: Iterable[tuple[int, int]], k: int) -> float:
    """Mean of per-case pass^k over ``(n, c)`` pairs."""
    values = [pass_hat_k(n, c, k) for n, c in counts]
    if not values:
        raise TrialsError("no cases with trials")
    return sum(values) / len(values)


@dataclass(slots=True)
class CaseResult:
    case: ResolvedCase
    runs: list[ScoredRun] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.runs)

    @property
    def c(self) -> int:
        return sum(r.passed for r in self.runs)

    def curve(self, k_max: int | None = None) -> dict[int, float]:
        """pass^k for k = 1 .. ``k_max`` (default: up to n, at most ``DEFAULT_K_CAP``)."""
        n, c = self.n, self.c
        top = min(n, DEFAULT_K_CAP) if k_max is None else k_max
        return {k: pass_hat_k(n, c, k) for k in range(1, top + 1)}

    def pass_at(self, k_max: int | None = None) -> dict[int, float]:
        n, c = self.n, self.c
        top = min(n, DEFAULT_K_CAP) if k_max is None else k_max
        return {k: pass_at_k(n, c, k) for k in range(1, top + 1)}

    def failed(self, k: int, threshold: float) -> bool:
        """The gate: pass^k below the threshold (a case with fewer than k trials fails too)."""
        if self.n < k:
            return True
        return pass_hat_k(self.n, self.c, k) < threshold


def efficiency(runs: Sequence[ScoredRun]) -> dict[str, Any]:
    """Recovery rate, step efficiency and redundant-call rate over ``runs`` (a case, or a set).

    Recovery: (tried_other + successful retries) over tool errors, pooled; step efficiency:
    the mean of reference length over run length (at most 1); redundant calls: calls repeating
    an earlier identical call of the run, over calls, pooled. ``None`` where nothing counts.
    """
    errors = recovered = calls = redundant = 0
    eff: list[float] = []
    for r in runs:  # one pass: a set has every run of its cases
        errors += r.tool_errors
        recovered += r.recovered
        redundant += r.redundant_calls
        steps = r.run_steps
        calls += steps - 1
        if steps:
            ratio = r.reference_steps / steps
            eff.append(ratio if ratio < 1.0 else 1.0)
    return {
        "tool_errors": errors, "recovered": recovered,
        "recovery_rate": round(recovered / errors, 4) if errors else None,
        "step_efficiency": round(sum(eff) / len(eff), 4) if eff else None,
        "redundant_calls": redundant,
        "redundant_call_rate": round(redundant / calls, 4) if calls else None,
    }


def four_numbers(runs: Sequence[ScoredRun]) -> dict[str, Any]:
    """The four per-run numbers over a set: the share of runs with full coverage, the mean argument
    accuracy (of runs that called a reference tool), mean extra steps, and duplicate writes in all."""
    accuracies = [r.argument_accuracy for r in runs if r.argument_accuracy is not None]
    return {
        "coverage": round(sum(r.coverage for r in runs) / len(runs), 4) if runs else None,
        "argument_accuracy": round(sum(accuracies) / len(accuracies), 4) if accuracies else None,
        "extra_steps_mean": round(sum(r.extra_steps for r in runs) / len(runs), 2) if runs else None,
        "duplicate_writes": sum(r.duplicate_writes for r in runs),
        "runs_with_duplicate_writes": sum(1 for r in runs if r.duplicate_writes),
    }


def _rounded(d: dict[int, float]) -> dict[str, float]:
    return {str(k): round(v, 4) for k, v in d.items()}


def set_summary(results: Sequence[CaseResult], k_max: int | None = None) -> dict[str, Any]:
    """One set's numbers (capability or regression): reliability curve, cost, latency, steps.

    The curve runs to ``k_max`` or, by default, to the fewest trials any case with runs has
    (at most ``DEFAULT_K_CAP``).
    """
    with_runs = [r for r in results if r.n]
    runs = [run for r in with_runs for run in r.runs]
    passes = sum(run.passed for run in runs)
    top = k_max if k_max is not None else min(min((r.n for r in with_runs), default=0), DEFAULT_K_CAP)
    counts = [(r.n, r.c) for r in with_runs]
    curve = {k: mean_pass_hat_k(counts, k) for k in range(1, top + 1)} if with_runs else {}
    at = {k: sum(pass_at_k(n, c, k) for n, c in counts) / len(counts) for k in range(1, top + 1)} if with_runs else {}
    costs = [run.cost_usd for run in runs]
    latency = [run.duration_s for run in runs]
    steps = [float(run.run_steps) for run in runs]
    total_cost = sum(costs)
    verdicts = Counter(run.verdict for run in runs)
    return {
        "cases": len(results),
        "cases_without_runs": [r.case.id for r in results if not r.n],
        "runs": len(runs),
        "passes": passes,
        "verdicts": {v: verdicts.get(v, 0) for v in ("pass", "warn", "fail")},
        "pass_rate": round(curve[1], 4) if curve else None,
        "pass_hat_k": _rounded(curve),
        "pass_at_k": _rounded(at),
        "cost_usd": {
            "total": round(total_cost, 6),
            "per_success": round(total_cost / passes, 6) if passes else None,
            "p50": round(percentile(costs, 50), 6),
            "p95": round(percentile(costs, 95), 6),
        },
        "latency_s": {"p50": round(percentile(latency, 50), 3), "p95": round(percentile(latency, 95), 3)},
        "steps": {"p50": percentile(steps, 50), "p95": percentile(steps, 95), "max": max(steps, default=0.0)},
        "efficiency": efficiency(runs),
        "numbers": four_numbers(runs),
    }


def check_trials(results: Sequence[CaseResult], k: int) -> list[str]:
    """Cases (with runs) that have fewer than ``k`` trials: pass^k is undefined for them."""
    return [f"case {r.case.id}: {r.n} trials, fewer than k={k}" for r in results if 0 < r.n < k]
