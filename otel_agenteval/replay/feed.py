"""Recorded spans (end order) -> the engine, as the live span processor would have seen them.

A file holds only finished spans, but the engine learns a run's agent (and so its budget)
when the agent span *starts*: in pure end-only mode a tool call that breaks a rule before the
agent span ends is blamed on ``unknown``. So spans are held per trace until the trace's local
root ends and :data:`GRACE_NS` of span time has passed (children that end a few milliseconds
after their root, as AutoGen + OpenInference's agent span does, still belong to its run), then played through ``Engine.start``/``Engine.end`` in time order: each span's start
before the first end that comes after it, ends in file order. Results then match the live
processor's for the same spans.

Bounded: past ``max_spans`` held spans the oldest trace is fed end-only (counted), and so is
every later span of it. At the end, traces whose root never came are fed end-only and finish
as ``incomplete``; spans of an already finished trace that come after its root are ``late``.
A live receiver, whose spans come in any order, has its own feeder: :mod:`.live`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from ..engine.engine import Engine
from .spanview import RecordedSpan

_MEMORY = 100_000  # trace ids remembered (finished, or switched to end-only)


def remember(memory: OrderedDict[int, None], tid: int) -> None:
    """``tid`` into a bounded memory of trace ids (the oldest forgotten past :data:`_MEMORY`)."""
    memory[tid] = None
    if len(memory) > _MEMORY:
        memory.popitem(last=False)


GRACE_NS = 1_000_000_000  # span time a trace waits after its root ends for children that end later


class _Rooted:
    """A trace whose local root(s) ended: played once a span ends ``GRACE_NS`` after the first
    (AutoGen + OpenInference end the agent's span a few milliseconds after the run's root)."""

    __slots__ = ("due_ns", "roots")

    def __init__(self, root: RecordedSpan, due_ns: int) -> None:
        self.roots = [root]
        self.due_ns = due_ns


class Feeder:
    __slots__ = ("_end_only", "_engine", "_max", "_pending", "_played", "_rooted", "_size", "stats")

    def __init__(self, engine: Engine, max_spans: int = 50_000) -> None:
        self._engine = engine
        self._max = max_spans
        self._pending: dict[int, list[RecordedSpan]] = {}  # trace id -> spans waiting for their root
        self._rooted: dict[int, _Rooted] = {}  # trace id -> its ended roots, until their grace has passed
        self._size = 0
        self._played: OrderedDict[int, None] = OrderedDict()
        self._end_only: OrderedDict[int, None] = OrderedDict()
        self.stats = {"held_max": 0, "traces_end_only": 0, "spans_end_only": 0, "late": 0}

    def add(self, spans: Iterable[RecordedSpan]) -> None:
        """Take spans in end order (one record's batch at a time: the loop is here, not per call)."""
        pending, end_only, stats, engine = self._pending, self._end_only, self.stats, self._engine
        for span in spans:
            tid = span._context[0]
            parent = span._parent
            if tid in end_only:
                stats["spans_end_only"] += 1
                engine.end(span)
                continue
            rooted = self._rooted
            if rooted and next(iter(rooted.values())).due_ns <= span._end_time:
                self._play_due(span._end_time)
            if parent is None or parent[2]:  # a local root ended: its subtree is complete after the grace
                r = rooted.get(tid)
                if r is None:
                    rooted[tid] = _Rooted(span, span._end_time + GRACE_NS)
                else:
                    r.roots.append(span)
                continue
            held = pending.get(tid)
            if held is None:
                pending[tid] = [span]
            else:
                held.append(span)
            self._size += 1
            if self._size > self._max:
                while self._size > self._max:
                    self._give_up(next(iter(pending)))
            elif self._size > stats["held_max"]:
                stats["held_max"] = self._size

    def close(self) -> None:
        """Feed what is still held (end-only), then finalise every open trajectory."""
        self._play_due(None)
        for tid, held in list(self._pending.items()):
            if tid in self._played:
                self.stats["late"] += len(held)
            else:
                self.stats["spans_end_only"] += len(held)
                self.stats["traces_end_only"] += 1
                for s in held:
                    self._engine.end(s)
        self._pending.clear()
        self._size = 0
        self._engine.fragments.settle_now()  # pieces of runs, a trace each: grouped now the input is whole
        self._engine.finalise_all("shutdown")

    # --- internals ----------------------------------------------------------------------------
    def _play_due(self, now_ns: int | None) -> None:
        """Play the rooted traces whose grace has passed by ``now_ns`` (span time; None: all)."""
        rooted = self._rooted
        while rooted:
            tid, r = next(iter(rooted.items()))
            if now_ns is not None and r.due_ns > now_ns:
                return
            del rooted[tid]
            for root in r.roots:
                held = self._pending.get(tid)
                if held is None:
                    self._engine.start(root)
                    self._engine.end(root)
                else:
                    self._play_subtree(tid, held, root)
            remember(self._played, tid)

    def _give_up(self, tid: int) -> None:
        if self._rooted:  # rooted traces waiting for late children go first, played as they are
            self._play_due(None)
            if tid not in self._pending:
                return
        held = self._pending.pop(tid)
        self._size -= len(held)
        self.stats["traces_end_only"] += 1
        self.stats["spans_end_only"] += len(held)
        remember(self._end_only, tid)
        for s in held:
            self._engine.end(s)

    def _play_subtree(self, tid: int, held: list[RecordedSpan], root: RecordedSpan) -> None:
        ids = {s._context[1] for s in held}
        ids.add(root._context[1])
        if {s._parent[1] for s in held} <= ids:  # type: ignore[index]  # held spans have parents
            # every chain ends at this root (another open root is never held): all of them are its
            del self._pending[tid]
            mine = held
        else:  # another local root of this trace is still open: keep its spans for it
            ours = self._descendants(held, root)
            rest = [s for s in held if s.context.span_id not in ours]
            mine_list = [s for s in held if s.context.span_id in ours]
            if rest:
                self._pending[tid] = rest
            else:
                del self._pending[tid]
            self._size -= len(mine_list)
            mine_list.append(root)
            self._play(mine_list)
            return
        self._size -= len(mine)
        mine.append(root)
        self._play(mine)

    @staticmethod
    def _descendants(held: list[RecordedSpan], root: RecordedSpan) -> set[int]:
        children: dict[int, list[int]] = {}
        for s in held:
            children.setdefault(s._parent[1], []).append(s._context[1])  # type: ignore[index]
        found: set[int] = set()
        todo = [root._context[1]]
        while todo:
            for c in children.get(todo.pop(), ()):
                if c not in found:
                    found.add(c)
                    todo.append(c)
        return found

    def _play(self, spans: list[RecordedSpan]) -> None:
        """Starts by start time (a parent before its child at the same time: it ends later, so it
        comes later in ``spans``), each issued before the first end that comes after it."""
        # (start, -index): ties go to the later index, the parent; a start after the end counts as the end
        keyed = sorted([(s._start_time if s._start_time <= s._end_time else s._end_time, -i)
                        for i, s in enumerate(spans)])
        engine = self._engine  # typed: the compiled build calls its methods directly
        i, n = 0, len(keyed)
        for s in spans:  # file order is end order
            t = s._end_time
            while i < n:
                first_start, neg = keyed[i]
                if first_start > t:
                    break
                engine.start(spans[-neg])
                i += 1
            engine.end(s)
