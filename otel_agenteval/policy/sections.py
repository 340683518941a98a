"""The sections of a policy, each a frozen pydantic model: tools, agents and their budgets,
confirmation, prices, outcome, limits. :class:`~.policy.Policy` puts them together.

Unknown keys are errors: a typo must never silently switch a rule off.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator, model_validator

from ..model.patterns import compile_pattern
from ..model.product_log import FIRST, THEREAFTER, TICK_NS


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)  # 1e400 is a typo, not a bound


MAX_TTL_S = 366 * 86400.0  # a year: past it a TTL is a typo (and as nanoseconds it still fits 64 bits)


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
                compile_pattern(self.result_matches)
            except ValueError as exc:
                raise ValueError(f"result_matches is {exc}") from None
        return self


class ToolConfirmation(_Model):
    """What a proposal must show the user before a yes covers this tool's call."""

    shows: list[str] | None = None  # argument paths (``flights.flight_number``); None = inferred by type
    says: list[str] | None = None  # words naming the action: one must start a word of the proposal; None = not checked


class Undo(_Model):
    """This tool undoes an earlier call of ``tool`` on the same ``key`` (its argument, or a field of
    the undone call's arguments or result): a write redone after its undo is not a duplicate."""

    tool: str
    key: str


class ToolPolicy(_Model):
    write: bool = False
    expected: StrictBool = False  # most runs call it: a drop in its share of runs warns (AgentExpectedToolShareDropped)
    requires_confirmation: bool = False
    destructive: bool = False
    requires_before: list[str] = []
    forbidden_if: list[ForbiddenIf] = []
    confirm_arguments: list[str] | None = None  # which arguments a confirmation must state; None = all
    confirmation: ToolConfirmation | None = None  # what a proposal in the dialogue must show (``shows``)
    undoes: Undo | None = None  # e.g. cancel_reservation undoes book_reservation on reservation_id
    grounded: bool | list[str] = False  # ungrounded_argument: opt in (all arguments, or these)
    arguments: dict[str, list[str]] = {}  # per-argument normalisers: case, whitespace, number, decimal, date, id, regex:…

    @field_validator("arguments")
    @classmethod
    def _normalisers(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        from ..model.normalise import build

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


class Lexicon(_Model):
    """Words and phrases added to the built-in ones (English, French, German, Spanish, Portuguese,
    Italian) that the dialogue model reads: ``affirm`` (a yes), ``refuse`` (a no), ``ask`` (the
    agent asks for agreement), ``negate`` (turns an affirmation into a refusal: "don't proceed")."""

    affirm: list[str] = []
    refuse: list[str] = []
    ask: list[str] = []
    negate: list[str] = []


class ConfirmationPolicy(_Model):
    """Where confirmations come from, and what counts as a yes."""

    tools: list[str] = []  # confirmation tools, e.g. ask_user_confirmation
    affirm: str = DEFAULT_AFFIRM  # a confirmation tool's result that is a yes
    deny: str = DEFAULT_DENY
    from_messages: bool = True  # read captured chat messages when content capture is on
    lexicon: Lexicon = Lexicon()  # the dialogue model's words, extended

    @field_validator("affirm", "deny")
    @classmethod
    def _regex(cls, value: str) -> str:
        compile_pattern(value, ignore_case=True)  # ValueError: why it is refused
        return value


class Price(_Model):
    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)


class OutcomePolicy(_Model):
    success_when: list[str] = []


class LogSampling(_Model):
    """The violation and stopped-call log lines, sampled per kind as the OpenTelemetry Collector
    samples its own log (``service.telemetry.logs.sampling``: the same settings and defaults)."""

    enabled: bool = True  # false: every line written (spans and counters see every one either way)
    initial: int = Field(default=FIRST, ge=0, le=1_000_000)  # of a kind, written in each tick
    thereafter: int = Field(default=THEREAFTER, ge=0, le=1_000_000)  # then one in this many; 0: none till the next tick
    tick_s: float = Field(default=TICK_NS / 1e9, gt=0, le=MAX_TTL_S)


class OutputsPolicy(_Model):
    """Where findings go besides metrics and logs."""

    evaluation_events: bool = False  # gen_ai.evaluation.result log records through the global LoggerProvider
    evaluation_runs: bool = False  # and one per finished run, with its outcome
    evaluation_ids_in_clear: bool = False  # conversation ids in clear on those records (hashed otherwise)
    loop_repeats: int = Field(default=5, ge=2)  # agenteval_loops_total: one call (tool + arguments) this often in a run
    log_sampling: LogSampling = LogSampling()  # the violation and stopped-call log lines


class Limits(_Model):
    """Bounds on everything the processor keeps in memory."""

    max_open_trajectories: int = Field(default=10_000, gt=0)
    max_steps_per_trajectory: int = Field(default=512, gt=0)
    trajectory_ttl_s: float = Field(default=900.0, gt=0, le=MAX_TTL_S)
    max_conversations: int = Field(default=50_000, gt=0)
    conversation_ttl_s: float = Field(default=3600.0, gt=0, le=MAX_TTL_S)
    max_open_spans: int = Field(default=200_000, gt=0)
    max_tool_labels: int = Field(default=64, gt=0)
    max_agent_labels: int = Field(default=64, gt=0)  # agent_name label values, then "other"
    late_memory: int = Field(default=10_000, gt=0)
