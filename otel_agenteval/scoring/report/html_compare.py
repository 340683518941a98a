"""``score --compare --format html``: the candidates side by side, baseline | candidate.

First each set's numbers in two columns, then per case its runs paired by trial (by position
where runs carry no trial): verdict, length, cost and the first reason on each side. A row
whose verdicts differ is marked ``differs``; the candidate's cell ``better`` or ``worse``, and
so is any number that moved. Bounded like the rest of the page: at most ``cap`` pairs a case.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any, TextIO

from .document import SETS, Runs

_RANK = {"pass": 0, "warn": 1, "fail": 2}

# (label, how to read it from a set summary, higher is better)
_NUMBERS: list[tuple[str, Any, bool]] = [
    ("runs", lambda s: s["runs"], True),
    ("pass rate", lambda s: s["pass_rate"], True),
    ("coverage", lambda s: s["numbers"]["coverage"], True),
    ("argument accuracy", lambda s: s["numbers"]["argument_accuracy"], True),
    ("extra steps (mean)", lambda s: s["numbers"]["extra_steps_mean"], False),
    ("duplicate writes", lambda s: s["numbers"]["duplicate_writes"], False),
    ("cost per success (USD)", lambda s: s["cost_usd"]["per_success"], False),
    ("p95 latency (s)", lambda s: s["latency_s"]["p95"], False),
]


def _e(value: Any) -> str:
    return escape(str(value), quote=True)


def _fmt(v: Any) -> str:
    if v is None:
        return "n/a"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _moved(base: Any, cand: Any, higher_better: bool) -> str:
    if base is None or cand is None or base == cand:
        return ""
    return "better" if (cand > base) == higher_better else "worse"


def _sets_table(labels: Sequence[str], docs: Sequence[dict[str, Any]]) -> str:
    rows = []
    for name in SETS:
        summaries = [d["summary"].get(name) for d in docs]
        if summaries[0] is None or summaries[1] is None:
            continue
        rows.append(f'<tr><th colspan="3">{name} set</th></tr>')
        for label, get, higher in _NUMBERS:
            base, cand = get(summaries[0]), get(summaries[1])
            moved = _moved(base, cand, higher) if label != "runs" else ""
            rows.append(f'<tr class="{"differs" if moved else ""}" data-set="{name}" data-number="{_e(label)}">'
                        f'<td>{_e(label)}</td><td class="num">{_fmt(base)}</td>'
                        f'<td class="num {moved}">{_fmt(cand)}</td></tr>')
    return (f'<table class="sbs" id="sbs-sets"><tr><th></th><th>{_head(labels[0], "baseline")}</th>'
            f'<th>{_head(labels[1], "candidate")}</th></tr>{"".join(rows)}</table>')


def _head(label: str, role: str) -> str:
    return _e(label) if label == role else f'{_e(label)} <span class="muted">({role})</span>'



def _pairs(a: Runs, b: Runs) -> list[tuple[Any, Any, Any]]:
    """(trial label, baseline record or None, candidate record or None), by trial, else by position."""
    def keyed(runs: Runs) -> dict[Any, Any]:
        return {(r.trial if r.trial is not None else f"#{i}"): r for i, r in enumerate(runs.records(), 1)}

    left, right = keyed(a), keyed(b)
    keys = list(left) + [k for k in right if k not in left]
    return [(k, left.get(k), right.get(k)) for k in keys]


def _cell(runs: Runs, record: Any, other: Any, is_candidate: bool) -> str:
    if record is None:
        return '<td class="cell muted">no run</td>'
    run = runs.detail(record)
    v = run["verdict"]
    moved = ""
    if is_candidate and other is not None and other.verdict != v:
        moved = "better" if _RANK[v] < _RANK[other.verdict] else "worse"
    why = run["reasons"][0] if run["reasons"] else ""
    more = f" (+{len(run['reasons']) - 1} more)" if len(run["reasons"]) > 1 else ""
    return (f'<td class="cell {moved}" data-verdict="{v}" data-trace="{run["trace_id"]}">'
            f'<span class="badge {v}">{v}</span> · {run["run_steps"]} steps · ${run["cost_usd"]:.4f} · '
            f'duplicate writes {run["duplicate_writes"]}<div class="why">{_e(why)}{_e(more)}</div></td>')


def _differs(x: Any, y: Any) -> bool:
    return x is None or y is None or x.verdict != y.verdict


def side_by_side(candidates: Sequence[tuple[str, dict[str, Any]]], out: TextIO, cap: int) -> None:
    """Write the side-by-side section: the first two candidates, baseline | candidate."""
    (base_label, base), (cand_label, cand) = candidates[0], candidates[1]
    out.write(f'<h2 id="side-by-side">Side by side: {_e(base_label)} | {_e(cand_label)}</h2>'
              '<p class="muted">highlighted: what differs (green: the candidate is better, red: worse)</p>'
              f"{_sets_table([base_label, cand_label], [base, cand])}\n")
    theirs = {c["id"]: c for c in cand["cases"]}
    for case in (c for name in SETS for c in base["cases"] if c["set"] == name):
        other = theirs.get(case["id"])
        if other is None:
            continue
        pairs = _pairs(case["runs"], other["runs"])
        changed = sum(1 for _, x, y in pairs if x is not None and y is not None and x.verdict != y.verdict)
        out.write(f'<section class="pair" data-case="{_e(case["id"])}"><h3>{_e(case["id"])} '
                  f'<span class="muted">({case["set"]})</span> · {case["passes"]}/{case["trials"]} | '
                  f'{other["passes"]}/{other["trials"]} pass or warn · {changed} trials changed verdict</h3>'
                  f'<table class="sbs"><tr><th>trial</th><th>{_e(base_label)}</th><th>{_e(cand_label)}</th></tr>\n')
        pairs.sort(key=lambda p: not _differs(p[1], p[2]))  # what changed first, then the rest, in trial order
        for key, x, y in pairs[:cap]:
            differs = _differs(x, y)
            out.write(f'<tr class="{"differs" if differs else "same"}" data-trial="{_e(key)}"><td>{_e(key)}</td>'
                      f'{_cell(case["runs"], x, None, False)}{_cell(other["runs"], y, x, True)}</tr>\n')
        if len(pairs) > cap:
            out.write(f'<tr><td colspan="3" class="muted">{len(pairs) - cap} more trials not shown</td></tr>')
        out.write("</table></section>\n")
