"""The floor with the rules' state: :class:`RulesFloor`, the least the shipped rules must keep on
the benchmark's mixes beyond :class:`_floor.Floor`, with no rule run.

The processor / floor target (issue 44) reads the processor against a floor that keeps no
conversation and tests no value. This arm says how much of that ratio the rules' own state takes
when written as plainly as the floor (``overhead.py --rules-floor``: rules floor / floor, and
processor / rules floor), so the gap left is the processor's design, not the job.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import orjson
from _floor import WRITE_TOOL, Floor

from otel_agenteval.policy.sections import Limits
from otel_agenteval.reading.provenance import identifiers as ids  # the product's own tests: the least they cost

CONVERSATION = "gen_ai.conversation.id"
MAX_CONVERSATIONS = Limits().max_conversations  # the policy's default bound on conversations kept


class RulesFloor(Floor):
    """The floor plus the least the shipped rules' state asks of the mixes (no rule is run): each
    run bound to its conversation at its start (a bounded dict by id), each tool step's arguments and
    result kept, the write's argument values tested for an identifier (the tainted-flow rule's first
    question of a sink value), and at the run's end its writes and its tool results, by column, handed
    to the conversation for a later turn (duplicate writes and tainted values across turns)."""

    def __init__(self) -> None:
        super().__init__()
        self.conversations: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def new_run(self, span: Any) -> dict[str, Any]:
        run = super().new_run(span)
        run["results"], run["conversation"] = [], self.conversation(span._attributes._dict.get(CONVERSATION))
        return run

    def conversation(self, cid: Any) -> dict[str, Any] | None:
        if not isinstance(cid, str):
            return None
        conv = self.conversations.get(cid)
        if conv is None:
            conv = self.conversations[cid] = {"writes": set(), "unread": None}
            if len(self.conversations) > MAX_CONVERSATIONS:
                self.conversations.popitem(last=False)
        return conv

    def take(self, run: dict[str, Any], span: Any) -> None:
        super().take(run, span)
        attrs = span._attributes._dict
        op = attrs.get("gen_ai.operation.name")
        if op == "execute_tool":
            tool, arguments = attrs.get("gen_ai.tool.name"), attrs.get("gen_ai.tool.call.arguments")
            run["results"].append((tool, span._context.span_id, arguments, attrs.get("gen_ai.tool.call.result")))
            if tool == WRITE_TOOL:
                for value in orjson.loads(arguments).values():
                    if isinstance(value, str) and ids.value_may_hold_identifier(value) and ids.identifiers(value):
                        raise AssertionError("the floor's mix writes no identifier")
        elif op == "invoke_agent" and run["conversation"] is not None:
            conv = run["conversation"]
            conv["writes"] |= run["writes"]
            kept = [r for r in run["results"] if r[3] is not None]
            if kept:
                tools, span_ids, arguments, results = zip(*kept)
                unread = {"tools": tools, "span_ids": span_ids, "arguments": arguments, "results": results}
                old = conv["unread"]
                conv["unread"] = unread if old is None else {k: old[k] + unread[k] for k in unread}
