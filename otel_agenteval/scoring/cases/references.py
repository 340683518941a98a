"""A case resolved for the matcher: each acceptable path (``ReferencePath``), the case (``ResolvedCase``).

What every run's matching and scoring would otherwise rebuild is worked out here once per case:
the required calls ready to compare (``ExpectedCall``, ``arguments.py``), the order pairs, each
tool's positions, the step ceiling. A reference's *length* counts its required calls plus the
final answer.
"""

from __future__ import annotations

import math
from itertools import pairwise
from typing import Any

from .arguments import ExpectedCall
from .schema import Alternative, ArgsOverride, Budget, Call, Case, Normalisers, Reference, Thresholds, ToolNormalisers

DEFAULT_STEPS_FACTOR = 2.0  # the step ceiling without a budget: this many times the reference length


class ReferencePath:
    """One acceptable path (the main reference or an alternative), resolved."""

    __slots__ = ("allowed_extras", "before", "calls", "index", "max_cost_usd", "max_steps", "order", "order_pairs",
                 "positions")

    def __init__(self, alt: Alternative, index: int, main: Reference | None = None,
                 by_tool: ToolNormalisers | None = None, order: str | None = None,
                 steps_factor: float = DEFAULT_STEPS_FACTOR) -> None:
        given = alt.model_fields_set
        base = main if main is not None else alt

        def pick(field: str) -> Any:
            return getattr(alt if field in given or main is None else base, field)

        self.index = index  # 0 = the main reference, i = alternative i
        self.order: str = order or pick("order")  # ``order``: score --match, for every case
        if self.order == "superset":
            self.order = "any_order"
        shared: Normalisers = {**(main.normalise if main is not None else {}), **alt.normalise}
        mode: str = pick("args_match")
        overrides: dict[str, ArgsOverride] = pick("args_match_overrides")
        self.calls = []
        for i, c in enumerate(alt.required):
            over = overrides.get(c.tool)
            keys = over if isinstance(over, list) and c.args_match is None else None
            own = c.args_match or (over if isinstance(over, str) else None) or mode
            specs = {**(by_tool or {}).get(c.tool, {}), **shared, **c.normalise}
            self.calls.append(ExpectedCall(c.tool, c.args, c.name, i, specs, own, keys))
        self.allowed_extras = frozenset(pick("allowed_extras"))
        self.before = _ordering(alt.required, pick("ordering") if "ordering" in given or main is None else [])
        budget: Budget | None = pick("budget")
        length = len(self.calls) + 1
        self.max_steps: int | None = (budget.max_steps if budget is not None and budget.max_steps
                                      else math.ceil(steps_factor * length) if steps_factor > 0 else None)
        self.max_cost_usd = budget.max_cost_usd if budget is not None else None
        # what the matcher and scorer would otherwise rebuild for every run:
        # (earlier, later) positions that must keep their order, and each tool's positions
        m = len(self.calls)
        self.order_pairs = self.before
        if self.order in ("exact", "in_order"):
            self.order_pairs = self.before | {(a, b) for a in range(m) for b in range(a + 1, m)}
        self.positions: dict[str, list[int]] = {}
        for j, exp in enumerate(self.calls):
            self.positions.setdefault(exp.tool, []).append(j)

    @property
    def length(self) -> int:
        """Required calls plus the final answer."""
        return len(self.calls) + 1


def _ordering(calls: list[Call], chains: list[list[str]]) -> frozenset[tuple[int, int]]:
    """``ordering`` chains as pairs (earlier position, later position) of required calls."""
    by_name: dict[str, list[int]] = {}
    for i, c in enumerate(calls):
        by_name.setdefault(c.name, []).append(i)
        if c.id is not None and c.id != c.tool:
            by_name.setdefault(c.tool, []).append(i)
    pairs: set[tuple[int, int]] = set()
    for chain in chains:
        for a, b in pairwise(chain):
            for i in by_name.get(a, ()):
                for j in by_name.get(b, ()):
                    if i != j:
                        pairs.add((i, j))
    return frozenset(pairs)


class ResolvedCase:
    """A case ready to score: its paths (main first) and thresholds."""

    __slots__ = ("id", "paths", "set", "task", "thresholds")

    def __init__(self, case: Case, defaults: Thresholds, by_tool: ToolNormalisers | None = None,
                 order: str | None = None, steps_factor: float = DEFAULT_STEPS_FACTOR) -> None:
        self.id = case.id
        self.task = case.task
        self.set = case.set
        own = case.thresholds
        # a case's thresholds override the file's one field at a time
        self.thresholds = defaults.model_copy(update={k: getattr(own, k) for k in own.model_fields_set}) if own else defaults
        ref = case.reference
        self.paths = [ReferencePath(ref, 0, None, by_tool, order, steps_factor)]
        self.paths += [ReferencePath(a, i + 1, ref, by_tool, order, steps_factor) for i, a in enumerate(ref.alternatives)]
