"""Recorded spans (end order) -> the engine, as the live span processor would have seen them.

A file holds only finished spans, but the engine learns a run's agent (and so its budget)
when the agent span *starts*: in pure end-only mode a tool call that breaks a rule before the
agent span ends is blamed on ``unknown``. So spans are held per trace until the trace's local
root ends, then played through ``Engine.start``/``Engine.end`` in time order: each span's start
before the first end that comes after it, ends in file order. Results then match the live
processor's for the same spans.

Bounded: past ``max_spans`` held spans the oldest trace is fed end-only (counted), and so is
every later span of it. At the end, traces whose root never came are fed end-only and finish
as ``incomplete``; spans of an already finished trace that come after its root are ``late``.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from ..engine import Engine
from .spanview import RecordedSpan

_MEMORY = 100_000  # trace ids remembered (finished, or switched to end-only)


class Feeder:
    __slots__ = ("_end", "_end_only", "_engine", "_max", "_pending", "_played", "_size", "_start", "stats")

    def __init__(self, engine: Engine, max_spans: int = 50_000) -> None:
        self._engine = engine
        self._start = engine.start
        self._end = engine.end
        self._max = max_spans
        self._pending: dict[int, list[RecordedSpan]] = {}  # trace id -> spans waiting for their root
        self._size = 0
        self._played: OrderedDict[int, None] = OrderedDict()
        self._end_only: OrderedDict[int, None] = OrderedDict()
        self.stats = {"held_max": 0, "traces_end_only": 0, "spans_end_only": 0, "late": 0}

    def add(self, span: RecordedSpan) -> None:
        tid = span.context.trace_id
        parent = span.parent
        if tid in self._end_only:
            self.stats["spans_end_only"] += 1
            self._end(span)
            return
        pending = self._pending
        if parent is None or parent.is_remote:  # a local root ended: its subtree is complete
            held = pending.get(tid)
            if held is None:
                self._start(span)
                self._end(span)
            else:
                self._play_subtree(tid, held, span)
            self._remember(self._played, tid)
            return
        held = pending.get(tid)
        if held is None:
            pending[tid] = [span]
        else:
            held.append(span)
        self._size += 1
        if self._size > self._max:
            while self._size > self._max:
                self._give_up(next(iter(pending)))
        elif self._size > self.stats["held_max"]:
            self.stats["held_max"] = self._size

    def close(self) -> None:
        """Feed what is still held (end-only), then finalise every open trajectory."""
        for tid, held in list(self._pending.items()):
            if tid in self._played:
                self.stats["late"] += len(held)
            else:
                self.stats["spans_end_only"] += len(held)
                self.stats["traces_end_only"] += 1
                for s in held:
                    self._end(s)
        self._pending.clear()
        self._size = 0
        self._engine.finalise_all("shutdown")

    # --- internals ----------------------------------------------------------------------------
    def _give_up(self, tid: int) -> None:
        held = self._pending.pop(tid)
        self._size -= len(held)
        self.stats["traces_end_only"] += 1
        self.stats["spans_end_only"] += len(held)
        self._remember(self._end_only, tid)
        for s in held:
            self._end(s)

    @staticmethod
    def _remember(memory: OrderedDict[int, None], tid: int) -> None:
        memory[tid] = None
        if len(memory) > _MEMORY:
            memory.popitem(last=False)

    def _play_subtree(self, tid: int, held: list[RecordedSpan], root: RecordedSpan) -> None:
        children: dict[int, list[RecordedSpan]] = {}
        for s in held:
            p = s.parent
            if p is not None:
                children.setdefault(p.span_id, []).append(s)
        depth = {root.context.span_id: 0}
        todo = [root.context.span_id]
        while todo:
            sid = todo.pop()
            d = depth[sid] + 1
            for c in children.get(sid, ()):
                cid = c.context.span_id
                if cid not in depth:
                    depth[cid] = d
                    todo.append(cid)
        if len(depth) == len(held) + 1:
            del self._pending[tid]
            mine = held
        else:  # another local root of this trace is still open: keep its spans
            mine = [s for s in held if s.context.span_id in depth]
            rest = [s for s in held if s.context.span_id not in depth]
            if rest:
                self._pending[tid] = rest
            else:
                del self._pending[tid]
        self._size -= len(mine)
        mine.append(root)
        self._play(mine, depth)

    def _play(self, spans: list[RecordedSpan], depth: dict[int, int]) -> None:
        def start_key(s: RecordedSpan) -> Any:
            return (min(s.start_time, s.end_time), depth[s.context.span_id])

        starts = sorted(spans, key=start_key)
        start, end = self._start, self._end
        i, n = 0, len(starts)
        for s in spans:  # file order is end order
            t = s.end_time
            while i < n and min(starts[i].start_time, starts[i].end_time) <= t:
                start(starts[i])
                i += 1
            end(s)
