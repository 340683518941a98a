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

Clock-driven, for a live receiver (``hold``/``tick``/``close_held``; ``otel-agenteval serve``):
spans of one trace come from several services, in any order, in several batches, so a trace is
played only once its root (a span with no parent) has been held for ``grace_s`` (late children
of other services still join it), or after ``idle_s`` with no new span (no root: the runs left
open finish as ``incomplete``). A played trace is one tree: a remote parent that is in the
trace is made local, so the tool spans of another service join the agent's run; start and end
calls keep parents before children even across skewed clocks. Past ``max_spans`` the oldest
trace is played at once (``capacity``); spans of a played trace are ``late``, and a span
sent twice (a retry) is played once (``duplicates``). Between plays
the engine holds nothing open.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable

from ..engine import Engine
from .spanview import RecordedContext, RecordedSpan

_MEMORY = 100_000  # trace ids remembered (finished, or switched to end-only)
# engine.finalise_all reasons for what a play leaves open (the engine counts them as evictions)
_LEFT_OPEN = {"root_end": "ttl", "idle_timeout": "ttl", "capacity": "capacity", "shutdown": "shutdown"}


class _Held:
    """One trace's spans waiting to be played (clock-driven mode)."""

    __slots__ = ("queued", "rooted", "seen", "spans")

    def __init__(self, now: float) -> None:
        self.spans: list[RecordedSpan] = []
        self.seen = now  # last span held
        self.queued = now  # its place in the idle queue, as of then
        self.rooted = False


class Feeder:
    __slots__ = ("_clock", "_end_only", "_engine", "_grace", "_idle", "_max", "_pending", "_played", "_rooted",
                 "_size", "_traces", "completed", "duplicates", "stats")

    def __init__(self, engine: Engine, max_spans: int = 50_000, *, clock: Callable[[], float] = time.monotonic,
                 grace_s: float = 5.0, idle_s: float = 60.0) -> None:
        self._engine = engine
        self._max = max_spans
        self._pending: dict[int, list[RecordedSpan]] = {}  # trace id -> spans waiting for their root
        self._size = 0
        self._played: OrderedDict[int, None] = OrderedDict()
        self._end_only: OrderedDict[int, None] = OrderedDict()
        self.stats = {"held_max": 0, "traces_end_only": 0, "spans_end_only": 0, "late": 0}
        # clock-driven mode only (hold / tick / close_held)
        self._clock = clock
        self._grace = grace_s
        self._idle = idle_s
        self._traces: dict[int, _Held] = {}  # in idle-queue order
        self._rooted: dict[int, float] = {}  # trace id -> when to play it, in that order (one grace for all)
        self.completed = {"root_end": 0, "idle_timeout": 0, "capacity": 0, "shutdown": 0}
        self.duplicates = 0

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
            if parent is None or parent[2]:  # a local root ended: its subtree is complete
                held = pending.get(tid)
                if held is None:
                    engine.start(span)
                    engine.end(span)
                else:
                    self._play_subtree(tid, held, span)
                self._remember(self._played, tid)
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
        self._engine.finalise_all("shutdown")

    # --- internals ----------------------------------------------------------------------------
    def _give_up(self, tid: int) -> None:
        held = self._pending.pop(tid)
        self._size -= len(held)
        self.stats["traces_end_only"] += 1
        self.stats["spans_end_only"] += len(held)
        self._remember(self._end_only, tid)
        for s in held:
            self._engine.end(s)

    @staticmethod
    def _remember(memory: OrderedDict[int, None], tid: int) -> None:
        memory[tid] = None
        if len(memory) > _MEMORY:
            memory.popitem(last=False)

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

    # --- clock-driven mode (a live receiver) ----------------------------------------------------
    @property
    def held_spans(self) -> int:
        return self._size

    @property
    def held_traces(self) -> int:
        return len(self._traces)

    def hold(self, spans: Iterable[RecordedSpan]) -> None:
        """Hold spans (any order, any batch) until their trace is due; see :meth:`tick`."""
        now = self._clock()
        traces, played, rooted = self._traces, self._played, self._rooted
        size = self._size
        for span in spans:
            tid = span._context[0]
            h = traces.get(tid)
            if h is None:
                if tid in played:
                    self.stats["late"] += 1  # its trace was played: counted, not replayed
                    continue
                h = _Held(now)
                traces[tid] = h
            else:
                h.seen = now
            h.spans.append(span)
            size += 1
            if span._parent is None and not h.rooted:
                h.rooted = True
                rooted[tid] = now + self._grace
        self._size = size
        while self._size > self._max and traces:
            self._finish(next(iter(traces)), "capacity")
        if self._size > self.stats["held_max"]:
            self.stats["held_max"] = self._size

    def tick(self) -> int:
        """Play every trace that is due now; returns how many were played."""
        now = self._clock()
        played = 0
        rooted = self._rooted
        while rooted:
            tid = next(iter(rooted))
            if rooted[tid] > now:
                break
            self._finish(tid, "root_end")
            played += 1
        traces = self._traces
        limit = now - self._idle
        while traces:
            tid = next(iter(traces))
            h = traces[tid]
            if h.seen > limit:
                if h.seen == h.queued:
                    break  # fresh and not seen since queued: so is everything queued after it
                h.queued = h.seen  # seen since queued: to the back, as of then (second chance)
                del traces[tid]
                traces[tid] = h
                continue
            self._finish(tid, "idle_timeout")
            played += 1
        return played

    def close_held(self) -> None:
        """Play everything held (shutdown), then finalise whatever is open as ``incomplete``."""
        for tid in list(self._rooted):
            self._finish(tid, "shutdown")  # rooted: played as they are
        for tid in list(self._traces):
            self._finish(tid, "shutdown")
        self._engine.finalise_all("shutdown")

    def _finish(self, tid: int, reason: str) -> None:
        h = self._traces.pop(tid)
        self._rooted.pop(tid, None)
        self._size -= len(h.spans)
        self.completed[reason] += 1
        self._remember(self._played, tid)
        self._play_trace(h.spans)
        if self._engine.open_trajectories:  # no root came for them: incomplete
            self._engine.finalise_all(_LEFT_OPEN[reason])

    def _play_trace(self, spans: list[RecordedSpan]) -> None:
        """One trace as one tree, parents before children: starts by start time, ends by end
        time, each start issued before the first end that comes after it. Times are only ever
        moved to keep a child inside its parent: a child starts no earlier than its parent, and a
        span ends no earlier than a child from another service (clock skew between hosts)."""
        index: dict[int, int] = {}
        unique: list[RecordedSpan] = []
        for s in spans:
            sid = s._context[1]
            if sid in index:
                self.duplicates += 1  # sent twice (an OTLP retry after a lost answer): played once
                continue
            index[sid] = len(unique)
            unique.append(s)
        spans = unique
        n = len(spans)
        parent = [-1] * n
        remote = [False] * n
        children: list[list[int]] = [[] for _ in range(n)]
        for i in range(n):
            s = spans[i]
            p = s._parent
            if p is not None:
                j = index.get(p[1], -1)
                if j >= 0 and j != i:
                    parent[i] = j
                    children[j].append(i)
                    if p[2]:  # a remote parent inside this trace: the same run, another service
                        s._parent = RecordedContext(p[0], p[1], False)
                        remote[i] = True
        order: list[int] = []  # parents before children
        seen = [False] * n
        anchored = [False] * n  # under a local root (no parent, or a remote one outside the trace)
        for top in [i for i in range(n) if parent[i] < 0] + list(range(n)):  # then any cycle
            if seen[top]:
                continue
            seen[top] = True
            p = spans[top]._parent
            anchored[top] = parent[top] < 0 and (p is None or p[2])
            k = len(order)
            order.append(top)
            while k < len(order):
                for c in children[order[k]]:
                    if not seen[c]:
                        seen[c] = True
                        anchored[c] = anchored[order[k]]
                        order.append(c)
                k += 1
        start = [0] * n
        end = [0] * n
        depth = [0] * n
        for i in order:
            s = spans[i]
            st = s._start_time if s._start_time <= s._end_time else s._end_time
            j = parent[i]
            if j >= 0 and seen[j]:
                if start[j] > st:
                    st = start[j]
                depth[i] = depth[j] + 1
            start[i] = st
            end[i] = s._end_time if s._end_time >= st else st
        raised = [False] * n
        for i in reversed(order):
            j = parent[i]
            if j >= 0 and (remote[i] or raised[i]) and end[i] > end[j]:
                end[j] = end[i]
                raised[j] = True
        # a subtree whose parent never came is fed end-only: the engine keeps it by trace, open
        # (incomplete) rather than one run per orphan span
        # starts by (start, depth, index), ends by (end, -depth, index): each a stable sort by time
        # of the indexes laid out by depth (no tuple or Python call per span)
        by_depth: list[list[int]] = [[] for _ in range(max(depth) + 1)] if n else []
        for i in range(n):
            by_depth[depth[i]].append(i)
        starts = [i for level in by_depth for i in level if anchored[i]]
        starts.sort(key=start.__getitem__)
        ends = [i for level in reversed(by_depth) for i in level]
        ends.sort(key=end.__getitem__)
        engine = self._engine
        k = 0
        m = len(starts)
        for e in ends:
            t = end[e]
            while k < m and start[starts[k]] <= t:
                engine.start(spans[starts[k]])
                k += 1
            engine.end(spans[e])
