"""How far a judge agrees with people, per dimension: Cohen's kappa on labels, Spearman's rho and
the mean absolute difference on scores, each with a bootstrap interval (percentile, 95%, seeded:
the same input gives the same figures); and how often the judge's label says what the rules'
verdict says on the same runs. Fewer labels than ``min_labels`` is not a measurement: the figures
are withheld, not shown with a caveat.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
RESAMPLES = 1000


def cohen_kappa(a: Sequence[str], b: Sequence[str]) -> float | None:
    """(p_o - p_e) / (1 - p_e) over paired labels; ``None`` when chance agreement is total (one category)."""
    n = len(a)
    if n == 0:
        return None
    observed = sum(x == y for x, y in zip(a, b)) / n
    ca, cb = Counter(a), Counter(b)
    expected = sum(ca[c] * cb[c] for c in ca) / (n * n)
    return None if expected >= 1 else (observed - expected) / (1 - expected)


def _ranks(xs: Sequence[float]) -> list[float]:
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    ranks = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1  # ties share their average rank
        i = j + 1
    return ranks


def spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Pearson's r of the ranks; ``None`` when either side is constant."""
    if len(a) < 2:
        return None
    ra, rb = _ranks(a), _ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va, vb = sum((x - ma) ** 2 for x in ra), sum((y - mb) ** 2 for y in rb)
    return None if va == 0 or vb == 0 else cov / (va * vb) ** 0.5


def mean_abs_diff(a: Sequence[float], b: Sequence[float]) -> float | None:
    return sum(abs(x - y) for x, y in zip(a, b)) / len(a) if a else None


def bootstrap(pairs: Sequence[tuple[T, T]], stat: Callable[[Sequence[T], Sequence[T]], float | None],
              seed: int = 0) -> list[float] | None:
    """The 2.5th and 97.5th percentiles of ``stat`` over resampled pairs (``None``: too few defined)."""
    rng = random.Random(seed)
    n = len(pairs)
    got: list[float] = []
    for _ in range(RESAMPLES if n else 0):
        sample = [pairs[rng.randrange(n)] for _ in range(n)]
        value = stat([p[0] for p in sample], [p[1] for p in sample])
        if value is not None:
            got.append(value)
    if len(got) < RESAMPLES // 2:
        return None
    got.sort()
    return [round(got[int(0.025 * (len(got) - 1))], 4), round(got[int(0.975 * (len(got) - 1))], 4)]


def _figure(pairs: list[tuple[Any, Any]], stat: Callable[[Any, Any], float | None]) -> dict[str, Any]:
    value = stat([p[0] for p in pairs], [p[1] for p in pairs]) if pairs else None
    return {"value": None if value is None else round(value, 4), "interval": bootstrap(pairs, stat), "n": len(pairs)}


def dimension_agreement(judged: Sequence[dict[str, Any]], human: dict[str, dict[str, Any]],
                        min_labels: int) -> dict[str, Any]:
    """One dimension: ``judged`` its judgements, ``human`` the people's labels by trace id."""
    both = [(j, human[j["trace_id"]]) for j in judged if j["trace_id"] in human]
    labels = [(j["label"], h["label"]) for j, h in both if j.get("label") is not None and h.get("label") is not None]
    scores = [(float(j["score"]), float(h["score"])) for j, h in both
              if j.get("score") is not None and h.get("score") is not None]
    rules = [(j["label"], j["verdict"]) for j in judged if j.get("label") is not None and j.get("verdict")]
    out: dict[str, Any] = {"judgements": len(judged), "labelled": len(both), "min_labels": min_labels,
                           "measurement": len(both) >= min_labels}
    if out["measurement"]:
        out["kappa"] = _figure(labels, cohen_kappa)
        out["spearman"] = _figure(scores, spearman)
        out["mean_abs_diff"] = _figure(scores, mean_abs_diff)
    out["rules"] = {"kappa": _figure(rules, cohen_kappa),
                    "same": sum(a == b for a, b in rules), "of": len(rules),
                    "table": {f"{a}/{b}": n for (a, b), n in sorted(Counter(rules).items())}}
    return out
