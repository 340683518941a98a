"""A held trace played into the engine as one tree (``replay/live.py`` holds it until it is complete).

Parents before children: starts by start time, ends by end time, each start issued before the
first end after it. A remote parent inside the trace is made local (the same run, another
service); times are only moved to keep a child inside its parent across skewed clocks.
"""

from __future__ import annotations

from typing import Any, final

from ..engine.engine import Engine
from .spanview import RecordedContext, RecordedSpan

# a child that ends this little after its parent ended before it (clocks of millisecond steps or two
# sources, as in JavaScript's SDK): it belongs to its parent's run, so it is played first
END_SKEW_NS = 10_000_000


def play_tree(engine: Engine, spans: list[RecordedSpan]) -> int:
    """One trace as one tree, parents before children: starts by start time, ends by end
    time, each start issued before the first end that comes after it. Times are only ever
    moved to keep a child inside its parent: a child starts no earlier than its parent, and a
    span ends no earlier than a child from another service (clock skew between hosts) or one that
    ends at most :data:`END_SKEW_NS` after it. Returns how
    many spans came twice (an OTLP retry after a lost answer): each is played once."""
    nodes: dict[int, _Node] = {}
    duplicates = 0
    for s in spans:
        ids: tuple[Any, ...] = s._context  # a tuple: indexed natively when compiled
        node = _Node(s)
        if nodes.setdefault(ids[1], node) is not node:
            duplicates += 1  # sent twice (an OTLP retry after a lost answer): played once
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
        if up is not None and node.end > up.end and (node.remote or node.raised or node.end - up.end <= END_SKEW_NS):
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
    k = 0
    m = len(starts)
    for e in ends:
        t = e.end
        while k < m and starts[k].start <= t:
            engine.start(starts[k].span)
            k += 1
        engine.end(e.span)
    return duplicates


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
