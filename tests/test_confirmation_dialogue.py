"""The confirmation model over the dialogue (issue 37), through the real SDK and the processor.

Each behaviour of the issue once: a summary a turn earlier counts; only key values (named, or
inferred by type) must be shown, compared after normalisation; a request is no confirmation; a yes
anywhere in the reply, negation scoped, six languages, the lexicon extendable; one yes covers each
action its proposal listed; a changed call needs a new yes; a retry after a failure is covered;
every finding says why, with the span and message index of the reply and the proposal.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import Harness

from otel_agenteval.model.trajectory import short_hash

POLICY = """\
tools:
  cancel_reservation:
    write: true
    requires_confirmation: true
    confirmation: {shows: [reservation_id], says: [cancel]}
  book_reservation:
    write: true
    requires_confirmation: true
    confirmation: {shows: [payment_methods.amount, flights.date]}
  issue_refund: {write: true, requires_confirmation: true}      # nothing named: inferred by type
confirmation:
  lexicon: {affirm: [aye]}
"""


def _msgs(turns: tuple[tuple[str, str], ...]) -> str:
    return json.dumps([{"role": r, "parts": [{"type": "text", "content": c}]} for r, c in turns])


def run(h: Harness, turns: tuple[tuple[str, str], ...], *calls: tuple[str, dict[str, Any], str | None]) -> Any:
    """One run of its own conversation: a model call carrying ``turns``, then the write calls
    (``error`` or ``None``). Returns the model-call span."""
    root = h.agent(conv=f"c{len(h.trajectories)}-{len(h.violations)}-{id(turns)}")
    chat = h.chat(root, at=1, end_attrs={"gen_ai.input.messages": _msgs(turns)})
    for i, (tool, args, error) in enumerate(calls):
        h.tool(root, tool, args, at=2 + i, error=error)
    h.end(root, 10)
    return chat


def findings(h: Harness) -> list[dict[str, Any]]:
    return [dict(v.details) for v in h.violations if v.rule == "write_without_confirmation"]


ASK = ("assistant", "I can cancel reservation FQ8APE. Shall I go ahead?")
CANCEL = ("cancel_reservation", {"reservation_id": "FQ8APE"}, None)


def test_a_summary_given_a_turn_before_the_yes_counts(make_processor):
    h = make_processor(POLICY)
    run(h, (("user", "Cancel my trip please"), ASK, ("user", "Will I get a refund?"),
            ("assistant", "Yes, to the original payment method. Shall I proceed?"), ("user", "Yes.")), CANCEL)
    assert findings(h) == []


@pytest.mark.parametrize("reply", [
    "Everything looks correct. Yes, please cancel it.", "That sounds good, please proceed", "Oui, merci",
    "Ja, bitte", "Sí, adelante", "Sim, pode prosseguir", "Sì, va bene", "aye",
])
def test_a_yes_anywhere_in_the_reply_in_six_languages_and_the_policys_words(make_processor, reply):
    h = make_processor(POLICY)
    run(h, (ASK, ("user", reply)), CANCEL)
    assert findings(h) == []


@pytest.mark.parametrize("reply", ["I don't want to proceed.", "No, don't do that.", "Non, ne faites pas ça",
                                   "Nein.", "That's not correct"])
def test_a_refusal_or_a_negated_yes_is_declined(make_processor, reply):
    h = make_processor(POLICY)
    run(h, (ASK, ("user", reply)), CANCEL)
    assert [f["reason"] for f in findings(h)] == ["declined"]


def test_a_users_own_request_is_no_confirmation(make_processor):
    h = make_processor(POLICY)
    run(h, (("assistant", "How can I help?"), ("user", "Yes, could you proceed with cancelling FQ8APE?"),
            ("assistant", "Sure.")), CANCEL)
    run(h, (("user", "Please go ahead and cancel FQ8APE, yes."),), CANCEL)
    assert [f["reason"] for f in findings(h)] == ["not_asked", "not_asked"]


def test_a_yes_to_another_reservation_names_what_was_not_shown(make_processor):
    h = make_processor(POLICY)
    chat = run(h, (("assistant", "Your reservations: FQ8APE and ZZ11QQ."), ("user", "ok"),
                   ("assistant", "Shall I cancel ZZ11QQ?"), ("user", "Yes")),
               ("get_reservation", {"reservation_id": "ZZ11QQ"}, None), CANCEL)
    [f] = findings(h)
    span = format(chat.context.span_id, "016x")  # the model call whose input the dialogue was read from
    assert {k: f[k] for k in ("reason", "not_shown", "reply", "proposal")} == {
        "reason": "not_shown", "not_shown": ["reservation_id"],
        "reply": {"span_id": span, "message": 3}, "proposal": {"span_id": span, "messages": [2]}}


def test_values_are_matched_after_normalisation(make_processor):
    h = make_processor(POLICY)
    book = {"flights": [{"flight_number": "HAT1", "date": "2024-05-20"}, {"flight_number": "HAT2", "date": "2024-05-25"}],
            "payment_methods": [{"payment_id": "gift_card_1", "amount": 1047}, {"payment_id": "cc_2", "amount": 12.5}],
            "passengers": [{"first_name": "Mia"}], "insurance": "no"}
    run(h, (("assistant", "Booking: May 25th and 20 May 2024; $12.50 by card and 1,047.00 USD by gift card. Confirm?"),
            ("user", "confirmed")), ("book_reservation", book, None))
    run(h, (("assistant", "Cancel reservation fq8ape?"), ("user", "yes")), CANCEL)
    assert findings(h) == []


def test_with_nothing_named_ids_and_money_are_inferred_never_every_argument(make_processor):
    h = make_processor(POLICY)
    refund = {"order_id": "ORD-88120", "amount": "45.00", "note": "customer was unhappy with the delay", "notify": True}
    run(h, (("assistant", "Refund $45 on ORD-88120?"), ("user", "yes")), ("issue_refund", refund, None))
    run(h, (("assistant", "Refund $50 on ORD-88120?"), ("user", "yes")), ("issue_refund", refund, None))
    assert [(f["reason"], f["not_shown"]) for f in findings(h)] == [("not_shown", ["amount"])]


def test_one_yes_covers_every_action_its_proposal_listed_once(make_processor):
    h = make_processor(POLICY)
    turns = (("assistant", "Shall I cancel both FQ8APE and ZZ11QQ?"), ("user", "yes, cancel both"))
    run(h, turns, CANCEL, ("cancel_reservation", {"reservation_id": "ZZ11QQ"}, None), CANCEL)
    assert [f["reason"] for f in findings(h)] == ["already_used"]


def test_a_retry_after_a_failure_is_covered_a_changed_call_is_not(make_processor):
    h = make_processor(POLICY)
    ask = (("assistant", "Cancel reservation FQ8APE? Please confirm."), ("user", "Yes"))
    run(h, ask, ("cancel_reservation", {"reservation_id": "FQ8APE"}, "timeout"), CANCEL)
    run(h, (("assistant", "Refund $45 on ORD-1?"), ("user", "yes")),
        ("issue_refund", {"order_id": "ORD-1", "amount": 45}, "declined by bank"),
        ("issue_refund", {"order_id": "ORD-1", "amount": 60}, None))
    [f] = findings(h)
    assert f["reason"] == "changed_after_agreement"
    assert f["changed_after_agreement"] == {"amount": [short_hash(repr(["45"])), short_hash(repr(["60"]))]}


def test_the_action_must_be_named_when_the_policy_says_how(make_processor):
    h = make_processor(POLICY)
    run(h, (("assistant", "Your reservation is FQ8APE. Shall I retry the payment?"), ("user", "yes")), CANCEL)
    assert [f["not_shown"] for f in findings(h)] == [["action"]]


def test_the_reason_is_in_the_message(make_processor):
    h = make_processor(POLICY)
    run(h, (("user", "cancel FQ8APE"),), CANCEL)
    [v] = h.violations
    assert v.details["reason"] == "not_asked" and "did not ask" in v.message


def test_inferred_values_leave_out_list_details_and_internal_handles_but_not_money(make_processor):
    h = make_processor(POLICY)
    refund = {"order_id": "ORD-1", "payment_id": "credit_card_4421486",
              "items": [{"sku": "SKU-1", "bought": "2024-01-02", "amount": 45}]}
    ask = ("assistant", "Refund $45 on ORD-1 to the card ending in 7447?")
    run(h, (ask, ("user", "yes")), ("issue_refund", refund, None))
    run(h, (ask, ("user", "yes")), ("issue_refund", {**refund, "items": [{"sku": "SKU-1", "amount": 50}]}, None))
    assert [f["not_shown"] for f in findings(h)] == [["items.amount"]]


def test_each_model_call_is_read_afresh_where_it_differs_and_no_run_sees_anothers(make_processor):
    """A write's dialogue starts from the previous model call's (only what was added is read):
    a call whose messages differ at the same count, or that extends them, is read as it is."""
    h = make_processor(POLICY)
    other = ("cancel_reservation", {"reservation_id": "ZZ9XYZ"}, None)
    ask_other = ("assistant", "I can cancel reservation ZZ9XYZ. Shall I go ahead?")
    root = h.agent(conv="rewritten")
    h.chat(root, at=1, end_attrs={"gen_ai.input.messages": _msgs((ASK, ("user", "Yes.")))})
    h.tool(root, *CANCEL[:2], at=2)
    h.chat(root, at=3, end_attrs={"gen_ai.input.messages": _msgs((ask_other, ("user", "No.")))})  # same count
    h.tool(root, *other[:2], at=4)
    h.chat(root, at=5, end_attrs={"gen_ai.input.messages": _msgs((ask_other, ("user", "No."), ask_other,
                                                                   ("user", "Yes.")))})  # extends the last
    h.tool(root, *other[:2], at=6)
    h.end(root, 10)
    assert [f["reason"] for f in findings(h)] == ["declined"]
    run(h, (ASK, ("user", "Yes."), ask_other, ("user", "No.")), other)  # another run, as many messages as the last call
    assert [f["reason"] for f in findings(h)] == ["declined", "declined"]
