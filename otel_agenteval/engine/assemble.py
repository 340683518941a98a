"""A span's content into its run's trajectory: tool steps, model calls, agent spans.

Called for one run at a time (the engine applies a run's events on one thread), after the
rules have looked at the event, so rules see what came before it. Per-run maps are bounded
by the policy's ``max_steps_per_trajectory``; what does not fit is counted.
"""

from __future__ import annotations

from typing import Any

from ..model.trajectory import ToolStep, Trajectory
from ..policy.policy import Policy
from ..reading import confirmations
from .dispatch import ToolPlan
from .routing import Run


def keep_first(d: dict[Any, str], key: Any, value: str, cap: int) -> bool:
    """``d.setdefault(key, value)`` while ``d`` holds fewer than ``cap`` keys; False if it was full."""
    if key in d:
        return True
    if len(d) >= cap:
        return False
    d[key] = value
    return True


class Assembler:
    """Records events into trajectories; keeps the live tool call counts and the model price table."""

    def __init__(self, policy: Policy, max_tool_labels: int, stats: dict[str, Any]) -> None:
        self.policy = policy
        self.max_steps = policy.limits.max_steps_per_trajectory
        self.stats = stats
        self.tool_rows: dict[tuple[str, str], dict[str, list[int]]] = {}  # (service, agent) -> tool -> [ok, error]
        # names come from spans: rows bounded like the agent labels, tools per row like the tool labels
        # (past either: "other"); the metrics fold the rest into their own caps
        self._max_rows = 4 * policy.limits.max_agent_labels
        self._max_cells = max_tool_labels
        self._known_tools = frozenset(policy.tools)  # the policy's tools always keep their own counts
        self._prices: dict[str | None, tuple[float, float]] = {}  # model -> USD per token (in, out)

    # --- tool steps ---------------------------------------------------------------------------
    def tool(self, run: Run, t: Trajectory, step: ToolStep, plan: ToolPlan) -> None:
        t.tool_calls += 1
        ok = step.ok
        row = run.tool_row
        if row is None:
            row = run.tool_row = self._tool_row(t)
        cell = row.get(step.tool)
        if cell is None:
            cell = self._tool_cell(row, step.tool)
        if ok:
            cell[0] += 1
        else:
            cell[1] += 1
            t.tool_errors += 1
        if ok and plan.succeeds:
            t.succeeded = True
        steps = t.steps
        if len(steps) < self.max_steps:
            step.index = len(steps)
            steps.append(step)
        else:
            t.steps_dropped += 1
            self.stats["steps_dropped"] += 1
        writes = (t.writes_ok if ok else t.writes_failed) if plan.write else None
        if writes is not None and not keep_first(writes, step.call_key, t.trace_hex, self.max_steps):
            t.state_dropped += 1
        if plan.confirms:
            conf = confirmations.from_tool_step(step, self.policy)
            if conf is not None:
                confirmations.keep(t.extra, conf)

    def _tool_row(self, t: Trajectory) -> dict[str, list[int]]:
        """Tool call counts of the run's (service, agent): tool -> [ok, error]."""
        rows = self.tool_rows
        key = (t.service_name, t.agent_name)
        row = rows.get(key)
        if row is None:
            if len(rows) >= self._max_rows:
                key = (t.service_name, "other")
                row = rows.get(key)
            if row is None:
                row = rows[key] = {}
        return row

    def _tool_cell(self, row: dict[str, list[int]], tool: str) -> list[int]:
        """A new tool's [ok, error] counts in its row: bounded (tool names come from models), "other" past the cap."""
        if len(row) >= self._max_cells and tool not in self._known_tools:
            tool = "other"
            cell = row.get(tool)
            if cell is not None:
                return cell
        cell = row[tool] = [0, 0]
        return cell

    def tool_counts(self) -> dict[tuple[str, str, str, bool], int]:
        """The tool call counts as (service, agent, tool, ok) -> count, for the metrics (scrape time)."""
        out: dict[tuple[str, str, str, bool], int] = {}
        for (service, agent), row in list(self.tool_rows.items()):
            for tool, cell in list(row.items()):
                ok, err = cell[0], cell[1]
                if ok:
                    out[(service, agent, tool, True)] = ok
                if err:
                    out[(service, agent, tool, False)] = err
        return out

    # --- model calls ----------------------------------------------------------------------------
    def price(self, model: str | None) -> tuple[float, float]:
        """USD per input and output token for a model (the policy's table), cached per model name."""
        price = self._prices.get(model)
        if price is None:
            p = self.policy.price_for(model)
            price = (p.input_per_mtok / 1e6, p.output_per_mtok / 1e6) if p is not None else (0.0, 0.0)
            if len(self._prices) < 1024:  # model names come from spans: bound the cache
                self._prices[model] = price
        return price

    def llm(self, t: Trajectory, input_tokens: int, output_tokens: int, cost: float) -> None:
        t.llm_calls += 1
        t.input_tokens += input_tokens
        t.output_tokens += output_tokens
        t.cost_usd += cost

    def clear(self) -> None:
        """Forget the live counts (a forked child starts from nothing of its parent's)."""
        self.tool_rows.clear()
