"""engine/fragments/stitch.py: which pieces of runs (a trace each) make one run, by their windows."""

from __future__ import annotations

from otel_agenteval.engine.fragments.stitch import ALONE, CONCURRENT, Piece, stitch

MS = 1_000_000


def piece(span_id: int, start_ms: float, end_ms: float, name: str = "step") -> Piece:
    return Piece(span_id, int(start_ms * MS), int(end_ms * MS), name)


def decided(pieces: list[Piece]) -> list[tuple[list[int], dict[int, int], str | None]]:
    return [([p.span_id for p in g.pieces], g.parents, g.reason) for g in stitch(pieces)]


def test_each_piece_goes_under_the_smallest_window_around_it() -> None:
    pieces = [piece(3, 12, 14, "tool"), piece(1, 0, 100, "graph"), piece(2, 10, 20), piece(4, 30, 40)]
    assert decided(pieces) == [([1, 2, 3, 4], {2: 1, 3: 2, 4: 1}, None)]


def test_a_child_ending_just_after_its_parent_is_still_its_own() -> None:
    pieces = [piece(1, 0, 100, "graph"), piece(2, 10, 20), piece(3, 15, 20.05, "chat")]
    assert decided(pieces)[0][1] == {2: 1, 3: 2}


def test_a_piece_starting_after_a_window_ends_is_not_in_it() -> None:
    pieces = [piece(1, 0, 100, "graph"), piece(2, 10, 20), piece(3, 20.5, 21, "lambda")]
    assert decided(pieces)[0][1] == {2: 1, 3: 1}


def test_runs_overlapping_in_time_are_not_stitched() -> None:
    a = [piece(1, 0, 100, "graph"), piece(2, 10, 20)]
    b = [piece(11, 50, 150, "graph"), piece(12, 60, 70)]
    assert decided(a + b) == [([1, 2, 11, 12], {}, CONCURRENT)]


def test_a_run_started_inside_another_runs_window_is_not_stitched() -> None:
    pieces = [piece(1, 0, 100, "graph"), piece(2, 10, 20), piece(11, 30, 60, "graph"), piece(12, 40, 50)]
    assert decided(pieces)[0][2] == CONCURRENT


def test_runs_one_after_the_other_are_two_runs_and_a_lone_piece_is_alone() -> None:
    pieces = [piece(1, 0, 100, "graph"), piece(2, 10, 20), piece(11, 100, 200, "graph"), piece(12, 110, 120),
              piece(21, 300, 310, "tool")]
    assert decided(pieces) == [([1, 2], {2: 1}, None), ([11, 12], {12: 11}, None), ([21], {}, ALONE)]
