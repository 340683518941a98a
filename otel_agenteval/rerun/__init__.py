"""Rerun a candidate agent on recorded conversations, the recorded tool observations served back.

::

    from otel_agenteval.rerun import rerun

    def agent(turn, tools):              # turn: UserTurn; tools: ToolGate
        order = tools.call("lookup_order", {"order_id": "12345"})
        return "done"

    result = rerun(["traces.jsonl.gz"], agent, policy=policy)
    for c in result.conversations:
        c.status, c.divergence            # identical | diverged | stubbed | raised | timed_out | ...

A front door: reads recordings with ``replay`` (on the stage below) and checks the candidate's
runs with the span processor; imported by ``cli``. See ``docs/rerun.md``.
"""

from __future__ import annotations

from .gate import Abandoned, Diverged, Divergence, NoStub, RecordedToolError, StepLimit, ToolGate
from .harness import STATUSES, ConversationResult, Settings, UserTurn
from .recording import Finding, RecordedCall, RecordedConversation, RecordedRun, read_conversations
from .run import AgentError, RerunResult, load_agent, rerun

__all__ = ["STATUSES", "Abandoned", "AgentError", "ConversationResult", "Diverged", "Divergence", "Finding", "NoStub",
           "RecordedCall", "RecordedConversation", "RecordedRun", "RecordedToolError", "RerunResult", "Settings",
           "StepLimit", "ToolGate", "UserTurn", "load_agent", "read_conversations", "rerun"]
