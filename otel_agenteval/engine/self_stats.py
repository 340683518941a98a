"""The monitor's own counters (``agenteval_processor_*``): one dict, laid out here, shared by the
engine's parts, each counting what it drops, evicts or catches."""

from __future__ import annotations

from typing import Any


def new_stats() -> dict[str, Any]:
    return {
        "spans": {"tool": 0, "llm": 0, "agent": 0, "confirmation": 0, "other": 0},
        "evicted": {"capacity": 0, "ttl": 0, "shutdown": 0},
        "conversations_evicted": {"capacity": 0, "ttl": 0},
        "tool_calls": {},  # (service, agent, tool, ok) -> count, made from the assembler's rows when read
        "late": 0,
        "model_only_runs": 0,  # traces of model calls alone (no agent span, no tool): not agent runs
        "fragmented": {},  # instrumentation scope -> roots that are pieces of runs, each a trace of its own
        "fragments_stitched": {},  # scope -> pieces of runs put back into one run by their time windows
        "fragments_unstitched": {},  # (scope, reason) -> pieces of runs left apart: concurrent, alone, buffer_full
        "fragment_suspects": {},  # scope -> model-call and workflow roots alone, fragmented if its tools are too
        "unread": {},  # instrumentation scope -> spans that look like agent work and were not read
        "steps_dropped": 0,
        "routes_dropped": 0,
        "dropped": {"reentrant": 0, "duplicate": 0, "after_shutdown": 0, "queue_full": 0,
                    "shutdown_timeout": 0},  # spans not taken, by why
        "state_dropped": 0,  # entries of bounded per-run and conversation maps not kept
        "clock_skew": 0,  # recorded spans dated in the future (not moving the replay clock)
        "log_lines_dropped": {"agenteval.violation": 0, "agenteval.blocked": 0,
                              "agenteval.would_block": 0},  # lines the log's sampling left out, by event
        "errors": {"on_start": 0, "on_end": 0, "rule": 0, "callback": 0, "finish": 0, "shutdown": 0},
    }


class SpanCounts:
    """Spans ended, by kind (``agenteval_spans_total{kind}``): one field each, counted on every span."""

    __slots__ = ("agent", "confirmation", "llm", "other", "tool")

    def __init__(self) -> None:
        self.tool = 0
        self.llm = 0
        self.agent = 0
        self.confirmation = 0
        self.other = 0

    def as_dict(self) -> dict[str, int]:
        return {"tool": self.tool, "llm": self.llm, "agent": self.agent, "confirmation": self.confirmation,
                "other": self.other}


def read_stats(stats: dict[str, Any], spans: SpanCounts, tool_calls: dict[Any, int],
               clock_skew: int | None) -> dict[str, Any]:
    """``stats`` brought up to date with what is kept elsewhere on the per-span path (live, not a copy)."""
    stats["spans"].update(spans.as_dict())
    stats["tool_calls"] = tool_calls
    if clock_skew is not None:
        stats["clock_skew"] = clock_skew
    return stats
