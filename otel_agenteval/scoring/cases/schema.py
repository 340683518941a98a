"""The cases file's schema: each case, its reference path and alternatives, as frozen pydantic models.

Unknown keys are errors, reported with their path (``cases.py`` loads the file), so a typo never
silently loosens a reference. ``references.py`` resolves a case for the matcher.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ...model.normalise import build

Order = Literal["exact", "in_order", "any_order", "superset", "unordered", "subset"]
ORDERS: tuple[str, ...] = ("exact", "in_order", "any_order", "superset", "unordered", "subset")
# how a call's arguments are compared with a required call's: superset (the call may carry
# more), exact (the same names), subset (the call may carry fewer), ignore (the tool only)
ArgsMatch = Literal["superset", "exact", "subset", "ignore"]
ArgsOverride = ArgsMatch | list[str]  # a mode, or the dotted keys to compare (only those)
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
