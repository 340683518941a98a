"""The policy: which tools write, what each agent may spend, prices, outcome and limits.

A pydantic model, loadable from YAML (``Policy.from_file``) or a dict; usable with no file.
Unknown keys are errors: a typo must never silently switch a rule off.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

Severity = Literal["critical", "warning", "info"]


class PolicyError(ValueError):
    """A policy that cannot be loaded; ``errors`` holds one ``path: message`` line each."""

    def __init__(self, source: str, errors: list[str]) -> None:
        self.source = source
        self.errors = errors
        super().__init__(f"{source}: invalid policy\n" + "\n".join(f"  {e}" for e in errors))


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ToolPolicy(_Model):
    write: bool = False


class Budget(_Model):
    max_steps: int | None = Field(default=None, gt=0)
    max_llm_calls: int | None = Field(default=None, gt=0)
    max_tokens: int | None = Field(default=None, gt=0)
    max_cost_usd: float | None = Field(default=None, gt=0)
    max_duration_s: float | None = Field(default=None, gt=0)

    def merged_over(self, base: Budget) -> Budget:
        """This budget's fields, each falling back to ``base`` where unset."""
        data = base.model_dump()
        data.update({k: v for k, v in self.model_dump().items() if v is not None})
        return Budget(**data)


class AgentPolicy(_Model):
    budget: Budget = Budget()


class Price(_Model):
    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)


class OutcomePolicy(_Model):
    success_when: list[str] = []


class Limits(_Model):
    """Bounds on everything the processor keeps in memory."""

    max_open_trajectories: int = Field(default=10_000, gt=0)
    max_steps_per_trajectory: int = Field(default=512, gt=0)
    trajectory_ttl_s: float = Field(default=900.0, gt=0)
    max_conversations: int = Field(default=50_000, gt=0)
    conversation_ttl_s: float = Field(default=3600.0, gt=0)
    max_open_spans: int = Field(default=200_000, gt=0)
    max_tool_labels: int = Field(default=64, gt=0)
    late_memory: int = Field(default=10_000, gt=0)


class Policy(_Model):
    version: Literal[1] = 1
    tools: dict[str, ToolPolicy] = {}
    agents: dict[str, AgentPolicy] = {}
    pricing: dict[str, Price] = {}
    outcome: OutcomePolicy = OutcomePolicy()
    limits: Limits = Limits()
    severity: dict[str, Severity] = {}
    rules: dict[str, bool] = {}

    # --- loading ---------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Any, source: str = "<dict>") -> Policy:
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise PolicyError(source, [f"(top level): must be a mapping, got {type(data).__name__}"])
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise PolicyError(source, _error_lines(exc)) from None

    @classmethod
    def from_yaml(cls, text: str, source: str = "<yaml>") -> Policy:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "?"
            raise PolicyError(source, [f"{where}: not valid YAML: {getattr(exc, 'problem', exc)}"]) from None
        return cls.from_dict(data, source)

    @classmethod
    def from_file(cls, path: str | Path) -> Policy:
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise PolicyError(str(p), [f"cannot read: {exc.strerror or exc}"]) from None
        return cls.from_yaml(text, str(p))

    # --- lookups (cached: the policy is frozen) --------------------------------------------
    @functools.cached_property
    def write_tools(self) -> frozenset[str]:
        return frozenset(name for name, t in self.tools.items() if t.write)

    def is_write(self, tool: str) -> bool:
        return tool in self.write_tools

    def budget_for(self, agent: str) -> Budget:
        return self._budgets(agent)

    @functools.cached_property
    def _budgets(self) -> Any:
        base = self.agents["*"].budget if "*" in self.agents else Budget()

        @functools.lru_cache(maxsize=1024)
        def resolve(agent: str) -> Budget:
            own = self.agents.get(agent)
            return own.budget.merged_over(base) if own is not None and agent != "*" else base

        return resolve

    def price_for(self, model: str | None) -> Price | None:
        return self._prices(model) if model else None

    @functools.cached_property
    def _prices(self) -> Any:
        table = dict(self.pricing)
        by_length = sorted(table, key=len, reverse=True)

        @functools.lru_cache(maxsize=1024)
        def resolve(model: str) -> Price | None:
            if model in table:
                return table[model]
            for name in by_length:  # longest prefix: "gpt-4o-2024-08-06" -> "gpt-4o"
                if model.startswith(name):
                    return table[name]
            return None

        return resolve

    def severity_of(self, rule: str, default: Severity) -> Severity:
        return self.severity.get(rule, default)

    def rule_enabled(self, rule: str) -> bool:
        return self.rules.get(rule, True)


def _error_lines(exc: ValidationError) -> list[str]:
    lines = []
    for err in exc.errors():
        path = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown key (check the spelling)"
        elif err["type"] == "greater_than":
            msg = f"must be > {err['ctx']['gt']}"
        elif err["type"] == "greater_than_equal":
            msg = f"must be >= {err['ctx']['ge']}"
        lines.append(f"{path}: {msg}")
    return lines
