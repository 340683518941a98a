"""``score``'s default output: one screen a person reads at a glance.

The verdict first (and the exit code it gives), then each set's numbers with one line on what
each means, the cases (failing first), and the worst failing runs. Every run with its step
table is ``score -v``; ``--format json|html|markdown|junit`` carry everything too.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TextIO

from .document import SETS, Runs, gate_line

WORST_SHOWN = 5  # failing runs listed
CASES_SHOWN = 12  # cases listed (failing first); the rest counted

# (row label, what it means): the meaning is printed next to the numbers, once
MEANINGS = {
    "runs": "traces bound to a case (agenteval.case.id); verdicts pass / warn / fail",
    "pass rate": "mean over cases of a case's share of runs that pass or warn",
    "coverage": "share of runs making every call the reference requires, in its order",
    "argument accuracy": "mean share of a run's calls to reference tools with the right arguments",
    "extra steps": "mean steps beyond the reference's length (more than the case allows: warn)",
    "duplicate writes": "writes repeating a successful identical write (each fails its run)",
    "cost per success": "total cost over the runs that pass or warn",
    "latency p95": "wall time of a run, 95th percentile",
}


def _n(v: float | None, fmt: str = "{:.2f}") -> str:
    return "n/a" if v is None else fmt.format(v)


def _rows(summary: dict[str, Any], sets: list[str], k: int) -> list[tuple[str, list[str]]]:
    def each(get: Any) -> list[str]:
        return [get(summary[name]) for name in sets]

    rows = [("runs", each(lambda s: f"{s['runs']} ({s['verdicts']['pass']}/{s['verdicts']['warn']}/{s['verdicts']['fail']})")),
            ("pass rate", each(lambda s: _n(s["pass_rate"])))]
    if k > 1:
        rows.append((f"pass^{k}", each(lambda s: _n(_float(s["pass_hat_k"].get(str(k)))))))
    rows += [("coverage", each(lambda s: _n(s["numbers"]["coverage"]))),
             ("argument accuracy", each(lambda s: _n(s["numbers"]["argument_accuracy"]))),
             ("extra steps", each(lambda s: _n(s["numbers"]["extra_steps_mean"], "{:+.2f}"))),
             ("duplicate writes", each(lambda s: str(s["numbers"]["duplicate_writes"]))),
             ("cost per success", each(lambda s: _n(s["cost_usd"]["per_success"], "${:.4f}"))),
             ("latency p95", each(lambda s: f"{s['latency_s']['p95']:.2f}s"))]
    return rows


def _float(v: Any) -> float | None:
    return None if v is None else float(v)


def _meaning(label: str, k: int) -> str:
    if label.startswith("pass^"):
        return f"chance that {k} runs of a case, drawn at random, all pass or warn (the gate's number)"
    return MEANINGS[label]


def _worst_key(case: dict[str, Any], run: Any) -> tuple[Any, ...]:
    """Worse first: regression before capability, duplicate writes, missing calls, extra steps."""
    return (case["set"] != "regression", -run.duplicate_writes, bool(run.coverage), -run.extra_steps)


def _failing(cases: list[dict[str, Any]]) -> Iterator[tuple[Any, dict[str, Any], Runs, Any]]:
    for case in cases:
        runs: Runs = case["runs"]
        for run in runs.records():
            if run.verdict == "fail":
                yield _worst_key(case, run), case, runs, run


def worst_runs(cases: list[dict[str, Any]], n: int = WORST_SHOWN) -> tuple[list[tuple[dict[str, Any], dict[str, Any]]], int]:
    """Up to ``n`` failing runs, worst first, one per case before a second of any case; and how
    many runs fail in all. Only the chosen runs' details are read (from the spool)."""
    failing = sorted(_failing(cases), key=lambda x: x[0])
    chosen: list[Any] = []
    seen: set[str] = set()
    for item in failing:  # the worst of each case first
        if len(chosen) < n and item[1]["id"] not in seen:
            chosen.append(item)
            seen.add(item[1]["id"])
    for item in failing:
        if len(chosen) >= n:
            break
        if item not in chosen:
            chosen.append(item)
    chosen.sort(key=lambda x: x[0])
    return [(case, runs.detail(run)) for _, case, runs, run in chosen], len(failing)


def overview_lines(doc: dict[str, Any]) -> list[str]:
    summary, gate = doc["summary"], doc["summary"]["gate"]
    sets = [name for name in SETS if name in summary]
    runs = sum(summary[name]["runs"] for name in sets)
    read = summary.get("input", {})
    files = read.get("files", 0)
    source = f" from {read['spans']} spans in {files} file{'s' if files != 1 else ''}" if read else ""
    line = gate_line(gate).rpartition(" [")[0]  # the verdict says it first
    out = [f"score: {runs} runs of {len(doc['cases'])} cases{source}",
           f"verdict: {'FAILED (exit 1)' if gate['failed'] else 'passed (exit 0)'}; {line}", ""]
    if sets:
        k = gate["k"]
        rows = _rows(summary, sets, k)
        label_w = max(len(label) for label, _ in rows)
        col_w = [max(len(name), *(len(cells[i]) for _, cells in rows)) for i, name in enumerate(sets)]
        head = " " * label_w + "  " + "  ".join(f"{name:>{w}}" for name, w in zip(sets, col_w)) + "  what it means"
        out.append(head)
        for label, cells in rows:
            out.append(f"{label:<{label_w}}  " + "  ".join(f"{c:>{w}}" for c, w in zip(cells, col_w))
                       + f"  {_meaning(label, k)}")
        out.append("")
    out += _case_lines(doc["cases"], gate)
    worst, failing = worst_runs(doc["cases"])
    if worst:
        out += ["", f"worst failing runs ({len(worst)} of {failing}):"]
        for case, run in worst:
            trial = f" trial {run['trial']}" if run["trial"] is not None else ""
            more = len(run["reasons"]) - 1
            out.append(f"  {case['id']}{trial}  trace {run['trace_id']}  {run['run_steps']} steps "
                       f"(reference {run['reference_steps']})")
            out.append(f"    {run['reasons'][0] if run['reasons'] else 'fail'}"
                       + (f" (+{more} more)" if more > 0 else ""))
    unbound = summary.get("unbound_runs", 0) + sum(summary.get("unknown_cases", {}).values())
    if unbound:
        out.append(f"runs bound to no case: {unbound} (listed with -v and in every other format)")
    out += ["", "every run with its step table: score -v; a report: --format html -o report.html (or json, "
                "markdown, junit)"]
    return out


def _case_lines(cases: list[dict[str, Any]], gate: dict[str, Any]) -> list[str]:
    ordered = sorted(cases, key=lambda c: (not c["gate"]["failed"], c["set"] != "regression"))
    shown = ordered[:CASES_SHOWN]
    id_w = max([4, *(len(c["id"]) for c in shown)])
    hat_w = len(f"pass^{gate['k']}")
    out = [f"{'case':<{id_w}}  {'set':<10}  {'runs':>5}  {'pass+warn':>9}  {'pass^' + str(gate['k']):>{hat_w}}  "
           f"gate (pass^{gate['k']} >= {gate['threshold']:g})"]
    for c in shown:
        hat = c["gate"]["pass_hat_k"]
        # a capability case below the gate is reported, and fails nothing: not "FAILED"
        status = ("FAILED" if c["set"] == "regression" else "below") if c["gate"]["failed"] else "ok"
        if not c["trials"]:
            status += " (no run named this case)"
        out.append(f"{c['id']:<{id_w}}  {c['set']:<10}  {c['trials']:>5}  {c['passes']:>9}  {_n(hat):>{hat_w}}  {status}")
    if len(ordered) > len(shown):
        rest = ordered[len(shown):]
        out.append(f"... and {len(rest)} more cases ({sum(c['gate']['failed'] for c in rest)} failing): score -v lists them")
    return out


def write_overview(doc: dict[str, Any], stream: TextIO) -> None:
    stream.write("\n".join(overview_lines(doc)) + "\n")
