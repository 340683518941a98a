"""Spans of a live receiver (``otel-agenteval serve``) -> the engine, each trace once it is complete.

Spans of one trace come from several services, in any order, in several batches, and no clock
says when the last one has come. So a trace is held until its root (a span with no parent) has
been held for ``grace_s`` (late children of other services still join it), or until ``idle_s``
pass with no new span (no root: the runs left open finish as ``incomplete``). A played trace is
one tree: a remote parent that is in the trace is made local, so the tool spans of another
service join the agent's run; start and end calls keep parents before children even across
skewed clocks. Past ``max_spans`` held spans the oldest trace is played at once (``capacity``);
spans of a played trace are ``late``, and a span sent twice (a retry) is played once
(``duplicates``). Between plays the engine holds nothing open. The consumer thread of
:mod:`otel_agenteval.receiver.pipeline` is the only caller: no locks here.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any, final

from ..engine import Engine
from .feed import remember
from .spanview import RecordedContext, RecordedSpan

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



class LiveFeeder:
    __slots__ = ("_clock", "_engine", "_grace", "_idle", "_max", "_played", "_rooted", "_size", "_traces",
                 "completed", "duplicates", "stats")

    def __init__(self, engine: Engine, max_spans: int = 50_000, *, clock: Callable[[], float] = time.monotonic,
                 grace_s: float = 5.0, idle_s: float = 60.0) -> None:
        self._engine = engine
        self._max = max_spans
        self._size = 0
        self._played: OrderedDict[int, None] = OrderedDict()  # trace ids played (late spans are counted)
        self.stats = {"held_max": 0, "late": 0}
        self._clock = clock
        self._grace = grace_s
        self._idle = idle_s
        self._traces: dict[int, _Held] = {}  # in idle-queue order
        self._rooted: dict[int, float] = {}  # trace id -> when to play it, in that order (one grace for all)
        self.completed = {"root_end": 0, "idle_timeout": 0, "capacity": 0, "shutdown": 0}
        self.duplicates = 0

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
        remember(self._played, tid)
        self._play_trace(h.spans)
        if self._engine.open_trajectories:  # no root came for them: incomplete
            self._engine.finalise_all(_LEFT_OPEN[reason])

    def _play_trace(self, spans: list[RecordedSpan]) -> None:
        """One trace as one tree, parents before children: starts by start time, ends by end
        time, each start issued before the first end that comes after it. Times are only ever
        moved to keep a child inside its parent: a child starts no earlier than its parent, and a
        span ends no earlier than a child from another service (clock skew between hosts)."""
        nodes: dict[int, _Node] = {}
        for s in spans:
            ids: tuple[Any, ...] = s._context  # a tuple: indexed natively when compiled
            node = _Node(s)
            if nodes.setdefault(ids[1], node) is not node:
                self.duplicates += 1  # sent twice (an OTLP retry after a lost answer): played once
        arrived = list(nodes.values())
        for node in arrived:
            p: tuple[Any, ...] | None = node.span._parent
            if p is not None:
                up = nodes.get(p[1])
                if up is not None and up is not node:
                    node.parent = up
                    if up.children is None:
                        up.children = [node]
                    else:
                        up.children.append(node)
                    if p[2]:  # a remote parent inside this trace: the same run, another service
                        node.span._parent = RecordedContext(p[0], p[1], False)
                        node.remote = True
        order = _tree_order(arrived)
        for node in order:
            s = node.span
            first, last = s._start_time, s._end_time
            st = first if first <= last else last
            up = node.parent
            if up is not None:
                if up.start > st:
                    st = up.start
                node.depth = up.depth + 1
            node.start = st
            node.end = last if last >= st else st
        for node in reversed(order):
            up = node.parent
            if up is not None and (node.remote or node.raised) and node.end > up.end:
                up.end = node.end
                up.raised = True
        for node in arrived:  # the links make cycles: cut, the nodes are freed now, not by the GC
            node.parent = None
            node.children = None
        # a subtree whose parent never came is fed end-only: the engine keeps it by trace, open
        # (incomplete) rather than one run per orphan span
        # starts by (start, depth, arrival), ends by (end, -depth, arrival): each a stable sort by
        # time of the nodes laid out by depth
        by_depth: list[list[_Node]] = [[] for _ in range(max(n.depth for n in arrived) + 1)] if arrived else []
        for node in arrived:
            by_depth[node.depth].append(node)
        starts = [node for level in by_depth for node in level if node.anchored]
        if not _in_start_order(starts):  # usually they are: spans arrive in end order
            starts.sort(key=_start_of)
        ends = [node for level in reversed(by_depth) for node in level]
        if not _in_end_order(ends):
            ends.sort(key=_end_of)
        engine = self._engine
        k = 0
        m = len(starts)
        for e in ends:
            t = e.end
            while k < m and starts[k].start <= t:
                engine.start(starts[k].span)
                k += 1
            engine.end(e.span)


@final
class _Node:
    """One span of a trace being played: its place in the tree and its times as played."""

    def __init__(self, span: RecordedSpan) -> None:
        self.span = span
        self.parent: _Node | None = None  # in this trace (a parent that never came: None)
        self.children: list[_Node] | None = None
        self.remote = False  # its parent is in this trace but another service's
        self.placed = False  # in the tree order yet
        self.anchored = False  # under a local root (no parent, or a remote one outside the trace)
        self.start = 0
        self.end = 0
        self.depth = 0
        self.raised = False  # its end was moved up to a child's


def _tree_order(arrived: list[_Node]) -> list[_Node]:
    """Parents before children, breadth first from each top (a span with no parent in the trace),
    then any cycle from where it was met."""
    order: list[_Node] = []
    for top in [n for n in arrived if n.parent is None] + arrived:
        if top.placed:
            continue
        top.placed = True
        p: tuple[Any, ...] | None = top.span._parent
        top.anchored = top.parent is None and (p is None or p[2])
        k = len(order)
        order.append(top)
        while k < len(order):
            up = order[k]
            if up.children is not None:
                for c in up.children:
                    if not c.placed:
                        c.placed = True
                        c.anchored = up.anchored
                        order.append(c)
            k += 1
    return order


def _in_start_order(nodes: list[_Node]) -> bool:
    return all(nodes[i - 1].start <= nodes[i].start for i in range(1, len(nodes)))


def _in_end_order(nodes: list[_Node]) -> bool:
    return all(nodes[i - 1].end <= nodes[i].end for i in range(1, len(nodes)))


def _start_of(node: _Node) -> int:
    return node.start


def _end_of(node: _Node) -> int:
    return node.end
