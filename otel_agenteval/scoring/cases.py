"""The cases file: one reference trajectory (and its alternatives) per case.

YAML (this project's form) or a Google ADK / agentevals ``EvalSet`` JSON (its expected
``tool_uses`` per invocation become the required calls). Unknown keys are errors, reported
with their path, so a typo never silently loosens a reference.

A reference's *length* counts its required calls plus the final answer, and a run's length
counts its tool calls plus its final answer, so ``extra_steps`` is the difference in tool calls.
"""

from __future__ import annotations

import json
import math
import re
from itertools import pairwise
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..policy import _error_lines, load_yaml, with_lines
from .arguments import ExpectedCall
from .errors import CasesError
from .evalset import evalset_to_cases, is_evalset
from .normalise import build

Order = Literal["exact", "in_order", "any_order", "superset", "unordered", "subset"]
ORDERS: tuple[str, ...] = ("exact", "in_order", "any_order", "superset", "unordered", "subset")
# how a call's arguments are compared with a required call's: superset (the call may carry
# more), exact (the same names), subset (the call may carry fewer), ignore (the tool only)
ArgsMatch = Literal["superset", "exact", "subset", "ignore"]
ArgsOverride = ArgsMatch | list[str]  # a mode, or the dotted keys to compare (only those)
DEFAULT_STEPS_FACTOR = 2.0  # the step ceiling without a budget: this many times the reference length
CaseSet = Literal["capability", "regression"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


Normalisers = dict[str, list[str]]
ToolNormalisers = dict[str, Normalisers]  # tool -> argument -> normalisers (the policy's)


def _as_lists(value: Any) -> Any:
    """``{order_id: id}`` is shorthand for ``{order_id: [id]}``."""
    if isinstance(value, dict):
        return {k: [v] if isinstance(v, str) else v for k, v in value.items()}
    return value


def _check_specs(value: Normalisers) -> Normalisers:
    for arg, specs in value.items():
        for spec in specs:
            try:
                build(spec)
            except (ValueError, re.error) as exc:
                raise ValueError(f"{arg}: {exc}") from None
    return value


class Call(_Model):
    """One required call: a tool and the arguments that matter (others are not compared)."""

    tool: str = Field(min_length=1)
    args: dict[str, Any] = {}
    normalise: Normalisers = {}
    id: str | None = None  # a name for ``ordering``; defaults to the tool name
    args_match: ArgsMatch | None = None  # default: the reference's (per tool override, else its args_match)

    _n = field_validator("normalise", mode="before")(_as_lists)
    _c = field_validator("normalise")(_check_specs)

    @property
    def name(self) -> str:
        return self.id or self.tool


class Budget(_Model):
    max_steps: int | None = Field(default=None, gt=0)  # tool calls + the final answer
    max_cost_usd: float | None = Field(default=None, gt=0)


class Thresholds(_Model):
    argument_accuracy: float = Field(default=0.9, ge=0, le=1)  # below this fails
    warn_extra_steps: int = Field(default=4, ge=0)  # more extra steps than this warns


class Alternative(_Model):
    """Another acceptable path; unset fields come from the main reference."""

    order: Order = "in_order"
    required: list[Call] = []
    ordering: list[list[str]] = []
    allowed_extras: list[str] = []
    normalise: Normalisers = {}
    budget: Budget | None = None
    args_match: ArgsMatch = "superset"
    args_match_overrides: dict[str, ArgsOverride] = {}

    _n = field_validator("normalise", mode="before")(_as_lists)
    _c = field_validator("normalise")(_check_specs)

    @field_validator("args_match_overrides")
    @classmethod
    def _keys(cls, value: dict[str, ArgsOverride]) -> dict[str, ArgsOverride]:
        for tool, keys in value.items():
            if isinstance(keys, list) and (not keys or not all(k and all(keys_part for keys_part in k.split("."))
                                                             for k in keys)):
                raise ValueError(f"{tool}: a list of dotted argument keys, none empty (a.b.c)")
        return value

    @field_validator("ordering")
    @classmethod
    def _chains(cls, value: list[list[str]]) -> list[list[str]]:
        for i, chain in enumerate(value):
            if len(chain) < 2:
                raise ValueError(f"ordering[{i}] needs at least two names: [first, then]")
        return value

    @model_validator(mode="after")
    def _names_exist(self) -> Alternative:
        names = {c.name for c in self.required} | {c.tool for c in self.required}
        for i, chain in enumerate(self.ordering):
            for j, n in enumerate(chain):
                if n not in names:
                    raise ValueError(f"ordering[{i}][{j}]: {n!r} names no required call")
        return self


class Reference(Alternative):
    alternatives: list[Alternative] = []


class Case(_Model):
    id: str = Field(min_length=1)
    task: str | None = None
    set: CaseSet = "capability"
    reference: Reference
    thresholds: Thresholds | None = None


class CasesFile(_Model):
    version: Literal[1] = 1
    thresholds: Thresholds = Thresholds()
    cases: list[Case]

    @model_validator(mode="after")
    def _unique_ids(self) -> CasesFile:
        seen: set[str] = set()
        for c in self.cases:
            if c.id in seen:
                raise ValueError(f"case id {c.id!r} appears twice")
            seen.add(c.id)
        return self


# --- what the matcher uses ------------------------------------------------------------------

# a required call ready to compare: ExpectedCall (arguments.py)

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


# --- loading -------------------------------------------------------------------------------------

def load_cases(path: str | Path, by_tool: ToolNormalisers | None = None, *, order: str | None = None,
               steps_factor: float = DEFAULT_STEPS_FACTOR) -> list[ResolvedCase]:
    """Read a YAML cases file or an ADK/agentevals ``EvalSet`` JSON file.

    ``by_tool``: per-tool argument normalisers (the policy's ``tools.<name>.arguments``), used
    wherever the case names none for that argument. ``order``: one order rule for every case and
    alternative (``score --match``); ``steps_factor``: the step ceiling of a path without a
    ``budget.max_steps``, as a multiple of its length (0: none).
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise CasesError(str(p), [f"cannot read: {exc.strerror or exc}"]) from None
    return cases_from_text(text, str(p), by_tool, order=order, steps_factor=steps_factor)


def cases_from_text(text: str, source: str = "<cases>", by_tool: ToolNormalisers | None = None, *,
                    order: str | None = None, steps_factor: float = DEFAULT_STEPS_FACTOR) -> list[ResolvedCase]:
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise CasesError(source, [f"not valid JSON: {exc}"]) from None
        if is_evalset(data):
            data = evalset_to_cases(data, source)
        return cases_from_dict(data, source, by_tool, order=order, steps_factor=steps_factor)
    data, node = load_yaml(text, source, CasesError)
    try:
        return cases_from_dict(data, source, by_tool, order=order, steps_factor=steps_factor)
    except CasesError as exc:  # add the line of each error's path
        raise with_lines(exc, node) from None


def cases_from_dict(data: Any, source: str = "<cases>", by_tool: ToolNormalisers | None = None, *,
                    order: str | None = None, steps_factor: float = DEFAULT_STEPS_FACTOR) -> list[ResolvedCase]:
    if not isinstance(data, dict):
        raise CasesError(source, [f"(top level): must be a mapping with 'cases', got {type(data).__name__}"])
    try:
        model = CasesFile.model_validate(data)
    except ValidationError as exc:
        raise CasesError(source, _error_lines(exc)) from None
    errors = []
    for i, case in enumerate(model.cases):
        for j, alt in enumerate([case.reference, *case.reference.alternatives]):
            where = f"cases.{i}.reference" + (f".alternatives.{j - 1}" if j else "")
            p = ReferencePath(alt, j, case.reference if j else None)
            if _has_cycle(len(p.calls), p.before):
                errors.append(f"{where}.ordering: the constraints form a cycle")
    if errors:
        raise CasesError(source, errors)
    if order is not None and order not in ORDERS:
        raise CasesError(source, [f"order {order!r}: one of {', '.join(ORDERS)}"])
    return [ResolvedCase(c, model.thresholds, by_tool, order, steps_factor) for c in model.cases]


def _has_cycle(n: int, pairs: frozenset[tuple[int, int]]) -> bool:
    after: dict[int, list[int]] = {}
    indegree = [0] * n
    for a, b in pairs:
        after.setdefault(a, []).append(b)
        indegree[b] += 1
    ready = [i for i in range(n) if indegree[i] == 0]
    seen = 0
    while ready:
        i = ready.pop()
        seen += 1
        for j in after.get(i, ()):
            indegree[j] -= 1
            if indegree[j] == 0:
                ready.append(j)
    return seen != n
