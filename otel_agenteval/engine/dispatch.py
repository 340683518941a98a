"""Which rules see which events and tools, decided once from the policy; and running them.

Rules declare what they look at (:func:`~otel_agenteval.rules.applies_to`); here those
declarations become a :class:`ToolPlan` per tool name and a tuple of rules per event, so a step
costs one dict lookup. Rules run with no lock of the engine held, one run's events at a time,
and a span ended by the thread while it runs a rule (an instrumented HTTP client, an LLM judge)
is not checked again: :mod:`._threadstate` marks that thread.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Container, Iterable
from typing import Any, Final

from ..model.product_log import product_log
from ..model.trajectory import NO_LIMITS, Limits, LLMCall, ToolStep, Trajectory
from ..model.violation import Violation
from ..policy.policy import Budget, Policy, PolicyError
from ..reading.labels import safe_label
from ..rules import Check, Finish, Rule
from .errors import caught
from .threadstate import enter, leave

_INF: Final = float("inf")
MAX_PLANS: Final = 4096  # tool names come from models: plans kept for this many
MAX_INFERRED_LOGGED: Final = 64  # inferred write tools named in the log, once each; then one line says so
log = product_log()  # structlog as the app set it up; stderr when it did not



def limits_of(budget: Budget) -> Limits:
    """A budget as the numbers the hot path compares against (no limit: infinity).

    The duration limit is a hair early in ns so the gate never misses what the rule, working
    in seconds, would count as over; the rule itself decides.
    """
    def lim(v: float | None) -> float:
        return _INF if v is None else v

    dur = budget.max_duration_s
    return Limits(max_steps=lim(budget.max_steps), max_llm_calls=lim(budget.max_llm_calls),
                  max_tokens=lim(budget.max_tokens), max_cost_usd=lim(budget.max_cost_usd),
                  max_duration_ns=_INF if dur is None else dur * 1e9 * (1 - 1e-9),
                  check_repeats=budget.max_repeats is not None)


class Screened:
    """A rule called for a tool step only when its test of the call passes (``applies_to(when=...)``)."""

    __slots__ = ("rule", "rules", "test")

    def __init__(self, rule: Rule, test: Callable[[ToolStep], bool]) -> None:
        self.rule = rule
        self.rules = (rule,)  # what Dispatch.run takes
        self.test = test


class ToolPlan:
    """What the policy does with one tool name, decided on its first call: one lookup per step."""

    __slots__ = ("confirms", "on_repeat", "rules", "screened", "succeeds", "write")

    def __init__(self, rules: tuple[Rule, ...], on_repeat: tuple[Rule, ...], write: bool, succeeds: bool,
                 confirms: bool, screened: tuple[Screened, ...] = ()) -> None:
        self.rules = rules  # rules that look at every call of it
        self.on_repeat = on_repeat  # rules declared repeated_call (a write only)
        self.screened = screened  # rules that look at the calls their test passes (after ``rules``)
        self.write = write
        self.succeeds = succeeds  # a policy success_when tool
        self.confirms = confirms  # a confirmation tool


class Dispatch:
    """The policy's rules, sorted by the events and tools they look at."""

    def __init__(self, policy: Policy, rules: Iterable[Rule], errors: dict[str, int],
                 log_inferred: bool = True) -> None:
        self.policy = policy
        self._inferred_logged: set[str] | None = set() if log_inferred else None
        self.rules = tuple(rules)
        self.errors = errors  # the engine's error counts: a broken rule is counted under "rule"
        self.disabled = frozenset(r for r, on in policy.rules.items() if not on)
        # tainted_argument runs: a finished run's tokens go to its conversation (engine/finalise.py)
        self.taint = policy.taint.enabled and "tainted_argument" not in self.disabled and any(
            getattr(r, "__name__", "") == "tainted_argument" for r in self.rules)
        self.by_event: dict[type, tuple[Rule, ...]] = {}
        self.gated: dict[type, tuple[Rule, ...]] = {}  # called only when an event crosses the budget
        tool_scope: list[tuple[Rule, Container[str] | None]] = []  # a set of names, or a container deciding
        repeat_scope: list[tuple[Rule, Container[str] | None]] = []
        screened_scope: list[tuple[Screened, Container[str] | None]] = []
        for kind in (ToolStep, LLMCall, Finish):
            chosen, gated = [], []
            for rule in self.rules:
                if kind not in getattr(rule, "agenteval_events", (kind,)):
                    continue
                scope = getattr(rule, "agenteval_tools", None)
                tools = scope(policy) if scope is not None else None
                if tools is not None and not tools:
                    continue  # nothing in this policy for it to look at
                if getattr(rule, "agenteval_over_budget", False):
                    gated.append(rule)
                    continue
                if kind is ToolStep and getattr(rule, "agenteval_repeated_call", False):
                    repeat_scope.append((rule, tools))
                    continue
                if kind is ToolStep:
                    when = getattr(rule, "agenteval_when", None)
                    if when is not None:  # its test of a call, made once for this policy
                        screened_scope.append((Screened(rule, when(policy)), tools))
                    else:
                        tool_scope.append((rule, tools))
                chosen.append(rule)
            self.by_event[kind] = tuple(chosen)
            self.gated[kind] = tuple(gated)
        self._tool_scope = tool_scope
        self._repeat_scope = repeat_scope
        self._screened_scope = screened_scope
        self.gated_tool = self.gated[ToolStep]
        self.gated_llm = self.gated[LLMCall]
        self.gated_finish = self.gated[Finish]
        self.llm_rules = self.by_event[LLMCall]
        self.finish_rules = self.by_event[Finish]
        self.gated_any = any(self.gated.values())
        self._plans: dict[str, ToolPlan] = {}
        self._limits: dict[str, Limits] = {}
        self._writes = policy.write_tools
        self._success_tools = frozenset(policy.outcome.success_when)
        self._confirmation_tools = frozenset(policy.confirmation.tools)

    def plan(self, tool: str) -> ToolPlan:
        """The plan for a tool name, made once (bounded: tool names come from models)."""
        plan = self._plans.get(tool)
        if plan is not None:
            return plan
        write = tool in self._writes
        if not write and self.policy.is_inferred_write(tool):
            write = True
            self._log_inferred(tool)
        plan = ToolPlan(tuple(r for r, tools in self._tool_scope if tools is None or tool in tools),
                        tuple(r for r, tools in self._repeat_scope if tools is None or tool in tools) if write else (),
                        write, tool in self._success_tools, tool in self._confirmation_tools,
                        tuple(s for s, tools in self._screened_scope if tools is None or tool in tools))
        if len(self._plans) < MAX_PLANS:
            self._plans[tool] = plan
        return plan

    def _log_inferred(self, tool: str) -> None:
        """Name an inferred write tool in the log the first time it is planned (bounded)."""
        logged = self._inferred_logged
        if logged is None or tool in logged or len(logged) > MAX_INFERRED_LOGGED:
            return
        logged.add(tool)
        if len(logged) > MAX_INFERRED_LOGGED:
            log.warning(f"agenteval.inferred_write: more than {MAX_INFERRED_LOGGED} tools inferred as writes; "
                        "no more are named (declare your tools in the policy)")
            return
        log.warning(f"agenteval.inferred_write: {safe_label(tool, 256)} is treated as a write (its name starts "
                    "with a write verb; the policy does not name it): a repeated identical call is a "
                    "duplicate_write (warning). Declare it in the policy's tools (write: true or false).",
                    tool=safe_label(tool, 256))

    def limits_for(self, agent: str) -> Limits:
        """The agent's budget as numbers, cached per agent name (bounded: names come from spans)."""
        lim = self._limits.get(agent)
        if lim is None:
            lim = limits_of(self.policy.budget_for(agent)) if self.gated_any else NO_LIMITS
            if len(self._limits) < 1024:
                self._limits[agent] = lim
        return lim

    def check_of(self, t: Trajectory) -> Check:
        return Check(t, self.policy, self.policy.budget_for(t.agent_name))

    def passes(self, screened: Screened, step: ToolStep) -> bool:
        """Whether a screened rule's test lets it see ``step``; a test that raises is counted (stage
        ``rule``) and lets it: the rule decides."""
        try:
            return bool(screened.test(step))
        except BaseException:  # a broken test must neither break the host nor hide a finding
            caught(self.errors, "rule")
            return True

    def run(self, event: Any, check: Check, out: list[Violation], rules: tuple[Rule, ...]) -> None:
        """Call ``rules`` for ``event``; what they find goes to ``out``. A rule that raises is counted."""
        enter()
        try:
            for rule in rules:
                try:
                    found = rule(event, check)
                    if found:
                        if self.disabled:
                            found = [v for v in found if v.rule not in self.disabled]
                        out.extend(found)  # inside the guard: a rule may return something not iterable
                except BaseException:  # a broken rule (even one calling sys.exit) must not break the host
                    caught(self.errors, "rule")
        finally:
            leave()


def repeated(t: Trajectory, step: ToolStep) -> bool:
    """Whether a write's normalised call already ran in this run or its conversation."""
    if step.raw_arguments is None:
        return False
    key = step.call_key
    conv = t.conversation
    return (key in t.writes_ok or key in t.writes_failed
            or (conv is not None and (key in conv.writes_ok or key in conv.writes_failed)))


def load_custom_rules(policy: Policy) -> list[Rule]:
    """The policy's ``custom_rules`` ("module:attr"), imported once; errors name the entry."""
    out: list[Rule] = []
    for i, ref in enumerate(policy.custom_rules):
        module_name, _, attr = ref.partition(":")
        try:
            target: Any = importlib.import_module(module_name)
            for part in attr.split("."):
                target = getattr(target, part)
        except Exception as exc:
            raise PolicyError("policy", [f"custom_rules.{i}: cannot load {ref!r}: {exc}"]) from None
        if not callable(target):
            raise PolicyError("policy", [f"custom_rules.{i}: {ref!r} is not callable"])
        out.append(target)
    return out
