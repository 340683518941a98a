"""A starter policy from recorded runs: what ``otel-agenteval init`` writes.

:class:`Observed` takes finished trajectories (bounded: counts, not runs) and
:func:`render` turns them, with a user's existing policy merged in, into commented YAML:
the tools seen with their call counts (writes inferred from their names marked for review),
each agent's tools as its ``allowed_tools``, step/LLM-call/token/cost budgets at the observed
p99 with headroom, and confirmation tools when some were seen. When the spans carried the
conversation, a write usually preceded by the agent's proposal and the user's yes gets
``requires_confirmation`` with the key arguments those proposals showed (:class:`AgreementSeen`,
counted by the ``init`` command); hand-offs (``transfer_to_*``, ``escalate_*``) are no writes.
Whatever the existing policy sets is kept as it is; only what it lacks is added.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Final

import yaml

from ..model.trajectory import Trajectory
from .write_verbs import is_handoff, is_inferred_write

HEADROOM: Final = 1.5  # budgets at the observed p99 times this
MAX_TOOLS: Final = 500  # tool and agent names come from models: past these, counted, not listed
MAX_AGENTS: Final = 100
MAX_AGENT_TOOLS: Final = 200
UNNAMED_AGENT: Final = "unknown"  # runs with no agent name: no entry of their own
KNOWN_SECTIONS: Final = ("version", "infer_writes", "tools", "confirmation", "agents")  # the sections init writes


class Distribution:
    """Counts by value (bounded by the rounding of the values), for a percentile."""

    def __init__(self, grain: float = 1.0) -> None:
        self.grain = grain
        self.counts: dict[float, int] = {}
        self.n = 0

    def add(self, value: float) -> None:
        v = math.ceil(value / self.grain) * self.grain
        self.counts[v] = self.counts.get(v, 0) + 1
        self.n += 1

    def quantile(self, q: float) -> float:
        rank = max(1, math.ceil(q * self.n))
        seen = 0
        for v in sorted(self.counts):
            seen += self.counts[v]
            if seen >= rank:
                return v
        return 0.0


@dataclass
class AgentSeen:
    runs: int = 0
    tools: dict[str, int] = field(default_factory=dict)
    steps: Distribution = field(default_factory=Distribution)
    llm_calls: Distribution = field(default_factory=Distribution)
    tokens: Distribution = field(default_factory=lambda: Distribution(100.0))
    cost: Distribution = field(default_factory=lambda: Distribution(0.0001))
    priced: bool = False


@dataclass
class AgreementSeen:
    """One write's calls read against the conversation: how many had a covering yes, and which
    key arguments the proposals showed."""

    calls: int = 0
    agreed: int = 0
    shown: dict[str, int] = field(default_factory=dict)  # argument path -> calls whose proposal showed it

    def proposal(self) -> dict[str, Any] | None:
        """``requires_confirmation`` and ``shows`` when most calls (and at least 3) had a yes."""
        if self.calls < 3 or self.agreed * 2 < self.calls:
            return None
        shows = sorted(p for p, n in self.shown.items() if n * 2 >= self.agreed)
        return {"write": True, "requires_confirmation": True, **({"confirmation": {"shows": shows}} if shows else {})}


@dataclass
class Observed:
    """What the recorded runs did, in counts (one trajectory at a time: use as ``on_trajectory``)."""

    runs: int = 0
    tools: dict[str, list[int]] = field(default_factory=dict)  # tool -> [calls, failed]
    tools_not_listed: int = 0
    agents: dict[str, AgentSeen] = field(default_factory=dict)
    everyone: AgentSeen = field(default_factory=AgentSeen)
    agents_not_listed: int = 0
    agreements: dict[str, AgreementSeen] = field(default_factory=dict)  # filled by the door that reads messages

    def __call__(self, t: Trajectory) -> None:
        self.runs += 1
        for s in t.steps:
            seen = self.tools.get(s.tool)
            if seen is None:
                if len(self.tools) >= MAX_TOOLS:
                    self.tools_not_listed += 1
                    continue
                seen = self.tools[s.tool] = [0, 0]
            seen[0] += 1
            seen[1] += 0 if s.ok else 1
        self._agent(self.everyone, t)
        if t.agent_name == UNNAMED_AGENT:
            return
        agent = self.agents.get(t.agent_name)
        if agent is None:
            if len(self.agents) >= MAX_AGENTS:
                self.agents_not_listed += 1
                return
            agent = self.agents[t.agent_name] = AgentSeen()
        self._agent(agent, t)

    @staticmethod
    def _agent(a: AgentSeen, t: Trajectory) -> None:
        a.runs += 1
        for s in t.steps:
            if s.tool in a.tools or len(a.tools) < MAX_AGENT_TOOLS:
                a.tools[s.tool] = a.tools.get(s.tool, 0) + 1
        a.steps.add(t.tool_calls)
        a.llm_calls.add(t.llm_calls)
        a.tokens.add(t.input_tokens + t.output_tokens)
        a.cost.add(t.cost_usd)
        a.priced = a.priced or t.cost_usd > 0


def is_confirmation_tool(tool: str) -> bool:
    """A tool that asks the user to confirm (``ask_user_confirmation``, ``confirmWithUser``), not a write."""
    return "confirm" in tool.lower() and not is_inferred_write(tool)


def budget_of(a: AgentSeen) -> dict[str, Any]:
    """Budgets at the observed p99 with headroom; a measure the runs never used is left unset."""
    def limit(d: Distribution, least: float = 0) -> int:
        return max(math.ceil(d.quantile(0.99) * HEADROOM), math.ceil(d.quantile(0.99) + least))

    out: dict[str, Any] = {"max_steps": limit(a.steps, 2)}
    if a.llm_calls.quantile(0.99) > 0:
        out["max_llm_calls"] = limit(a.llm_calls, 2)
    if a.tokens.quantile(0.99) > 0:
        out["max_tokens"] = int(math.ceil(a.tokens.quantile(0.99) * HEADROOM / 1000) * 1000)
    if a.priced:
        out["max_cost_usd"] = round(math.ceil(a.cost.quantile(0.99) * HEADROOM * 100) / 100, 2) or 0.01
    return out


def _flow(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=1 << 30, sort_keys=False).strip().removesuffix("...").strip()


def _key(name: str) -> str:
    return _flow(name) if name != "*" else '"*"'


def _line(key: str, value: str, comment: str) -> str:
    text = f"  {key}: {value}"
    return f"{text:<44} # {comment}" if comment else text


def render(seen: Observed, existing: dict[str, Any], sources: str) -> tuple[str, list[str]]:
    """The commented policy text, and what it adds to ``existing`` (the user's policy as data; ``{}`` for none)."""
    added: list[str] = []
    tools_have: dict[str, Any] = dict(existing.get("tools") or {})
    agents_have: dict[str, Any] = dict(existing.get("agents") or {})
    conf_have: dict[str, Any] = dict(existing.get("confirmation") or {})
    infer = existing.get("infer_writes", True) is not False
    out = [f"# agenteval policy: started by `otel-agenteval init` from {seen.runs} runs in {sources}.",
           "# Check it: otel-agenteval check-policy FILE. Rules and settings: docs/rules.md.",
           "# Re-running init on more traces adds what they show and keeps every value set here",
           "# (comments are rewritten; --force starts over).",
           "version: 1"]
    if "infer_writes" in existing:
        out.append(f"infer_writes: {_flow(existing['infer_writes'])}")
    out += ["", "# Tools seen, with their calls. A write's second identical call is a duplicate_write.",
            "# 'inferred write': the name decided (a write verb first); keep write: true or set it false.",
            "tools:"]
    for tool, (calls, failed) in sorted(seen.tools.items(), key=lambda kv: (-kv[1][0], kv[0])):
        counts = f"{calls} calls" + (f", {failed} failed" if failed else "")
        if tool in tools_have:
            out.append(_line(_key(tool), _flow(tools_have.pop(tool)), counts))
            continue
        inferred = infer and is_inferred_write(tool)
        seen_agreed = seen.agreements.get(tool)
        asks = seen_agreed.proposal() if seen_agreed is not None else None
        if asks is not None and seen_agreed is not None:
            out.append(_line(_key(tool), _flow(asks), counts + f"; {seen_agreed.agreed} after a proposal and a yes"))
            added.append(f"tool {tool} (write, requires_confirmation)")
            continue
        note = "; inferred write" if inferred else "; hand-off, not a write" if is_handoff(tool) else ""
        out.append(_line(_key(tool), "{write: true}" if inferred else "{}", counts + note))
        added.append(f"tool {tool}" + (" (write)" if inferred else ""))
    for tool, value in tools_have.items():  # the user's, not seen in these traces
        out.append(_line(_key(tool), _flow(value), "not seen in these traces"))
    if seen.tools_not_listed:
        out.append(f"  # ... and {seen.tools_not_listed} calls of more tools than init lists ({MAX_TOOLS})")
    out += _confirmation(seen, conf_have, added)
    out += _agents(seen, agents_have, added)
    out += _outcome_and_pricing(seen, existing)
    rest = {k: v for k, v in existing.items() if k not in KNOWN_SECTIONS}
    if rest:
        out += ["", "# kept from the existing policy"]
        out += yaml.safe_dump(rest, sort_keys=False, default_flow_style=False, width=100).rstrip().splitlines()
    return "\n".join(out) + "\n", added


def _confirmation(seen: Observed, have: dict[str, Any], added: list[str]) -> list[str]:
    tools = list(have.get("tools") or [])
    for tool in sorted(seen.tools):
        if is_confirmation_tool(tool) and tool not in tools:
            tools.append(tool)
            added.append(f"confirmation tool {tool}")
    if not tools and not have:
        return []
    out = ["", "# Tools whose result ({\"confirmed\": true}, \"yes\") confirms a requires_confirmation tool.",
           "confirmation:"]
    out.append(_line("tools", _flow(tools), ""))
    out += [_line(k, _flow(v), "") for k, v in have.items() if k != "tools"]
    return out


def _agents(seen: Observed, have: dict[str, Any], added: list[str]) -> list[str]:
    out = ["", f"# Budgets: the observed p99 x{HEADROOM} (runs over them are budget_breach warnings).",
           "# allowed_tools: the tools each agent was seen calling (another one is a scope_violation).",
           "agents:"]
    entries: list[tuple[str, AgentSeen | None]] = [("*", seen.everyone)]
    entries += sorted(seen.agents.items())
    named = {name for name, _ in entries}
    entries += [(name, None) for name in have if name not in named]
    for name, a in entries:
        mine: dict[str, Any] = {}
        if a is not None:
            if name != "*":
                mine["allowed_tools"] = sorted(a.tools)
            mine["budget"] = budget_of(a)
        theirs = have.get(name)
        if isinstance(theirs, dict):
            value = dict(theirs)  # the user's entry wins, key by key: only what it lacks is added
            for k, v in mine.items():
                if k not in value:
                    value[k] = v
                    added.append(f"agent {name}: {k}")
        else:
            value = mine
            added.append(f"agent {name}")
        comment = f"{a.runs} runs" if a is not None else "not seen in these traces"
        out.append(f"  {_key(name)}:{'':<{max(1, 41 - len(_key(name)))}}# {comment}")
        out += [f"    {k}: {_flow(v)}" for k, v in value.items()]
    if seen.agents_not_listed:
        out.append(f"  # ... and {seen.agents_not_listed} runs of more agents than init lists ({MAX_AGENTS})")
    return out


def _outcome_and_pricing(seen: Observed, existing: dict[str, Any]) -> list[str]:
    """Commented stubs for what the traces cannot tell: when a run succeeded, and model prices
    (without them replay's outcomes are "unknown" and every run costs $0). Not written over the
    user's own sections (kept below with the rest)."""
    out: list[str] = []
    if "outcome" not in existing:
        writes = [t for t, _ in sorted(seen.tools.items(), key=lambda kv: -kv[1][0]) if is_inferred_write(t)][:3]
        out += ["", "# When a run succeeded: a successful call of one of these tools. Without it replay and the",
                "# metrics call every run's outcome \"unknown\" unless its span says. Uncomment and edit:",
                "# outcome:",
                f"#   success_when: {_flow(writes or ['TOOL_THAT_FINISHES_THE_JOB'])}"]
    if "pricing" not in existing and not seen.everyone.priced:
        out += ["", "# USD per million tokens, per model name as the spans give it (longest prefix wins).",
                "# Without it every run costs $0 and cost budgets never fire. Uncomment and edit:",
                "# pricing:",
                "#   gpt-4o: {input_per_mtok: 2.50, output_per_mtok: 10.00}"]
    return out
