"""Spans of a live receiver (``otel-agenteval serve``) -> the engine, each trace once it is complete.

Spans of one trace come from several services, in any order, in several batches, and no clock
says when the last one has come. So a trace is held until its root (a span with no parent) has
been held for ``grace_s`` (late children of other services still join it), or until ``idle_s``
pass with no new span (no root: the runs left open finish as ``incomplete``). A played trace is
one tree: a remote parent that is in the trace is made local, so the tool spans of another
service join the agent's run; start and end calls keep parents before children even across
skewed clocks. Past ``max_spans`` held spans the oldest trace is played at once (``capacity``), and
past ``max_bytes`` held bytes too (``memory``; a batch's bytes are given to :meth:`LiveFeeder.hold`);
spans of a played trace are ``late``, and a span sent twice (a retry) is played once
(``duplicates``). Between plays the engine holds nothing open. :mod:`otel_agenteval.receiver.pipeline`
calls it from one thread at a time: no locks here.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from typing import Any, final

from ..engine.engine import Engine
from .feed import remember
from .spanview import RecordedContext, RecordedSpan

UNBOUNDED = 1 << 60  # a budget of spans with no bound (a machine int when compiled)
# engine.finalise_all reasons for what a play leaves open (the engine counts them as evictions)
_LEFT_OPEN = {"root_end": "ttl", "idle_timeout": "ttl", "capacity": "capacity", "memory": "capacity",
              "shutdown": "shutdown"}


class _Held:
    """One trace's spans waiting to be played (clock-driven mode)."""

    __slots__ = ("due", "nbytes", "played", "queued", "rooted", "seen", "spans", "tid")

    def __init__(self, tid: int, now: float) -> None:
        self.tid = tid
        self.spans: list[RecordedSpan] = []
        self.nbytes = 0  # what its spans are counted at (memory budget)
        self.seen = now  # last span held
        self.queued = now  # its place in the idle queue, as of then
        self.rooted = False
        self.due = 0.0  # rooted: when to play it
        self.played = False  # its entries left in the queues are skipped when they come up


class LiveFeeder:
    __slots__ = ("_bytes", "_clock", "_due", "_engine", "_grace", "_idle", "_idle_s", "_max", "_max_bytes", "_played",
                 "_size", "_traces", "completed", "duplicates", "played_ids", "stats")

    def __init__(self, engine: Engine, max_spans: int = 50_000, *, clock: Callable[[], float] = time.monotonic,
                 grace_s: float = 5.0, idle_s: float = 60.0, max_bytes: int = UNBOUNDED) -> None:
        self._engine = engine
        self._max = max_spans
        self._max_bytes = max_bytes
        self._size = 0
        self._bytes = 0
        self._played: OrderedDict[int, None] = OrderedDict()  # trace ids played (late spans are counted)
        self.stats = {"held_max": 0, "late": 0}
        self._clock = clock
        self._grace = grace_s
        self._idle_s = idle_s
        self._traces: dict[int, _Held] = {}  # trace id -> its spans, while held
        # two queues, oldest first: every held trace by when it was last queued (idle timeout,
        # capacity), and rooted traces by when they are due (one grace for all, so in order). A
        # played trace's entries stay until they come up or the queue is compacted; a dict used
        # as a queue would scan the keys its pops left behind on every look at its head
        self._idle: deque[_Held] = deque()
        self._due: deque[_Held] = deque()
        self.completed = {"root_end": 0, "idle_timeout": 0, "capacity": 0, "memory": 0, "shutdown": 0}
        self.duplicates = 0
        self.played_ids: list[int] | None = None  # given a list (serve --wal-dir): each played trace id

    @property
    def held_spans(self) -> int:
        return self._size

    @property
    def held_bytes(self) -> int:
        return self._bytes

    @property
    def held_traces(self) -> int:
        return len(self._traces)

    def holds(self, tid: int) -> bool:
        """Whether spans of trace ``tid`` are held (not yet played)."""
        return tid in self._traces

    def mark_played(self, tids: Iterable[int]) -> None:
        """Take these traces as played (recovered from a log): their spans from now on are late."""
        for tid in tids:
            remember(self._played, tid)

    def hold(self, spans: list[RecordedSpan], nbytes: int = 0) -> None:
        """Hold spans (any order, any batch) until their trace is due; see :meth:`tick`. ``nbytes``:
        what the batch is counted at in the memory budget (shared evenly by its spans)."""
        now = self._clock()
        traces, played = self._traces, self._played
        size = self._size
        each = nbytes // len(spans) if spans else 0
        for span in spans:
            tid = span._context[0]
            h = traces.get(tid)
            if h is None:
                if tid in played:
                    self.stats["late"] += 1  # its trace was played: counted, not replayed
                    continue
                h = _Held(tid, now)
                traces[tid] = h
                self._idle.append(h)
            else:
                h.seen = now
            h.spans.append(span)
            h.nbytes += each
            self._bytes += each
            size += 1
            if span._parent is None and not h.rooted:
                h.rooted = True
                h.due = now + self._grace
                self._due.append(h)
        self._size = size
        while self._size > self._max and traces:
            self._finish(self._oldest(), "capacity")
        while self._bytes > self._max_bytes and traces:
            self._finish(self._oldest(), "memory")
        if self._size > self.stats["held_max"]:
            self.stats["held_max"] = self._size

    def tick(self, budget: int = UNBOUNDED) -> int:
        """Play the traces that are due now, oldest first, until ``budget`` spans have been
        played (the rest wait for the next tick); returns how many traces were played."""
        now = self._clock()
        played = 0
        left = self._size - budget  # held spans once the budget is spent
        due = self._due
        while due and self._size > left:
            h = due[0]
            if not h.played and h.due > now:
                break
            due.popleft()
            if not h.played:
                self._finish(h, "root_end")
                played += 1
        idle = self._idle
        limit = now - self._idle_s
        while idle and self._size > left:
            h = idle[0]
            if h.played:
                idle.popleft()
                continue
            if h.seen > limit:
                if h.seen == h.queued:
                    break  # fresh and not seen since queued: so is everything queued after it
                h.queued = h.seen  # seen since queued: to the back, as of then (second chance)
                idle.rotate(-1)
                continue
            idle.popleft()
            self._finish(h, "idle_timeout")
            played += 1
        if len(idle) > 2 * len(self._traces) + 1024:  # mostly played entries: drop them (amortised O(1))
            self._idle = deque(h for h in idle if not h.played)
        return played

    def close_held(self) -> None:
        """Play everything held (shutdown), then finalise whatever is open as ``incomplete``."""
        for queue in (self._due, self._idle):  # rooted first: played as they are
            for h in list(queue):
                if not h.played:
                    self._finish(h, "shutdown")
            queue.clear()
        self._engine.finalise_all("shutdown")

    def _oldest(self) -> _Held:
        idle = self._idle
        while idle[0].played:
            idle.popleft()
        return idle[0]

    def _finish(self, h: _Held, reason: str) -> None:
        del self._traces[h.tid]
        h.played = True
        spans, h.spans = h.spans, []  # an entry left in a queue holds no spans
        self._size -= len(spans)
        self._bytes -= h.nbytes
        self.completed[reason] += 1
        remember(self._played, h.tid)
        if self.played_ids is not None:
            self.played_ids.append(h.tid)
        self._play_trace(spans)
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
