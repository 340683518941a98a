"""Matching a run's tool calls to a reference path: an optimal assignment, never greedy.

A greedy matcher gives each call the first reference step it fits and can strand a later call
that fitted only that step; here the assignment maximises the number of matched reference
steps, then prefers successful calls and earlier calls. Without order constraints this is a
min-cost assignment (Hungarian method, below). With an order (``in_order``, ``exact``) or
explicit ``ordering`` constraints, a dynamic programme over the run keeps, for each set of
matched steps closed under "comes before", the cheapest way to have matched them: exact, and
small, because a total order has only ``m + 1`` such sets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..model.trajectory import rebuild
from .cases.references import ReferencePath

UNMATCHED = 10**9  # the cost of a reference step left unmatched; above any sum of pair costs
FAILED = 1000  # a failed call may match, but a successful one is preferred
MAX_STATES = 50_000  # per run position; beyond this the DP keeps the best states only


@dataclass(slots=True)
class Match:
    """The assignment of run calls to reference steps, and whether it covers the reference."""

    path: ReferencePath
    step_of: dict[int, int] = field(default_factory=dict)  # run call index -> reference position
    coverage: bool = True
    reasons: list[str] = field(default_factory=list)
    missing: list[int] = field(default_factory=list)  # reference positions with no call
    approximate: bool = False  # the DP had to prune (very large references only)

    def __init__(self, path: ReferencePath, step_of: dict[int, int] | None = None, coverage: bool = True,
                 reasons: list[str] | None = None, missing: list[int] | None = None,
                 approximate: bool = False) -> None:  # written out: compiled, it runs natively
        self.path = path
        self.step_of = {} if step_of is None else step_of
        self.coverage = coverage
        self.reasons = [] if reasons is None else reasons
        self.missing = [] if missing is None else missing
        self.approximate = approximate

    def __reduce__(self) -> tuple[Any, ...]:
        return rebuild(self)


def fitting_steps(path: ReferencePath, calls: Sequence[Any]) -> list[list[int]]:
    """For each run call, the reference steps it satisfies (tool and arguments).

    Arguments are parsed only for calls to a tool the reference names.
    """
    by_tool = path.positions
    exps = path.calls
    out: list[list[int]] = []
    for c in calls:
        js = by_tool.get(c.tool)
        if not js:
            out.append([])
            continue
        args = c.arguments
        out.append([j for j in js if exps[j].accepts(args)])
    return out


def _pair_cost(call: Any, i: int) -> int:
    return (0 if call.ok else FAILED) + i


def match(path: ReferencePath, calls: Sequence[Any], excluded: frozenset[int] = frozenset(),
          fits: list[list[int]] | None = None) -> Match:
    """Match ``calls`` (objects with ``tool``, ``arguments``, ``ok``) against ``path``.

    ``excluded`` calls (duplicate writes) never match a step but still count as run calls.
    ``fits`` is :func:`fitting_steps` when the caller has it already.
    """
    if fits is None:
        fits = fitting_steps(path, calls)
    usable = [None if i in excluded else c for i, c in enumerate(calls)]
    m = len(path.calls)
    ok = [[False] * len(calls) for _ in range(m)]
    for i, js in enumerate(fits):
        if i not in excluded:
            for j in js:
                ok[j][i] = True
    result = Match(path)
    if m and calls:
        before = path.order_pairs
        if before:
            result.step_of, result.approximate = _ordered(ok, usable, m, before)
        else:
            result.step_of = _assignment(ok, usable, m)
    _judge(result, calls, ok)
    return result


def _judge(result: Match, calls: Sequence[Any], ok: list[list[bool]]) -> None:
    path = result.path
    matched = set(result.step_of.values())
    result.missing = [j for j in range(len(path.calls)) if j not in matched]
    mode = path.order
    if mode != "subset":
        for j in result.missing:
            exp = path.calls[j]
            seen = any(ok[j][i] and i not in result.step_of for i in range(len(calls)))  # a free call fits
            if seen and (mode in ("exact", "in_order") or path.before):
                result.reasons.append(f"required call {exp.label()} is out of order")
            else:
                result.reasons.append(f"required call {exp.label()} is missing")
    if mode in ("exact", "unordered", "subset"):
        for i, c in enumerate(calls):
            if i not in result.step_of and c.tool not in path.allowed_extras:
                result.reasons.append(f"step {i + 1} {c.tool} is not in the reference (order: {mode})")
    result.coverage = not result.reasons


# --- no order: min-cost assignment ---------------------------------------------------------------

def _assignment(ok: list[list[bool]], calls: Sequence[Any], m: int) -> dict[int, int]:
    n = len(calls)
    size = max(m, n)
    cost = [[0] * size for _ in range(size)]
    for j in range(size):
        row = cost[j]
        for i in range(size):
            if j < m:
                row[i] = _pair_cost(calls[i], i) if i < n and ok[j][i] else UNMATCHED
            # a padding row (j >= m) takes a call for free: the call stays unmatched
    col_of_row = hungarian(cost)
    return {i: j for j, i in enumerate(col_of_row) if j < m and i < n and ok[j][i]}


def hungarian(cost: list[list[int]]) -> list[int]:
    """Minimum-cost perfect assignment on a square matrix: ``result[row] = column``.

    The Hungarian method with potentials (Kuhn-Munkres, O(n^3)); pure Python, for the small
    matrices of one run against one reference.
    """
    n = len(cost)
    if n == 0:
        return []
    inf = float("inf")
    u = [0.0] * (n + 1)  # row potentials
    v = [0.0] * (n + 1)  # column potentials
    row_at = [0] * (n + 1)  # row assigned to each column (1-based, 0 = none)
    way = [0] * (n + 1)
    for r in range(1, n + 1):
        row_at[0] = r
        col = 0
        min_to = [inf] * (n + 1)
        used = [False] * (n + 1)
        while True:
            used[col] = True
            r0 = row_at[col]
            delta = inf
            next_col = 0
            crow = cost[r0 - 1]
            ur0 = u[r0]
            for c in range(1, n + 1):
                if not used[c]:
                    cur = crow[c - 1] - ur0 - v[c]
                    if cur < min_to[c]:
                        min_to[c] = cur
                        way[c] = col
                    if min_to[c] < delta:
                        delta = min_to[c]
                        next_col = c
            for c in range(n + 1):
                if used[c]:
                    u[row_at[c]] += delta
                    v[c] -= delta
                else:
                    min_to[c] -= delta
            col = next_col
            if row_at[col] == 0:
                break
        while col:
            prev = way[col]
            row_at[col] = row_at[prev]
            col = prev
    result = [0] * n
    for c in range(1, n + 1):
        result[row_at[c] - 1] = c - 1
    return result


# --- an order: DP over sets of matched steps closed under "comes before" ---------------------------

def _ordered(ok: list[list[bool]], calls: Sequence[Any], m: int,
             before: frozenset[tuple[int, int]]) -> tuple[dict[int, int], bool]:
    preds = [0] * m
    for a, b in before:
        preds[b] |= 1 << a
    # state: mask of matched steps -> (cost, back-pointer index into history)
    states: dict[int, tuple[int, int]] = {0: (0, -1)}
    history: list[tuple[int, int, int]] = []  # (previous history index, call index, step)
    approximate = False
    for i, call in enumerate(calls):
        if call is None:
            continue
        fits = [j for j in range(m) if ok[j][i]]
        if not fits:
            continue
        pc = _pair_cost(call, i)
        nxt = dict(states)  # skipping the call keeps every state
        for mask, (cost, back) in states.items():
            for j in fits:
                bit = 1 << j
                if mask & bit or preds[j] & ~mask:
                    continue
                new = mask | bit
                c = cost + pc
                old = nxt.get(new)
                if old is None or c < old[0]:
                    history.append((back, i, j))
                    nxt[new] = (c, len(history) - 1)
        if len(nxt) > MAX_STATES:
            approximate = True
            best = sorted(nxt.items(), key=lambda kv: (-kv[0].bit_count(), kv[1][0]))[:MAX_STATES]
            nxt = dict(best)
        states = nxt
    mask, (_, back) = min(states.items(), key=lambda kv: ((m - kv[0].bit_count()) * UNMATCHED + kv[1][0]))
    step_of: dict[int, int] = {}
    while back != -1:
        prev, i, j = history[back]
        step_of[i] = j
        back = prev
    return step_of, approximate
