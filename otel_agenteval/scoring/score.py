"""One run against its case: four numbers kept apart, a verdict with reasons, a per-step table.

- ``coverage``: the run holds the reference's calls under its order rule (``match.py``);
- ``argument_accuracy``: calls to a reference tool whose arguments fit some required call of
  that tool, over all calls to a reference tool (``None`` when there were none);
- ``extra_steps``: run length minus reference length, each counting its final answer (so the
  difference in tool calls: 7 steps against 4 is +3, as is 6 calls against 3);
- ``duplicate_writes``: write calls repeating an earlier successful write with identical
  normalised arguments: of this run, or (the engine's ``duplicate_write`` rule, across a
  conversation) of an earlier run; a run with a ``duplicate_write`` violation never shows 0.

Verdict: a duplicate write or a critical violation fails whatever else holds; so do a missing
(or out-of-order, or unexpected) call, argument accuracy below the case threshold and a blown
budget. More extra steps than the warn threshold, a warning violation or an unfinished run warn.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from ..model.recovery import Recovery, recoveries, repeated_calls
from ..model.trajectory import Trajectory
from ..model.violation import Violation
from ..policy.policy import Policy
from .bind import trial_of
from .cases.references import ReferencePath, ResolvedCase
from .match import Match, fitting_steps, match
from .run_score import RunScore, StepMark
from .transcript import messages_of_run

__all__ = ["RunScore", "StepMark", "duplicate_write_steps", "score_run"]  # the records live in run_score.py

_RANK = {"pass": 0, "warn": 1, "fail": 2}


def duplicate_write_steps(t: Trajectory, policy: Policy,
                          path: ReferencePath | None = None) -> tuple[frozenset[int], frozenset[int]]:
    """Write calls repeating an earlier successful identical write in this run: ``(duplicates, expected)``.

    When the reference itself requires the same write ``n`` times, the first ``n`` identical
    calls are expected (returned second), and only the ones after them are duplicates.
    """
    done: dict[tuple[str, str], int] = {}
    dups = set()
    expected = set()
    writes = policy.write_tools
    for i, s in enumerate(t.steps):
        if s.tool not in writes:
            continue
        key = s.call_key
        before = done.get(key, 0)
        if before:
            allowed = _required_times(path, s) if path is not None else 1
            if before >= allowed:
                dups.add(i)
                continue
            expected.add(i)
        if s.ok:
            done[key] = before + 1
    return frozenset(dups), frozenset(expected)


def _required_times(path: ReferencePath, step: Any) -> int:
    return max(1, sum(1 for exp in path.calls if exp.tool == step.tool and exp.accepts(step.arguments)))


def score_run(t: Trajectory, case: ResolvedCase, policy: Policy,
              violations: Sequence[Violation] = (), trial: int | None = None,
              keep_arguments: bool = True) -> RunScore:
    """Score one finished trajectory against every acceptable path of its case; keep the best.

    ``keep_arguments=False`` keeps no argument values in the steps (less memory on big inputs).
    """
    if trial is None:
        trial = trial_of(t)
    best: RunScore | None = None
    # what does not depend on the path: once per run
    found = recoveries(t.steps) if t.tool_errors else None
    redundant = repeated_calls(t.steps)
    messages = messages_of_run(t.root_attributes)
    for path in case.paths:
        s = _score_path(t, case, path, policy, violations, trial, keep_arguments, found, redundant, messages)
        if best is None or _better(s, best):
            best = s
    assert best is not None
    return best


def _better(a: RunScore, b: RunScore) -> bool:
    def key(s: RunScore) -> tuple[Any, ...]:
        return (_RANK[s.verdict], not s.coverage, len(s.reasons), -(s.argument_accuracy or 0.0))
    return key(a) < key(b)


def _score_path(t: Trajectory, case: ResolvedCase, path: ReferencePath, policy: Policy,
                violations: Sequence[Violation], trial: int | None, keep_arguments: bool = True,
                found: list[Recovery] | None = None, redundant: int = 0,
                messages: list[dict[str, Any]] | None = None) -> RunScore:
    calls = t.steps
    dups, repeats = duplicate_write_steps(t, policy, path)
    fitting = fitting_steps(path, calls)
    m: Match = match(path, calls, dups, fitting)
    ref_tools = path.positions

    dup_spans = {format(calls[i].span_id, "016x") for i in dups | repeats}
    # a duplicate the rule found that this run's own check does not (a write of an earlier run in the
    # conversation, or a tool the rule's policy names a write): counted too
    earlier = {v.span_id for v in violations if v.rule == "duplicate_write" and v.span_id not in dup_spans}
    marks: list[StepMark] = []
    to_ref = right = 0
    last_ok: dict[str, bool] = {}
    for i, c in enumerate(calls):
        fits = bool(fitting[i])
        if c.tool in ref_tools:
            to_ref += 1
            right += fits
        detail = None
        j = m.step_of.get(i)
        if i in dups:
            mark = "DUPLICATE WRITE"
        elif j is not None:
            mark = _matches(j + 1)
        elif last_ok.get(c.tool) is False:
            mark = "after error"
        elif c.tool in ref_tools and not fits:
            mark = "wrong argument"
            detail = _wrong_arguments([path.calls[j] for j in ref_tools[c.tool]], c.arguments)
        elif c.tool in path.allowed_extras:
            mark = "extra (allowed)"
        else:
            mark = "extra"
        if earlier and format(c.span_id, "016x") in earlier:
            detail = "duplicate write found by the duplicate_write rule"
        last_ok[c.tool] = c.ok
        marks.append(StepMark(i + 1, c.tool, c.ok, mark, None if j is None else j + 1,
                              c.raw_arguments if keep_arguments else None, detail))

    accuracy = right / to_ref if to_ref else None
    run_steps = max(len(calls), t.tool_calls) + 1  # tool calls the engine had to drop still count
    extra = run_steps - path.length
    th = case.thresholds

    fail: list[str] = []
    warn: list[str] = []
    for i in sorted(dups):
        fail.append(f"duplicate write: step {i + 1} {calls[i].tool} repeats a successful write with identical arguments")
    for v in violations:
        if v.rule == "duplicate_write" and v.span_id in dup_spans:
            continue  # a reason above already, or a repeat the reference requires
        where = f" at {v.tool}" if v.tool else ""
        if v.severity == "critical":
            fail.append(f"critical violation {v.rule}{where}: {v.message}")
        elif v.severity == "warning":
            warn.append(f"violation {v.rule}{where}: {v.message}")
    fail.extend(m.reasons)
    if accuracy is not None and accuracy < th.argument_accuracy:
        fail.append(f"argument accuracy {accuracy:.2f} below {th.argument_accuracy:.2f} ({right} of {to_ref} right)")
    if path.max_steps is not None and run_steps > path.max_steps:
        fail.append(f"over budget: {run_steps} steps > {path.max_steps}")
    if path.max_cost_usd is not None and t.cost_usd > path.max_cost_usd:
        fail.append(f"over budget: cost ${t.cost_usd:.4f} > ${path.max_cost_usd:.4f}")
    if extra > th.warn_extra_steps:
        warn.append(f"{extra} extra steps (more than {th.warn_extra_steps})")
    if t.steps_dropped:
        warn.append(f"{t.steps_dropped} steps past the policy's max_steps_per_trajectory were not kept")
    if t.outcome == "incomplete":
        warn.append("run incomplete: its root span never ended")
    if m.approximate:
        warn.append("matching was approximate (reference too large for an exact search)")
    verdict = "fail" if fail else "warn" if warn else "pass"
    return RunScore(
        case_id=case.id, trace_id=t.trace_hex, trial=trial, agent=t.agent_name, verdict=verdict,
        reasons=fail + warn, coverage=m.coverage, argument_accuracy=accuracy, extra_steps=extra,
        duplicate_writes=len(dups) + len(earlier), run_steps=run_steps, reference_steps=path.length,
        reference=path.index, steps=marks, first_divergence=_divergence(path, m, marks),
        violations=[(v.rule, v.severity, v.span_id) for v in violations],
        cost_usd=t.cost_usd, duration_s=t.duration_s, outcome=t.outcome,
        recoveries=found, redundant_calls=redundant, messages=messages,
    )


@functools.lru_cache(maxsize=256)
def _matches(n: int) -> str:
    return f"matches step {n}"  # one string per step number, shared by every run


def _wrong_arguments(expected: Sequence[Any], arguments: Mapping[str, Any]) -> str:
    """Which argument names differ from the closest required call of the tool (names only;
    ``+name``: an argument the reference does not expect, under ``exact`` or ``subset``)."""
    best: list[str] | None = None
    for exp in expected:
        bad = exp.wrong(arguments)
        if best is None or len(bad) < len(best):
            best = bad
    return "wrong: " + ", ".join(best or [])


def _divergence(path: ReferencePath, m: Match, marks: list[StepMark]) -> str | None:
    """Where the run first left the reference path (``None`` when it never did)."""
    ordered = path.order in ("exact", "in_order")
    nxt = 0
    for s in marks:
        if s.reference_step is not None and (not ordered or s.reference_step == nxt + 1):
            nxt += 1
            continue
        if s.mark == "extra (allowed)":
            continue
        if ordered and s.reference_step is None and nxt < len(path.calls):
            return f"step {s.step}: {s.tool} ({s.mark}) where the reference expects step {nxt + 1} {path.calls[nxt].label()}"
        return f"step {s.step}: {s.tool} ({s.mark})"
    if m.missing:
        j = m.missing[0]
        return f"after step {len(marks)}: reference step {j + 1} {path.calls[j].label()} never came"
    return None
