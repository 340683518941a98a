"""What scoring one run gives: a :class:`RunScore` (verdict, reasons, the four numbers) and its
per-step table of :class:`StepMark`; both as dicts for the reports. ``score.py`` fills them in.

Both are compiled (``_build.py``) and write their ``__init__`` out, since a generated one would run
as Python; ``rebuild`` gives them ``__reduce__`` (copy and pickle) in both builds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..model.recovery import Recovery, recovery_rate
from ..model.trajectory import parse_arguments, rebuild
from .transcript import hidden


@dataclass(slots=True)
class StepMark:
    step: int  # 1-based position in the run
    tool: str
    ok: bool
    mark: str  # "matches step N" | "extra" | "extra (allowed)" | "wrong argument" | "DUPLICATE WRITE" | "after error"
    reference_step: int | None
    raw_arguments: Any  # parsed only when a report shows the step
    detail: str | None = None

    # written out (dataclass keeps it): compiled, a generated __init__ would run as Python
    def __init__(self, step: int, tool: str, ok: bool, mark: str, reference_step: int | None, raw_arguments: Any,
                 detail: str | None = None) -> None:
        self.step = step
        self.tool = tool
        self.ok = ok
        self.mark = mark
        self.reference_step = reference_step
        self.raw_arguments = raw_arguments
        self.detail = detail

    def __reduce__(self) -> tuple[Any, ...]:
        return rebuild(self)

    @property
    def arguments(self) -> dict[str, Any]:
        return parse_arguments(self.raw_arguments)

    def to_dict(self, show_arguments: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {"step": self.step, "tool": self.tool, "ok": self.ok, "mark": self.mark,
                             "reference_step": self.reference_step}
        if self.detail:
            d["detail"] = self.detail
        if show_arguments:
            d["arguments"] = self.arguments
        return d


@dataclass(slots=True)
class RunScore:
    case_id: str
    trace_id: str
    trial: int | None
    agent: str
    verdict: str
    reasons: list[str]
    coverage: bool
    argument_accuracy: float | None
    extra_steps: int
    duplicate_writes: int
    run_steps: int  # tool calls + the final answer
    reference_steps: int  # required calls + the final answer
    reference: int  # 0 = the main reference, i = alternative i
    steps: list[StepMark]
    first_divergence: str | None
    violations: list[tuple[str, str, str | None]] = field(default_factory=list)  # (rule, severity, span id)
    cost_usd: float = 0.0
    duration_s: float = 0.0
    outcome: str = "unknown"
    recoveries: list[Recovery] = field(default_factory=list)  # one per failed tool call
    redundant_calls: int = 0  # calls repeating an earlier successful identical call of this run
    messages: list[dict[str, Any]] | None = None  # the run's messages, where spans captured them

    def __init__(self, case_id: str, trace_id: str, trial: int | None, agent: str, verdict: str, reasons: list[str],
                 coverage: bool, argument_accuracy: float | None, extra_steps: int, duplicate_writes: int,
                 run_steps: int, reference_steps: int, reference: int, steps: list[StepMark],
                 first_divergence: str | None, violations: list[tuple[str, str, str | None]] | None = None,
                 cost_usd: float = 0.0, duration_s: float = 0.0, outcome: str = "unknown",
                 recoveries: list[Recovery] | None = None, redundant_calls: int = 0,
                 messages: list[dict[str, Any]] | None = None) -> None:
        self.case_id = case_id
        self.trace_id = trace_id
        self.trial = trial
        self.agent = agent
        self.verdict = verdict
        self.reasons = reasons
        self.coverage = coverage
        self.argument_accuracy = argument_accuracy
        self.extra_steps = extra_steps
        self.duplicate_writes = duplicate_writes
        self.run_steps = run_steps
        self.reference_steps = reference_steps
        self.reference = reference
        self.steps = steps
        self.first_divergence = first_divergence
        self.violations = [] if violations is None else violations
        self.cost_usd = cost_usd
        self.duration_s = duration_s
        self.outcome = outcome
        self.recoveries = [] if recoveries is None else recoveries
        self.redundant_calls = redundant_calls
        self.messages = messages

    def __reduce__(self) -> tuple[Any, ...]:
        return rebuild(self)

    @property
    def tool_errors(self) -> int:
        return len(self.recoveries)

    @property
    def recovered(self) -> int:
        return sum(1 for r in self.recoveries if r.recovered)

    @property
    def recovery_rate(self) -> float | None:
        """(tried_other + successful retries) / tool errors; ``None`` without errors."""
        return recovery_rate(self.recoveries)

    @property
    def tool_calls(self) -> int:
        return self.run_steps - 1

    @property
    def step_efficiency(self) -> float:
        """Reference length over run length (each with its final answer), at most 1."""
        return _step_efficiency(self.reference_steps, self.run_steps)

    @property
    def redundant_call_rate(self) -> float | None:
        """Calls repeating an earlier successful identical call, over calls; ``None`` without calls."""
        calls = self.tool_calls
        return self.redundant_calls / calls if calls else None

    @property
    def passed(self) -> bool:
        """A run succeeds (for pass^k) when its verdict is pass or warn."""
        return self.verdict != "fail"

    def to_dict(self, show_arguments: bool = False) -> dict[str, Any]:
        d = {
            "trace_id": self.trace_id,
            "trial": self.trial,
            "agent": self.agent,
            "verdict": self.verdict,
            "reasons": list(self.reasons),
            "coverage": self.coverage,
            "argument_accuracy": _round(self.argument_accuracy),
            "extra_steps": self.extra_steps,
            "duplicate_writes": self.duplicate_writes,
            "run_steps": self.run_steps,
            "reference_steps": self.reference_steps,
            "reference": "main" if self.reference == 0 else f"alternative {self.reference}",
            "first_divergence": self.first_divergence,
            "violations": [{"rule": r, "severity": sev, "span_id": sid} for r, sev, sid in self.violations],
            "cost_usd": _rounded(self.cost_usd, 6),
            "duration_s": _rounded(self.duration_s, 3),
            "outcome": self.outcome,
            "recovery": self._recovery_dict(),
            "step_efficiency": _efficiency(self.reference_steps, self.run_steps),
            "redundant_calls": self.redundant_calls,
            "redundant_call_rate": _round(self.redundant_call_rate),
            "steps": [s.to_dict(show_arguments) for s in self.steps],
        }
        if self.messages is not None:
            d["messages"] = self.messages if show_arguments else hidden(self.messages)
        return d

    def _recovery_dict(self) -> dict[str, Any]:
        found = self.recoveries
        if not found:
            return {"tool_errors": 0, "recovered": 0, "rate": None, "next": []}
        return {"tool_errors": len(found), "recovered": self.recovered, "rate": _round(self.recovery_rate),
                "next": [{"step": r.index + 1, "tool": r.tool, "next": r.next, "retry_ok": r.retry_ok} for r in found]}


def _step_efficiency(reference_steps: int, run_steps: int) -> float:
    return min(1.0, reference_steps / run_steps)


# (reference steps, run steps) -> the rounded step efficiency: a few dozen pairs in any input
_EFFICIENCY: dict[tuple[int, int], float] = {}
_EFFICIENCY_KEPT = 4096


def _efficiency(reference_steps: int, run_steps: int) -> float:
    key = (reference_steps, run_steps)
    value = _EFFICIENCY.get(key)
    if value is None:
        value = _rounded(_step_efficiency(reference_steps, run_steps), 4)
        if len(_EFFICIENCY) < _EFFICIENCY_KEPT:
            _EFFICIENCY[key] = value
    return value


def _round(v: float | None) -> float | None:
    return None if v is None else _rounded(v, 4)


def _rounded(v: float, digits: int) -> float:
    """``round(v, digits)``, skipped for 0 and 1 (common here, and their own rounding): a float's
    ``round`` with digits goes through its decimal string, the dearest call in a run's dict."""
    return v if v == 0.0 or v == 1.0 else round(v, digits)
