"""``overhead.py --in-calls``: a processor's calls timed where the SDK makes them."""

from __future__ import annotations

import collections
import time
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor


class TimedCalls(SpanProcessor):
    """A processor's calls, each timed where the SDK makes it, by place in the run (:attr:`ns`:
    ``start:chat``, ``end:execute_tool create_claim``, ``end:chat, the run's first``, ...: a tool's
    end by the tool's name, a model call's as the run's first or a later one) and so by call and
    span kind (:attr:`by_kind`): the costs that come once a run (the first model call, the write,
    the run's end) apart from those every span pays. The timing itself adds to the arm's time:
    with ``--in-calls`` the arm's ratio is not the headline."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.ns: dict[str, list[int]] = collections.defaultdict(list)
        self._chats: set[int] = set()  # traces whose first model call ended (the mixes: a run a trace)

    @property
    def by_kind(self) -> dict[str, list[int]]:
        """The calls by call and span kind (``end:execute_tool``), the places of each kind together."""
        out: dict[str, list[int]] = collections.defaultdict(list)
        for place, ns in self.ns.items():
            out[place.split(" ")[0].rstrip(",")].extend(ns)
        return out

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        t0 = time.perf_counter_ns()
        self.inner.on_start(span, parent_context)
        self.ns["start:" + str(span._attributes.get("gen_ai.operation.name"))].append(time.perf_counter_ns() - t0)

    def on_end(self, span: ReadableSpan) -> None:
        t0 = time.perf_counter_ns()
        self.inner.on_end(span)
        ns = time.perf_counter_ns() - t0
        self.ns[self._place(span)].append(ns)

    def _place(self, span: ReadableSpan) -> str:
        attrs = span._attributes
        op = str(attrs.get("gen_ai.operation.name"))
        trace = span._context.trace_id
        if op == "execute_tool":
            return f"end:execute_tool {attrs.get('gen_ai.tool.name')}"
        if op == "chat":
            first = trace not in self._chats
            self._chats.add(trace)
            return "end:chat, the run's first" if first else "end:chat, a later one"
        if op == "invoke_agent":
            self._chats.discard(trace)
        return "end:" + op

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self.inner.force_flush(timeout_millis))
