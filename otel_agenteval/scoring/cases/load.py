"""The cases file: one reference trajectory (and its alternatives) per case, loaded and checked.

YAML (this project's form) or a Google ADK / agentevals ``EvalSet`` JSON (its expected
``tool_uses`` per invocation become the required calls). Unknown keys are errors, reported
with their path and line, so a typo never silently loosens a reference. The schema is in
``case_file.py``; ``references.py`` resolves each case for the matcher.

A reference's *length* counts its required calls plus the final answer, and a run's length
counts its tool calls plus its final answer, so ``extra_steps`` is the difference in tool calls.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ...policy.config_file import error_lines, load_yaml, read_text, with_lines
from .arguments import ExpectedCall
from .errors import CasesError
from .evalset import evalset_to_cases, is_evalset
from .references import DEFAULT_STEPS_FACTOR, ReferencePath, ResolvedCase
from .schema import (
    ORDERS,
    Alternative,
    ArgsMatch,
    ArgsOverride,
    Budget,
    Call,
    Case,
    CaseSet,
    CasesFile,
    Normalisers,
    Order,
    Reference,
    Thresholds,
    ToolNormalisers,
)

# the names importable from here, as before the schema and the resolved forms had modules of their own
__all__ = [
    "DEFAULT_STEPS_FACTOR",
    "ORDERS",
    "Alternative",
    "ArgsMatch",
    "ArgsOverride",
    "Budget",
    "Call",
    "Case",
    "CaseSet",
    "CasesError",
    "CasesFile",
    "ExpectedCall",
    "Normalisers",
    "Order",
    "Reference",
    "ReferencePath",
    "ResolvedCase",
    "Thresholds",
    "ToolNormalisers",
    "cases_from_dict",
    "cases_from_text",
    "load_cases",
]


def load_cases(path: str | Path, by_tool: ToolNormalisers | None = None, *, order: str | None = None,
               steps_factor: float = DEFAULT_STEPS_FACTOR) -> list[ResolvedCase]:
    """Read a YAML cases file or an ADK/agentevals ``EvalSet`` JSON file.

    ``by_tool``: per-tool argument normalisers (the policy's ``tools.<name>.arguments``), used
    wherever the case names none for that argument. ``order``: one order rule for every case and
    alternative (``score --match``); ``steps_factor``: the step ceiling of a path without a
    ``budget.max_steps``, as a multiple of its length (0: none).
    """
    text, source = read_text(path, CasesError)
    return cases_from_text(text, source, by_tool, order=order, steps_factor=steps_factor)


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
        raise CasesError(source, error_lines(exc)) from None
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
