"""One recorded conversation rerun by the candidate agent, under a tracer provider of its own with
the span processor attached: every rule, budget and price applies to the new run as it would live.

The agent is a callable ``agent(turn: UserTurn, tools: ToolGate) -> answer`` (or a coroutine
function): it gets each recorded user turn in order and makes its tool calls through the gate
(``tools.call(name, arguments)``, or functions wrapped by ``tools.wrap(fn)``); see
:mod:`.frameworks` for pydantic-ai and the OpenAI Agents SDK. The conversation runs in a thread of
its own: past ``timeout_s`` it is reported as ``timed_out`` and abandoned (its gate refuses every
later call); an agent that raises is reported as ``raised``; more than ``max_steps`` tool calls in
a turn is ``looped``. Nothing the agent does can stop the rerun of the other conversations.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.trace import Status, StatusCode
from prometheus_client import CollectorRegistry

from ..model.trajectory import Trajectory
from ..model.violation import Violation
from ..policy.policy import Policy
from ..processor import TrajectoryProcessor
from .gate import Abandoned, Diverged, Divergence, RecordedToolError, StepLimit, ToolGate
from .recording import Finding, RecordedConversation

STATUSES = ("identical", "diverged", "stubbed", "raised", "timed_out", "looped", "not_rerunnable")


@dataclass
class UserTurn:
    """What the agent is given for one turn: the recorded user text and where it belongs."""

    text: str | None  # None when the recording did not capture messages
    index: int  # 0-based turn of the conversation
    conversation_id: str
    attributes: dict[str, Any]  # the recorded run's root attributes (case id, trial, ...)
    memory: dict[str, Any]  # the same dict every turn of the conversation: the agent's own history
    tracer_provider: TracerProvider  # the candidate's provider (the processor is attached)


@dataclass
class Settings:
    """How conversations are rerun (picklable: sent as is to ``--jobs`` workers)."""

    policy: Policy | None = None
    policy_file: str | None = None  # read in each worker process when ``policy`` is not sent (it may not pickle)
    on_divergence: str = "stop"  # stop | stub
    stubs: str | None = None  # module name of the stub functions (stub mode)
    max_steps: int = 50  # tool calls per turn
    timeout_s: float = 60.0  # per conversation
    normalisers: dict[str, dict[str, list[str]]] | None = None  # tool -> argument -> normaliser names
    keep_spans: bool = False  # return the candidate's spans as OTLP JSON lines (--traces-out)


@dataclass
class ConversationResult:
    """One conversation's rerun: its status, the first divergence, and old against new."""

    id: str
    status: str
    turns: int
    turns_run: int = 0
    divergence: Divergence | None = None
    stubbed: int = 0
    detail: str | None = None
    old_steps: int = 0
    new_steps: int = 0
    old_cost_usd: float = 0.0
    new_cost_usd: float = 0.0
    old_findings: list[Finding] = field(default_factory=list)
    new_findings: list[Finding] = field(default_factory=list)
    new_traces: list[str] = field(default_factory=list)
    spans: list[str] = field(default_factory=list)  # OTLP JSON lines, when kept


class _Kept(SpanProcessor):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


def _call_agent(agent: Callable[..., Any], turn: UserTurn, gate: ToolGate) -> Any:
    answer = agent(turn, gate)
    if inspect.isawaitable(answer):
        return asyncio.run(answer)  # type: ignore[arg-type]
    return answer


def rerun_conversation(conversation: RecordedConversation, agent: Callable[..., Any], settings: Settings,
                       stubs: ModuleType | None = None) -> ConversationResult:
    """Rerun one recorded conversation with ``agent``; never raises on the agent's account."""
    result = ConversationResult(conversation.id, "identical", len(conversation.runs), old_steps=conversation.steps,
                                old_cost_usd=conversation.cost_usd)
    if conversation.missing_content:
        result.status, result.detail = "not_rerunnable", conversation.missing_content
        result.old_findings = [f for r in conversation.runs for f in r.findings]
        return result
    service = conversation.runs[0].service_name if conversation.runs else "unknown"
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    violations: list[Violation] = []
    runs: list[Trajectory] = []
    provider.add_span_processor(TrajectoryProcessor(settings.policy, registry=CollectorRegistry(),
                                                    on_violation=[violations.append], on_trajectory=[runs.append]))
    kept = _Kept()
    if settings.keep_spans:
        provider.add_span_processor(kept)
    tracer = provider.get_tracer("otel_agenteval.rerun")
    gate = ToolGate(conversation.id, tracer, on_divergence=settings.on_divergence, stubs=stubs,
                    max_steps=settings.max_steps, normalisers=_normalisers(settings))
    outcome: dict[str, Any] = {}
    worker = threading.Thread(target=_turns, args=(conversation, agent, gate, tracer, provider, outcome, result),
                              name=f"rerun {conversation.id}", daemon=True)
    worker.start()
    worker.join(settings.timeout_s)
    if worker.is_alive():
        gate.abandoned = True
        result.status, result.detail = "timed_out", f"no answer within {settings.timeout_s:g}s"
    else:
        result.status, result.detail = outcome.get("status", "identical"), outcome.get("detail")
    result.divergence, result.stubbed, result.new_steps = gate.divergence, gate.stubbed, gate.steps
    if result.status == "identical" and gate.divergence is not None:
        result.status = "stubbed" if gate.stubbed else "diverged"
    provider.force_flush()
    result.new_cost_usd = sum(t.cost_usd for t in runs)
    where = gate.step_of_span
    result.new_findings = [Finding(v.rule, v.severity, v.tool, where.get(v.span_id or "")) for v in violations]
    result.old_findings = [f for r in conversation.runs for f in r.findings]
    if settings.keep_spans:
        from ..replay.write import otlp_json_line

        result.spans = [otlp_json_line(kept.spans)] if kept.spans else []
    provider.shutdown()
    return result


def _normalisers(settings: Settings) -> dict[str, dict[str, list[str]]]:
    """The policy's per-argument normalisers (``tools.<name>.arguments``), then the caller's."""
    tools = settings.policy.tools if settings.policy is not None else {}
    out = {name: dict(t.arguments) for name, t in tools.items() if t.arguments}
    for name, args in (settings.normalisers or {}).items():
        out[name] = {**out.get(name, {}), **args}
    return out


def _turns(conversation: RecordedConversation, agent: Callable[..., Any], gate: ToolGate, tracer: Any,
           provider: TracerProvider, outcome: dict[str, Any], result: ConversationResult) -> None:
    memory: dict[str, Any] = {}
    for i, run in enumerate(conversation.runs):
        attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": run.agent_name,
                      "gen_ai.conversation.id": conversation.id, "agenteval.rerun.recorded_trace_id": run.trace_id}
        attributes.update({k: v for k, v in run.attributes.items() if k.startswith("agenteval.")})
        root = tracer.start_span(f"invoke_agent {run.agent_name}", attributes=attributes)
        result.new_traces.append(format(root.get_span_context().trace_id, "032x"))
        result.turns_run = i + 1
        gate.begin_turn(i + 1, run, root)
        turn = UserTurn(run.user_text, i, conversation.id, dict(run.attributes), memory, provider)
        try:
            try:
                _call_agent(agent, turn, gate)
            except RecordedToolError:
                if not gate.at_recorded_end():
                    raise
                # the recorded run ended at that failed call too: the agent failed where it failed
            gate.end_turn()
        except Diverged:
            root.set_attribute("agenteval.rerun.stopped", "diverged")
            outcome["status"] = "diverged"
            return
        except StepLimit as exc:
            outcome["status"], outcome["detail"] = "looped", str(exc)
            root.set_status(Status(StatusCode.ERROR, str(exc)))
            return
        except Abandoned:
            return
        except BaseException as exc:  # noqa: BLE001 - the agent's own failure is a result, not the harness's
            outcome["status"], outcome["detail"] = "raised", f"{type(exc).__name__}: {exc}"
            root.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            return
        finally:
            root.end()


__all__ = ["STATUSES", "ConversationResult", "Settings", "UserTurn", "rerun_conversation"]
