"""Per-argument normalisers: which forms of a value compare equal, and which do not."""

from __future__ import annotations

import pytest

from otel_agenteval.model.normalise import ArgumentRule, build


def same(specs: list[str], expected: object, actual: object) -> bool:
    return ArgumentRule(specs).matches(expected, actual)


def test_plain_comparison_strips_ends_only() -> None:
    assert same([], "damaged", " damaged ")
    assert not same([], "damaged", "Damaged")
    assert not same([], "88120", 88120)


def test_case() -> None:
    assert same(["case"], "Damaged_Delivery", "damaged_delivery")
    assert not same(["case"], "damaged", "damage")


def test_whitespace() -> None:
    assert same(["whitespace"], "damaged   in\ttransit", " damaged in transit")
    assert not same(["whitespace"], "damaged in transit", "damagedintransit")
    assert same(["whitespace", "case"], "Damaged  In Transit", "damaged in transit")


def test_number() -> None:
    assert same(["number"], 42, "42")
    assert same(["number"], "42.0", 42)
    assert same(["number"], "1,000", 1000)
    assert not same(["number"], "42", "43")
    assert not same(["number"], True, 1)  # a boolean is not a number
    assert not same(["number"], "forty-two", "42")


def test_decimal() -> None:
    assert same(["decimal"], "19.90", 19.9)
    assert same(["decimal"], "$1,019.90", "1019.9")
    assert not same(["decimal"], "19.90", "19.91")
    assert same(["decimal:2"], "19.899", "19.90")
    assert not same(["decimal:2"], "19.894", "19.90")


@pytest.mark.parametrize("form", [
    "2024-03-05", "2024/03/05", "20240305", "2024-03-05T10:30:00Z", "03/05/2024",
    "March 5, 2024", "5 March 2024", "Mar 5 2024", "Tuesday, 5th March 2024",
])
def test_date_forms_month_first(form: str) -> None:
    assert same(["date"], "2024-03-05", form)


def test_date_day_first_and_wrong_dates() -> None:
    assert same(["date:dmy"], "2024-03-05", "05/03/2024")
    assert not same(["date"], "2024-03-05", "05/03/2024")  # month first: 3 May
    assert same(["date"], "2024-03-25", "25/03/2024")  # 25 cannot be a month
    assert not same(["date"], "2024-02-30", "2024-03-01")  # no such day: compared raw
    assert not same(["date"], "2024-03-05", "soon")


def test_id_patterns() -> None:
    for form in ("ORD-88120", "88120", "#88120", "ord_88120", "order 88120", 88120, "ORD-088120"):
        assert same(["id"], "88120", form), form
    assert not same(["id"], "88120", "ORD-88121")
    assert same(["regex:ORD-(\\d+)"], "88120", "ORD-88120")
    assert not same(["regex:ORD-(\\d+)"], "88120", "INV-88120")


def test_ignore_accepts_anything() -> None:
    rule = ArgumentRule(["ignore"])
    assert rule.ignore and rule.matches("x", {"any": "thing"})


@pytest.mark.parametrize("spec, message", [
    ("lowercase", "unknown normaliser 'lowercase'"),
    ("case:x", "takes no parameter"),
    ("decimal:two", "whole number"),
    ("date:ymd", "mdy or dmy"),
    ("regex", "needs a pattern"),
])
def test_bad_specs_say_what_is_wrong(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build(spec)
