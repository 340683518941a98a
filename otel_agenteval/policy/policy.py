"""The policy: which tools write, what each agent may spend, prices, outcome and limits.

A pydantic model, loadable from YAML (``Policy.from_file``) or a dict; usable with no file.
Unknown keys are errors: a typo must never silently switch a rule off. Its sections are in
``sections.py``; reading the file and its error lines (with line numbers) in ``config_file.py``.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from ..model.rule_names import KNOWN_RULES, Severity
from . import write_verbs
from .config_file import ConfigError, error_lines, load_yaml, read_text, with_lines
from .guard_section import GuardPolicy
from .judge_section import JudgePolicy
from .sections import (
    DEFAULT_AFFIRM,
    DEFAULT_DENY,
    NORMALISER_ALIASES,
    AgentPolicy,
    Budget,
    ConfirmationPolicy,
    ForbiddenIf,
    Limits,
    OutcomePolicy,
    OutputsPolicy,
    Price,
    SameSubject,
    ToolPolicy,
)
from .taint_section import SinkTools, TaintPolicy

# the names users import from here (the sections and the errors live next door)
__all__ = [
    "DEFAULT_AFFIRM",
    "DEFAULT_DENY",
    "NORMALISER_ALIASES",
    "AgentPolicy",
    "Budget",
    "ConfigError",
    "ConfirmationPolicy",
    "ForbiddenIf",
    "JudgePolicy",
    "Limits",
    "OutcomePolicy",
    "OutputsPolicy",
    "Policy",
    "PolicyError",
    "Price",
    "SameSubject",
    "TaintPolicy",
    "ToolPolicy",
    "load_yaml",
    "with_lines",
]


class WriteTools:
    """The policy's writes as a container: ``tool in writes`` is :meth:`Policy.is_write`."""

    __slots__ = ("_policy",)

    def __init__(self, policy: Policy) -> None:
        self._policy = policy

    def __contains__(self, tool: object) -> bool:
        return isinstance(tool, str) and self._policy.is_write(tool)


class PolicyError(ConfigError):
    what = "invalid policy"


class Policy(BaseModel):
    """The whole policy: its sections, loading (errors name path and line), cached lookups."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    version: Literal[1] = 1
    tools: dict[str, ToolPolicy] = {}
    agents: dict[str, AgentPolicy] = {}
    pricing: dict[str, Price] = {}
    outcome: OutcomePolicy = OutcomePolicy()
    limits: Limits = Limits()
    outputs: OutputsPolicy = OutputsPolicy()
    confirmation: ConfirmationPolicy = ConfirmationPolicy()
    severity: dict[str, Severity] = {}
    rules: dict[str, bool] = {}
    custom_rules: list[str] = []  # "module:attr", each a rule callable
    infer_writes: bool = True  # a tool the policy does not name is a write when its name starts with a write verb
    guard: GuardPolicy = GuardPolicy()  # the guard's mode and failure mode (guard/guard.py)
    judge: JudgePolicy = JudgePolicy()  # the sampled judge beside the rules (docs/judge.md)
    taint: TaintPolicy = TaintPolicy()  # sources and sinks of tainted_argument (taint_section.py)

    @field_validator("custom_rules")
    @classmethod
    def _rule_refs(cls, value: list[str]) -> list[str]:
        for ref in value:
            module, sep, attr = ref.partition(":")
            if not sep or not module or not attr:
                raise ValueError(f"{ref!r}: must be 'module:attr'")
        return value

    @field_validator("tools")
    @classmethod
    def _undo_targets(cls, value: dict[str, ToolPolicy]) -> dict[str, ToolPolicy]:
        for name, tp in value.items():
            if tp.undoes is not None and tp.undoes.tool not in value:
                raise ValueError(f"{name}.undoes.tool: {tp.undoes.tool!r} is not a tool of this policy")
        return value

    @field_validator("severity", "rules")
    @classmethod
    def _names_known(cls, value: dict[str, Any]) -> dict[str, Any]:
        unknown = [r for r in value if r not in KNOWN_RULES]
        if unknown:
            raise ValueError(f"unknown rule {', '.join(map(repr, unknown))} (known: {', '.join(sorted(KNOWN_RULES))})")
        return value

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
            raise PolicyError(source, error_lines(exc)) from None

    @classmethod
    def from_yaml(cls, text: str, source: str = "<yaml>") -> Policy:
        data, node = load_yaml(text, source, PolicyError)
        try:
            return cls.from_dict(data, source)
        except PolicyError as exc:
            raise with_lines(exc, node) from None

    @classmethod
    def from_file(cls, path: str | Path) -> Policy:
        text, source = read_text(path, PolicyError)
        return cls.from_yaml(text, source)

    # --- lookups (cached: the policy is frozen) --------------------------------------------
    @functools.cached_property
    def write_tools(self) -> frozenset[str]:
        return frozenset(name for name, t in self.tools.items() if t.write)

    @functools.cached_property
    def writes(self) -> WriteTools:
        """``tool in policy.writes``: declared writes and, with ``infer_writes``, writes by their name."""
        return WriteTools(self)

    @functools.cached_property
    def expected_tools(self) -> frozenset[str]:
        """Tools most runs call (``expected: true``): their share of runs is watched for drops."""
        return frozenset(name for name, t in self.tools.items() if t.expected)

    @functools.cached_property
    def guarded_tools(self) -> frozenset[str]:
        """Tools some rule beyond duplicates must look at (confirmation, scope, order, …)."""
        return frozenset(n for n, t in self.tools.items()
                         if t.requires_confirmation or t.destructive or t.requires_before or t.forbidden_if or t.grounded)

    @functools.cached_property
    def needs_confirmations(self) -> bool:
        return any(t.requires_confirmation or t.destructive for t in self.tools.values())

    @functools.cached_property
    def needs_content(self) -> bool:
        """Whether rules read message content (confirmation from messages, grounding)."""
        return (self.needs_confirmations and self.confirmation.from_messages) or any(
            t.grounded for t in self.tools.values())

    @functools.cached_property
    def needs_messages(self) -> bool:
        """Whether the engine keeps the latest model call's messages (content rules or taint)."""
        return self.needs_content or (self.taint.enabled and self.rule_enabled("tainted_argument"))

    @functools.cached_property
    def sink_tools(self) -> SinkTools:
        """``tool in policy.sink_tools``: a tool some argument of which may be a taint sink."""
        return SinkTools(self.taint, self.is_write)

    def sinks_for(self, tool: str) -> tuple[dict[str, str] | None, bool]:
        """A tool's declared sinks (``taint.sinks``) and whether its other string arguments are
        sinks too (a write, with ``default_sinks``). Cached per tool name."""
        return self._sinks(tool)

    @functools.cached_property
    def _sinks(self) -> Any:
        taint = self.taint

        @functools.lru_cache(maxsize=1024)
        def resolve(tool: str) -> tuple[dict[str, str] | None, bool]:
            declared = taint.sinks.get(tool)
            return (dict(declared) if declared is not None else None), taint.default_sinks and self.is_write(tool)

        return resolve

    def tool(self, name: str) -> ToolPolicy | None:
        return self.tools.get(name)

    def allowed_tools_for(self, agent: str) -> frozenset[str] | None:
        return self._allowed(agent)

    @functools.cached_property
    def _allowed(self) -> Any:
        base = self.agents.get("*")

        @functools.lru_cache(maxsize=1024)
        def resolve(agent: str) -> frozenset[str] | None:
            own = self.agents.get(agent)
            chosen = own.allowed_tools if own is not None and own.allowed_tools is not None else (
                base.allowed_tools if base is not None else None)
            return None if chosen is None else frozenset(chosen)

        return resolve

    def is_write(self, tool: str) -> bool:
        """Declared a write, or (not named here, ``infer_writes`` on) named like one: ``write_verbs.py``."""
        return tool in self.write_tools or self.is_inferred_write(tool)

    def is_inferred_write(self, tool: str) -> bool:
        """A write only by its name: the policy names it neither a tool nor a confirmation tool, and its
        name starts with a write verb."""
        return (self.infer_writes and tool not in self.tools and write_verbs.is_inferred_write(tool)
                and tool not in self.confirmation.tools)

    @functools.cached_property
    def in_force(self) -> str:
        """What decides which tools write, in words (serve's start line, ``init``)."""
        declared = len(self.write_tools)
        if not self.infer_writes:
            return f"{declared} write tools declared; no writes inferred (infer_writes: false)"
        if not self.tools:
            return "no policy: writes inferred from tool names"
        return f"{declared} write tools declared; other writes inferred from tool names"

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
