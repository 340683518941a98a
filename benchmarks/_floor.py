"""The floor under the processor's cost: the least any design must do for the benchmark's mixes.

:class:`Floor` is not a processor: no rules, conversations, bounds, exposition or locks. It is
what following the spans of a run costs when nothing else is done, written plainly, so that
``overhead.py`` can say how far the processor is from it ("processor / floor") next to how far it
is from the SDK alone ("processor / SDK"). :class:`DeferredFloor` does the same work once, at the
run's end.

The SDK calls a span processor by its methods alone, so the floor has no base class: this module
compiles with mypyc unchanged (``overhead.py --compiled-floor``, :mod:`_compiled_floor`), to tell
whether the floor would cost less as native code, as the processor's per-span modules are.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

import orjson
from opentelemetry.trace import StatusCode

BOUNDS = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)  # the floor's histogram buckets (+Inf past them)
WRITE_TOOL = "create_claim"  # the mixes' one write (the policy's `write: true`)
MAX_STEPS = 40  # the policy's step budget


class Floor:
    """Each span routed to its run at its start; at its end the run found, the span's kind read,
    a tool step kept (name, status, end), the write tool's arguments parsed and keyed against the
    run's writes, the step budget checked, tool calls counted in plain cells read at scrape (as the
    processor does), a model call's tokens added up; at the run's end four histogram observations
    (a bucket found by bisect, a count and a sum): steps, model calls, seconds, cost."""

    def __init__(self) -> None:
        self.calls: dict[str, list[int]] = {}  # tool -> [ok, error]
        self.histograms = [[0] * (len(BOUNDS) + 1) for _ in range(4)]  # steps, model calls, seconds, USD
        self.sums = [0.0] * 4
        self.routes: dict[int, dict[str, Any]] = {}

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        parent = span._parent
        run = self.routes.get(parent.span_id) if parent is not None else None
        if run is None:
            run = self.new_run(span)
        self.routes[span._context.span_id] = run

    def new_run(self, span: Any) -> dict[str, Any]:
        """The state one run keeps, made at its first span."""
        return {"steps": [], "writes": set(), "llm_calls": 0, "tokens": 0, "start": span._start_time}

    def on_end(self, span: Any) -> None:
        run = self.routes.pop(span._context.span_id, None)
        if run is not None:
            self.take(run, span)

    def _on_ending(self, span: Any) -> None:
        pass

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    def take(self, run: dict[str, Any], span: Any) -> None:
        """One span's end into its run: a tool step kept and its write keyed, a model call added up,
        or, for the agent span, the run's four observations."""
        attrs = span._attributes._dict
        op = attrs.get("gen_ai.operation.name")
        if op == "execute_tool":
            tool = attrs.get("gen_ai.tool.name")
            ok = span._status._status_code is not StatusCode.ERROR
            run["steps"].append((tool, ok, span._end_time))
            if tool == WRITE_TOOL:
                key = orjson.dumps(orjson.loads(attrs["gen_ai.tool.call.arguments"]), option=orjson.OPT_SORT_KEYS)
                if key in run["writes"]:
                    raise AssertionError("the floor's mix repeats no write")
                run["writes"].add(key)
            if len(run["steps"]) > MAX_STEPS:
                raise AssertionError("the floor's mix stays in its step budget")
            cell = self.calls.get(tool)
            if cell is None:
                cell = self.calls[tool] = [0, 0]
            cell[0 if ok else 1] += 1
        elif op == "chat":
            run["llm_calls"] += 1
            run["tokens"] += attrs["gen_ai.usage.input_tokens"] + attrs["gen_ai.usage.output_tokens"]
        elif op == "invoke_agent":
            values = (len(run["steps"]), run["llm_calls"], (span._end_time - run["start"]) / 1e9,
                      run["tokens"] * 2.5e-6)
            for i, value in enumerate(values):
                self.histograms[i][bisect_left(BOUNDS, value)] += 1
                self.sums[i] += value

    @property
    def runs(self) -> int:
        """Runs counted (every run makes one observation per histogram)."""
        return sum(self.histograms[0])


class DeferredFloor(Floor):
    """The floor's work done once, at the run's end: every other span only kept on its trace as it
    ends (nothing at its start), then at the agent span's end each routed to the run through its
    parents and taken in order. Detection moves to the run's end (a processor could not do this
    and still count a violation as its span ends); the floor under even that design."""

    def __init__(self) -> None:
        super().__init__()
        self.pending: dict[int, list[Any]] = {}  # trace id -> its ended spans

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        pass

    def on_end(self, span: Any) -> None:
        if span._attributes._dict.get("gen_ai.operation.name") != "invoke_agent":
            self.pending.setdefault(span._context.trace_id, []).append(span)
            return
        spans = self.pending.pop(span._context.trace_id, [])
        agent_id = span._context.span_id
        parents = {s._context.span_id: s._parent.span_id for s in spans}
        run = self.new_run(span)
        for s in spans:
            up = s._parent.span_id
            while up != agent_id:  # routed through its parents
                up = parents[up]
            self.take(run, s)
        self.take(run, span)
