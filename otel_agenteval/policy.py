"""The policy: which tools write, what each agent may spend, prices, outcome and limits.

A pydantic model, loadable from YAML (``Policy.from_file``) or a dict; usable with no file.
Unknown keys are errors: a typo must never silently switch a rule off.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .rule_names import KNOWN_RULES, Severity


class ConfigError(ValueError):
    """A configuration file that cannot be loaded; ``errors`` holds one ``path: message`` line each."""

    what = "invalid configuration"

    def __init__(self, source: str, errors: list[str]) -> None:
        self.source = source
        self.errors = errors
        super().__init__(f"{source}: {self.what}\n" + "\n".join(f"  {e}" for e in errors))


class PolicyError(ConfigError):
    what = "invalid policy"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


NORMALISER_ALIASES = {"lower": "case", "strip": "whitespace", "int": "number", "id-pattern": "regex", "id_pattern": "regex"}


class SameSubject(_Model):
    argument: str
    attribute: str


class ForbiddenIf(_Model):
    """One condition under which a tool must not run (rule ``conditional_forbidden``).

    ``after`` + ``result_matches``: an earlier successful ``after`` call in the run returned a
    result matching the regex. ``same_subject``: the call's ``argument`` must equal the root span
    attribute ``attribute`` (the caller's subject), when that attribute is present.
    """

    after: str | None = None
    result_matches: str | None = None
    same_subject: SameSubject | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> ForbiddenIf:
        if self.same_subject is None and (self.after is None or self.result_matches is None):
            raise ValueError("needs either `after` with `result_matches`, or `same_subject`")
        if self.result_matches is not None:
            try:
                re.compile(self.result_matches)
            except re.error as exc:
                raise ValueError(f"result_matches is not a valid regex: {exc}") from None
        return self


class ToolPolicy(_Model):
    write: bool = False
    requires_confirmation: bool = False
    destructive: bool = False
    requires_before: list[str] = []
    forbidden_if: list[ForbiddenIf] = []
    confirm_arguments: list[str] | None = None  # which arguments a confirmation must state; None = all
    grounded: bool | list[str] = False  # ungrounded_argument: opt in (all arguments, or these)
    arguments: dict[str, list[str]] = {}  # per-argument normalisers: case, whitespace, number, decimal, date, id, regex:…

    @field_validator("arguments")
    @classmethod
    def _normalisers(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        from .scoring.normalise import build

        out: dict[str, list[str]] = {}
        for arg, specs in value.items():
            fixed = []
            for spec in specs:
                name, sep, param = spec.partition(":")
                spec = NORMALISER_ALIASES.get(name, name) + sep + param
                try:
                    build(spec)
                except (ValueError, re.error) as exc:
                    raise ValueError(f"{arg}: {exc}") from None
                fixed.append(spec)
            out[arg] = fixed
        return out


class Budget(_Model):
    max_steps: int | None = Field(default=None, gt=0)
    max_repeats: int | None = Field(default=None, gt=0)  # the same call (tool + normalised args)
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
    allowed_tools: list[str] | None = None  # None: any tool (scope_violation otherwise)


DEFAULT_AFFIRM = (r"^\W*(yes|yep|yeah|y|sure|ok|okay|confirm(ed)?|correct|approved?|go ahead|"
                  r"please (do|go ahead|proceed)|do it|proceed|that'?s (right|correct))\b")
DEFAULT_DENY = (r"\b(no|nope|not|don'?t|do not|cancel|stop|never|wait|hold on|wrong|isn'?t|"
                r"rather not)\b")


class ConfirmationPolicy(_Model):
    """Where confirmations come from, and what counts as a yes."""

    tools: list[str] = []  # confirmation tools, e.g. ask_user_confirmation
    affirm: str = DEFAULT_AFFIRM
    deny: str = DEFAULT_DENY
    from_messages: bool = True  # read captured chat messages when content capture is on

    @field_validator("affirm", "deny")
    @classmethod
    def _regex(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a valid regex: {exc}") from None
        return value


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
    max_agent_labels: int = Field(default=64, gt=0)  # agent_name label values, then "other"
    late_memory: int = Field(default=10_000, gt=0)


class Policy(_Model):
    version: Literal[1] = 1
    tools: dict[str, ToolPolicy] = {}
    agents: dict[str, AgentPolicy] = {}
    pricing: dict[str, Price] = {}
    outcome: OutcomePolicy = OutcomePolicy()
    limits: Limits = Limits()
    confirmation: ConfirmationPolicy = ConfirmationPolicy()
    severity: dict[str, Severity] = {}
    rules: dict[str, bool] = {}
    custom_rules: list[str] = []  # "module:attr", each a rule callable

    @field_validator("custom_rules")
    @classmethod
    def _rule_refs(cls, value: list[str]) -> list[str]:
        for ref in value:
            module, sep, attr = ref.partition(":")
            if not sep or not module or not attr:
                raise ValueError(f"{ref!r}: must be 'module:attr'")
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
            raise PolicyError(source, _error_lines(exc)) from None

    @classmethod
    def from_yaml(cls, text: str, source: str = "<yaml>") -> Policy:
        data, node = load_yaml(text, source, PolicyError)
        try:
            return cls.from_dict(data, source)
        except PolicyError as exc:
            raise with_lines(exc, node) from None

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


def load_yaml(text: str, source: str, error: type[ConfigError]) -> tuple[Any, Any]:
    """YAML data and its node tree (to name lines in errors); bad YAML names line and column."""
    try:
        return yaml.safe_load(text), yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "?"
        raise error(source, [f"{where}: not valid YAML: {getattr(exc, 'problem', exc)}"]) from None


def with_lines(exc: ConfigError, node: Any) -> ConfigError:
    """The same errors, each with the line of its path in the file."""
    return type(exc)(exc.source, [_with_line(e, node) for e in exc.errors])


def _with_line(error: str, node: Any) -> str:
    """``path: message`` with `` (line N)`` added, found by walking the YAML node tree."""
    path, sep, msg = error.partition(": ")
    line = None
    for part in path.split("."):
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if str(key.value) == part:
                    line, node = key.start_mark.line + 1, value
                    break
            else:
                break
        elif isinstance(node, yaml.SequenceNode) and part.isdigit() and int(part) < len(node.value):
            node = node.value[int(part)]
            line = node.start_mark.line + 1
        else:
            break
    return f"{path}{sep}{msg} (line {line})" if line is not None and sep else error


def _num(value: Any) -> str:
    return f"{value:g}" if isinstance(value, (int, float)) else str(value)


def _error_lines(exc: ValidationError) -> list[str]:
    lines = []
    for err in exc.errors():
        path = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key (check the spelling)"
        elif err["type"] == "greater_than":
            msg = f"must be > {_num(err['ctx']['gt'])}"
        elif err["type"] == "greater_than_equal":
            msg = f"must be >= {_num(err['ctx']['ge'])}"
        lines.append(f"{path}: {msg}")
    return lines
