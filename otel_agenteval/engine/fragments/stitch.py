"""Which pieces of runs make one run, by their time windows alone (pure: no engine, no clock).

A piece is a root alone in its trace that looks like part of an agent run (a tool call, a model
call, a workflow). Pieces of one instrumentation scope and resource are cut into *clusters*:
windows that overlap, in start order. A cluster is one run when its first (outermost) piece's
window contains every other one's: each piece is then re-parented to the smallest piece whose
window contains it. A child may end up to :data:`TOLERANCE_NS` after its parent (JavaScript
SDKs date starts to the millisecond and end children just after their parents).

Not stitched, and why (:data:`CONCURRENT`): two pieces of a cluster that each stick out of the
other's window (two runs at once), or a piece inside the outermost that has the outermost's own
name (a second run started inside the first one's window). A cluster of one piece is
:data:`ALONE`: nothing to put it in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

TOLERANCE_NS: Final = 2_000_000  # a child ending this long after its parent still belongs to it
CONCURRENT: Final = "concurrent"  # runs overlapping in time: which piece is whose cannot be told
ALONE: Final = "alone"  # a piece with no other piece's window around it or in it
BUFFER_FULL: Final = "buffer_full"  # the held pieces' bound was reached: played as they came


class Piece:
    """One fragment: its span id, window and name (the span itself stays with the caller)."""

    __slots__ = ("end_ns", "name", "span_id", "start_ns")

    def __init__(self, span_id: int, start_ns: int, end_ns: int, name: str) -> None:
        self.span_id = span_id
        self.start_ns = start_ns
        self.end_ns = max(end_ns, start_ns)
        self.name = name


class Group:
    """A cluster of pieces: one run (``reason`` None; ``parents`` maps each piece but the
    outermost to the piece around it) or pieces left as they came, with the reason."""

    __slots__ = ("parents", "pieces", "reason")

    def __init__(self, pieces: list[Piece], parents: dict[int, int], reason: str | None) -> None:
        self.pieces = pieces  # in start order: the outermost first
        self.parents = parents
        self.reason = reason

    @property
    def outermost(self) -> Piece:
        return self.pieces[0]


def clusters(pieces: Sequence[Piece], tolerance_ns: int = TOLERANCE_NS) -> list[list[Piece]]:
    """``pieces`` in start order (the longer first at one start), cut where no window overlaps the
    ones before: a piece joins when it ends inside the cluster (within the tolerance) or starts
    more than the tolerance before the cluster's end."""
    out: list[list[Piece]] = []
    end = 0
    for p in sorted(pieces, key=lambda p: (p.start_ns, -p.end_ns)):
        if out and (p.end_ns <= end + tolerance_ns or p.start_ns < end - tolerance_ns):
            out[-1].append(p)
            end = max(end, p.end_ns)
        else:
            out.append([p])
            end = p.end_ns
    return out


def decide(cluster: list[Piece], tolerance_ns: int = TOLERANCE_NS) -> Group:
    """One cluster (start order): one run under its outermost piece, or why not."""
    outer = cluster[0]
    if len(cluster) == 1:
        return Group(cluster, {}, ALONE)
    limit = outer.end_ns + tolerance_ns
    for p in cluster[1:]:
        if p.end_ns > limit or p.name == outer.name:
            return Group(cluster, {}, CONCURRENT)
    parents: dict[int, int] = {}
    around: list[Piece] = [outer]  # the pieces whose windows may hold the next one, innermost last
    for p in cluster[1:]:
        while len(around) > 1 and (around[-1].end_ns < p.start_ns or around[-1].end_ns + tolerance_ns < p.end_ns):
            around.pop()  # over before this one ends (siblings that overlap it included): not around it
        parents[p.span_id] = around[-1].span_id
        around.append(p)
    return Group(cluster, parents, None)


def stitch(pieces: Sequence[Piece], tolerance_ns: int = TOLERANCE_NS) -> list[Group]:
    """The pieces of one scope and resource as groups: runs put back together, or left, and why."""
    return [decide(c, tolerance_ns) for c in clusters(pieces, tolerance_ns)]
