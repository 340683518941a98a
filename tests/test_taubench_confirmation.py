"""Issue 37 on real conversations and through the front doors: the τ-bench benchmark meets the
acceptance figures against the hand labels; ``replay``'s table names the span and the reason;
book → cancel → re-book is no duplicate under a policy that declares the undo."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trace_files as tf
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_agenteval.cli.main import main
from otel_agenteval.policy.policy import Policy
from otel_agenteval.reading.confirmations import confirmation_showed

REPO = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("taubench_confirmation", REPO / "benchmarks" / "taubench_confirmation.py")
assert _spec is not None and _spec.loader is not None
bench: Any = sys.modules.setdefault("taubench_confirmation", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(bench)

AIRLINE = (REPO / "examples" / "policies" / "taubench-airline.yaml").read_text()


def test_the_benchmark_meets_the_acceptance_figures_on_the_dev_runs() -> None:
    data = bench.find_dataset()
    if data is None:
        pytest.skip("shared/datasets/taubench-airline not beside the checkout (read-only dataset, not in the repo)")
    m = bench.measure(data, Policy.from_yaml(AIRLINE), bench.load_labels())
    assert (m.tp + m.fp + m.fn + m.tn, m.precision >= 0.75, m.recall >= 0.90) == (123, True, True), m.disagreements


def _chat(h: Any, root: Any, at: float, *turns: tuple[str, str]) -> Any:
    msgs = [{"role": r, "parts": [{"type": "text", "content": c}]} for r, c in turns]
    return h.chat(root, at=at, end_attrs={"gen_ai.input.messages": json.dumps(msgs)})


BOOK = {"user_id": "mia_1", "flights": [{"flight_number": "HAT136", "date": "2024-05-20"}],
        "payment_methods": [{"payment_id": "credit_card_1", "amount": 305}]}


def _rebooked(h: Any) -> None:
    root = h.agent("airline_agent", conv="rebook")
    _chat(h, root, 1, ("assistant", "Book HAT136 on May 20 for $305 on your card?"), ("user", "Yes"))
    h.tool(root, "book_reservation", BOOK, at=2, result='{"reservation_id": "HATHAT"}')
    _chat(h, root, 3, ("assistant", "Book HAT136 on May 20 for $305 on your card?"), ("user", "Yes"),
          ("assistant", "Booked: HATHAT."), ("user", "Sorry, cancel it."),
          ("assistant", "Shall I cancel reservation HATHAT?"), ("user", "Yes, cancel it."))
    h.tool(root, "cancel_reservation", {"reservation_id": "HATHAT"}, at=4, result='{"reservation_id": "HATHAT"}')
    _chat(h, root, 5, ("user", "Actually book it again."),
          ("assistant", "Book HAT136 on May 20 again for $305 on your card?"), ("user", "Yes please."))
    h.tool(root, "book_reservation", BOOK, at=6, result='{"reservation_id": "HATHAU"}')
    h.end(root, 7)


def test_book_cancel_rebook_is_no_duplicate_when_the_policy_declares_the_undo(make_processor: Any) -> None:
    h = make_processor(AIRLINE)
    _rebooked(h)
    assert h.rules() == []
    h = make_processor(AIRLINE.replace("    undoes: {tool: book_reservation, key: reservation_id}", ""))
    _rebooked(h)
    assert h.rules() == ["duplicate_write"]


def test_the_replay_table_names_the_span_and_the_reason(make_processor: Any, tmp_path: Path, capsys: Any) -> None:
    h = make_processor(AIRLINE)
    exporter = InMemorySpanExporter()
    h.provider.add_span_processor(SimpleSpanProcessor(exporter))
    root = h.agent("airline_agent", conv="c1")
    _chat(h, root, 1, ("user", "Cancel HATHAT now."))
    cancel = h.tool(root, "cancel_reservation", {"reservation_id": "HATHAT"}, at=2)
    h.end(root, 3)
    h.provider.force_flush()
    path = tf.otlp_json_lines(list(exporter.get_finished_spans()), tmp_path / "t.jsonl")
    policy = tmp_path / "airline.yaml"
    policy.write_text(AIRLINE)
    assert main(["replay", str(path), "--policy", str(policy), "-q"]) == 1
    [line] = [x for x in capsys.readouterr().out.splitlines() if x.startswith("CRITICAL write_without_confirmation")]
    assert f"span={cancel.context.span_id:016x}" in line and "(the agent did not ask for agreement to it)" in line


ASKED: list[tuple[bool, bool, bool]] = []


def probe(step: Any, check: Any) -> None:
    """A custom rule that asks, as a rule on untrusted values will."""
    if getattr(step, "tool", None) == "cancel_reservation":
        t, policy = check.trajectory, check.policy
        ASKED.append((confirmation_showed(step, t, policy, "HATHAT"), confirmation_showed(step, t, policy, "hathat"),
                      confirmation_showed(step, t, policy, "ZZ99ZZ")))


def test_confirmation_showed_tells_whether_the_covering_yes_showed_a_value(make_processor: Any) -> None:
    h = make_processor(AIRLINE + 'custom_rules: ["test_taubench_confirmation:probe"]\n')
    ASKED.clear()
    root = h.agent("airline_agent", conv="c1")
    _chat(h, root, 1, ("assistant", "Shall I cancel reservation HATHAT?"), ("user", "Yes"))
    h.tool(root, "cancel_reservation", {"reservation_id": "HATHAT"}, at=2)
    h.end(root, 3)
    assert ASKED == [(True, True, False)]


def test_init_proposes_confirmation_for_writes_users_agreed_to_and_no_write_for_hand_offs(
        make_processor: Any, tmp_path: Path, capsys: Any) -> None:
    h = make_processor()
    exporter = InMemorySpanExporter()
    h.provider.add_span_processor(SimpleSpanProcessor(exporter))
    for i in range(4):
        rid = f"RES{i}X"
        root = h.agent("airline_agent", at=i * 10.0, conv=f"c{i}")
        _chat(h, root, i * 10.0 + 1, ("user", "cancel my trip"),
              ("assistant", f"Shall I cancel reservation {rid} ({'$'}{100 + i} refund)?"), ("user", "yes please"))
        h.tool(root, "cancel_reservation", {"reservation_id": rid, "reason": "change of plan"}, at=i * 10.0 + 2)
        h.tool(root, "transfer_to_human_agents", {"summary": "wants a refund"}, at=i * 10.0 + 3)
        h.tool(root, "add_note", {"note_id": f"N{i}77"}, at=i * 10.0 + 4)  # a write nobody was asked about
        h.end(root, i * 10.0 + 5)
    h.provider.force_flush()
    path = tf.otlp_json_lines(list(exporter.get_finished_spans()), tmp_path / "t.jsonl")
    out = tmp_path / "agenteval.yaml"
    assert main(["init", "--from", str(path), "-o", str(out)]) == 0
    policy = Policy.from_file(out)
    cancel, add = policy.tools["cancel_reservation"], policy.tools["add_note"]
    assert (cancel.requires_confirmation, cancel.confirmation and cancel.confirmation.shows) == (True, ["reservation_id"])
    assert (add.write, add.requires_confirmation) == (True, False)
    assert not policy.is_write("transfer_to_human_agents")
    assert "hand-off, not a write" in out.read_text()


def test_an_undo_of_a_tool_the_policy_does_not_name_is_an_error(tmp_path: Path, capsys: Any) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(AIRLINE.replace("undoes: {tool: book_reservation", "undoes: {tool: book_reservations"))
    assert main(["check-policy", str(bad)]) == 2
    assert "cancel_reservation.undoes.tool: 'book_reservations' is not a tool of this policy" in capsys.readouterr().err
