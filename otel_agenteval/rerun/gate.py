"""The tool-call gate: every tool call of the candidate agent is answered here, never by the tool.

A call is answered from the recording when it is the next recorded call of the turn: the same
tool with the same normalised arguments (``parse_arguments``, the engine's own normalisation;
per-argument normalisers as ``score`` names them can be added). A recorded failure is raised as
:class:`RecordedToolError`. The first call with no recorded observation is the divergence: another
tool, other arguments, a call past the recording's end, or (at the end of a turn) a recorded call
never made. With ``on_divergence="stop"`` the call raises :class:`Diverged` (a ``BaseException``,
so an agent's ``except Exception`` does not hide it); with ``"stub"`` it, and every later call
the recording cannot answer, is answered by the stub functions and marked as stubbed. Each call is
also an ``execute_tool`` span of the candidate's run, so the engine checks it as it would live.
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode

from ..model.arguments import arguments_key, parse_arguments
from ..model.normalise import ArgumentRule
from .recording import RecordedCall, RecordedRun


class RecordedToolError(Exception):
    """The recorded call failed: raised to the agent as its tool would have failed."""

    def __init__(self, tool: str, error: str) -> None:
        super().__init__(f"{tool} failed (recorded): {error}")
        self.tool = tool
        self.error = error


class Diverged(BaseException):
    """The call has no recorded observation and the rerun stops there (``on_divergence="stop"``)."""


class StepLimit(BaseException):
    """The turn made more tool calls than the harness's step budget (a loop)."""


class Abandoned(BaseException):
    """The conversation ran past its timeout: every later call of its agent ends here."""


class NoStub(Exception):
    """Stub mode, and the stubs module answers neither this tool nor through ``default``."""


@dataclass(frozen=True)
class Divergence:
    """Where the candidate first parted from the recording: step and turn (1-based), both calls."""

    step: int
    turn: int
    kind: str  # other_tool | other_arguments | not_recorded | not_made
    recorded: dict[str, Any] | None  # {"tool", "arguments"}; None past the recording's end
    new: dict[str, Any] | None  # None when the new run answered without making the recorded call

    def as_dict(self) -> dict[str, Any]:
        return {"step": self.step, "turn": self.turn, "kind": self.kind, "recorded": self.recorded, "new": self.new}


def _observation(result: Any) -> Any:
    """A recorded result as the agent gets it: JSON text parsed, anything else a copy (the agent
    cannot change the recording)."""
    if isinstance(result, str) and result[:1] in ("{", "[", '"'):
        try:
            return json.loads(result)
        except ValueError:
            return result
    return copy.deepcopy(result)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str, sort_keys=True)


class ToolGate:
    """Answers one conversation's tool calls; :meth:`call` and :meth:`wrap` are the agent's side."""

    def __init__(self, conversation_id: str, tracer: trace.Tracer, *, on_divergence: str = "stop",
                 stubs: ModuleType | None = None, max_steps: int = 50,
                 normalisers: dict[str, dict[str, list[str]]] | None = None) -> None:
        self.conversation_id = conversation_id
        self._tracer = tracer
        self._stop = on_divergence == "stop"
        self._stubs = stubs
        self._max_steps = max_steps
        self._rules = {tool: {k: ArgumentRule(v) for k, v in args.items()} for tool, args in (normalisers or {}).items()}
        self.divergence: Divergence | None = None
        self.stubbed = 0
        self.steps = 0  # calls made in the conversation
        self.step_of_span: dict[str, int] = {}
        self.abandoned = False
        self._run: RecordedRun | None = None
        self._served: list[bool] = []
        self._cursor = 0
        self._turn = 0
        self._turn_steps = 0
        self._root: Span | None = None
        self._agent = "unknown"

    # --- the harness's side ------------------------------------------------------------------
    def begin_turn(self, turn: int, run: RecordedRun, root: Span) -> None:
        self._run, self._turn, self._root, self._agent = run, turn, root, run.agent_name
        self._served = [False] * len(run.calls)
        self._cursor = 0
        self._turn_steps = 0

    def end_turn(self) -> None:
        """The agent answered: a recorded call it never made is a divergence (stop mode: raised)."""
        run = self._run
        if run is None or self.divergence is not None or self._cursor >= len(run.calls):
            return
        missed = run.calls[self._cursor]
        self.divergence = Divergence(self.steps + 1, self._turn, "not_made", _shown(missed), None)
        if self._stop:
            raise Diverged(f"step {self.steps + 1}: recorded {missed.tool} never made")

    def at_recorded_end(self) -> bool:
        """Every recorded call of the turn was made, the divergence aside (none yet)."""
        return self._run is not None and self.divergence is None and self._cursor >= len(self._run.calls)

    # --- the agent's side --------------------------------------------------------------------
    def call(self, tool: str, arguments: dict[str, Any] | str | None = None) -> Any:
        """Answer a tool call: the recorded observation, a recorded error, or (stub mode) a stub."""
        if self.abandoned:
            raise Abandoned("the conversation timed out")
        if self._run is None:
            raise RuntimeError("ToolGate.call outside a turn")
        self._turn_steps += 1
        if self._turn_steps > self._max_steps:
            raise StepLimit(f"more than {self._max_steps} tool calls in one turn")
        self.steps += 1
        args = parse_arguments(arguments)
        root = self._root
        assert root is not None
        span = self._tracer.start_span(f"execute_tool {tool}", context=trace.set_span_in_context(root), attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool, "gen_ai.tool.type": "function",
            "gen_ai.tool.call.id": f"rerun_{self.steps}", "gen_ai.agent.name": self._agent,
            "gen_ai.conversation.id": self.conversation_id, "gen_ai.tool.call.arguments": _text(args)})
        self.step_of_span[format(span.get_span_context().span_id, "016x")] = self.steps
        try:
            return self._answer(tool, args, span)
        finally:
            span.end()

    def wrap(self, fn: Callable[..., Any], name: str | None = None) -> Callable[..., Any]:
        """``fn`` as the agent sees it, answered by this gate: ``fn`` itself never runs."""
        tool = name or fn.__name__
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def gated(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            return self.call(tool, dict(bound.arguments))

        return gated

    def model_call(self, model: str | None, input_tokens: int = 0, output_tokens: int = 0) -> None:
        """Record one model call of the turn (a ``chat`` span): the candidate's tokens and cost."""
        if self._root is None or self.abandoned:
            return
        span = self._tracer.start_span(f"chat {model or 'unknown'}", context=trace.set_span_in_context(self._root),
                                       attributes={"gen_ai.operation.name": "chat", "gen_ai.agent.name": self._agent,
                                                   "gen_ai.conversation.id": self.conversation_id,
                                                   "gen_ai.usage.input_tokens": input_tokens,
                                                   "gen_ai.usage.output_tokens": output_tokens})
        if model:
            span.set_attribute("gen_ai.request.model", model)
        span.end()

    # --- answers -----------------------------------------------------------------------------
    def _answer(self, tool: str, args: dict[str, Any], span: Span) -> Any:
        run = self._run
        assert run is not None
        index = self._match(tool, args)
        if index is not None:
            self._served[index] = True
            while self._cursor < len(run.calls) and self._served[self._cursor]:
                self._cursor += 1  # the first recorded call not yet made
            recorded = run.calls[index]
            if not recorded.ok:
                span.set_attribute("agenteval.rerun.answer", "recorded")
                span.set_status(Status(StatusCode.ERROR, recorded.error or "error"))
                span.set_attribute("error.type", recorded.error or "error")
                raise RecordedToolError(tool, recorded.error or "error")
            span.set_attribute("agenteval.rerun.answer", "recorded")
            if recorded.result is not None:
                span.set_attribute("gen_ai.tool.call.result", _text(recorded.result))
            return _observation(recorded.result)
        if self.divergence is None:
            self.divergence = self._diverge(tool, args)
        if self._stop:
            span.set_attribute("agenteval.rerun.answer", "diverged")
            span.set_status(Status(StatusCode.ERROR, "not executed: no recorded observation"))
            span.set_attribute("error.type", "rerun.diverged")
            raise Diverged(f"step {self.steps}: {tool} has no recorded observation")
        return self._stub(tool, args, span)

    def _match(self, tool: str, args: dict[str, Any]) -> int | None:
        """The recorded call this one is. Before a divergence: the next one, or one recorded in
        parallel with it (overlapping spans: their order is not the agent's); after it (stub
        mode), the first unserved one of the turn that is the same call."""
        calls = self._run.calls if self._run is not None else []
        if self.divergence is None:
            i = self._cursor
            while i < len(calls) and (i == self._cursor or calls[i].parallel):
                if not self._served[i] and self._same(calls[i], tool, args):
                    return i
                i += 1
            return None
        return next((i for i, c in enumerate(calls) if not self._served[i] and self._same(c, tool, args)), None)

    def _same(self, recorded: RecordedCall, tool: str, args: dict[str, Any]) -> bool:
        if recorded.tool != tool:
            return False
        rules = self._rules.get(tool)
        if not rules:
            return arguments_key(recorded.arguments) == arguments_key(args)
        names = recorded.arguments.keys() | args.keys()
        return all(rules.get(k, ArgumentRule()).matches(recorded.arguments.get(k), args.get(k)) for k in names)

    def _diverge(self, tool: str, args: dict[str, Any]) -> Divergence:
        calls = self._run.calls if self._run is not None else []
        new = {"tool": tool, "arguments": args}
        if self._cursor >= len(calls):
            return Divergence(self.steps, self._turn, "not_recorded", None, new)
        recorded = calls[self._cursor]
        kind = "other_arguments" if recorded.tool == tool else "other_tool"
        return Divergence(self.steps, self._turn, kind, _shown(recorded), new)

    def _stub(self, tool: str, args: dict[str, Any], span: Span) -> Any:
        self.stubbed += 1
        span.set_attribute("agenteval.rerun.answer", "stubbed")
        fn = getattr(self._stubs, tool, None) if self._stubs is not None else None
        try:
            if callable(fn):
                result = fn(**args)
            elif callable(default := getattr(self._stubs, "default", None)):
                result = default(tool, args)
            else:
                raise NoStub(f"no stub for {tool} (define {tool}(**arguments) or default(tool, arguments))")
        except Exception as exc:
            span.set_status(Status(StatusCode.ERROR, str(exc)))
            span.set_attribute("error.type", type(exc).__name__)
            raise
        span.set_attribute("gen_ai.tool.call.result", _text(result))
        return result


def _shown(call: RecordedCall) -> dict[str, Any]:
    return {"tool": call.tool, "arguments": call.arguments}


__all__ = ["Abandoned", "Diverged", "Divergence", "NoStub", "RecordedToolError", "StepLimit", "ToolGate"]
