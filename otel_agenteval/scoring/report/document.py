"""The score report: one document (``build``), rendered as JSON or a table (Markdown and JUnit
XML in ``formats.py``, HTML in ``html.py``).

Each case's ``runs`` is lazy (:class:`Runs`): run details are read (from memory or the spool)
while a renderer writes them, so a report of a hundred thousand runs is never whole in memory.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator, Sequence
from typing import Any, TextIO

import orjson

from ..reliability import CaseResult, efficiency, pass_hat_k, set_summary
from ..store import RunRecord, run_json

SETS = ("regression", "capability")
UNBOUND_LISTED = 1000  # runs bound to no case, listed by trace id (the rest counted)
PRETTY_UP_TO = 1000  # runs: JSON is indented up to this, compact (and streamed) beyond


class Runs:
    """A case's runs as dicts, produced on each iteration."""

    __slots__ = ("_runs", "_show")

    def __init__(self, runs: Sequence[Any], show_arguments: bool) -> None:
        self._runs = runs
        self._show = show_arguments

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for run in self._runs:
            yield run.to_dict(self._show)

    def json_texts(self) -> Iterator[str]:
        """Each run as compact JSON text; a spooled run is copied out as it was written."""
        for run in self._runs:
            if isinstance(run, RunRecord):
                yield run.json_text()
            else:
                yield run_json(run.to_dict(self._show)).decode()

    def records(self) -> Sequence[Any]:
        """The scored runs as kept (small records: verdict and numbers, no step table)."""
        return self._runs

    def detail(self, run: Any) -> dict[str, Any]:
        """One of :meth:`records` as a dict, with its reasons and step table."""
        value: dict[str, Any] = run.to_dict(self._show)
        return value

    def __len__(self) -> int:
        return len(self._runs)

    def __bool__(self) -> bool:
        return bool(self._runs)


def closest_ids(case_id: str, named: Sequence[str], n: int = 3) -> list[str]:
    """The case ids runs did carry that look most like ``case_id`` (a typo, a renamed case)."""
    close = difflib.get_close_matches(case_id, list(named), n=n, cutoff=0.5)
    return close or list(named)[:n]


def build(results: Sequence[CaseResult], *, k: int, threshold: float, k_max: int | None = None,
          show_arguments: bool = False, extra_summary: dict[str, Any] | None = None,
          allow_empty: bool = False) -> dict[str, Any]:
    """The report as plain data: per case (runs, pass^k keyed by k), per set summaries, the gate.

    A case with no runs fails the gate whatever its set (``allow_empty``: it is only reported);
    the reason names the closest case ids that runs carried but the file does not have.
    """
    named = list((extra_summary or {}).get("unknown_cases", {}))
    without: list[dict[str, Any]] = []
    for r in results:
        if not r.n:
            closest = closest_ids(r.case.id, named)
            reason = "no run named this case" + (f"; closest unbound case ids: {', '.join(closest)}" if closest else "")
            without.append({"id": r.case.id, "set": r.case.set, "reason": reason, "closest_unbound": closest})
    cases = []
    for r in results:
        n, c = r.n, r.c
        gate = round(pass_hat_k(n, c, k), 4) if n >= k else None
        cases.append({
            "id": r.case.id,
            "set": r.case.set,
            "task": r.case.task,
            "trials": n,
            "passes": c,
            "pass_hat_k": {str(i): round(v, 4) for i, v in r.curve(k_max).items()} if n else {},
            "pass_at_k": {str(i): round(v, 4) for i, v in r.pass_at(k_max).items()} if n else {},
            "efficiency": efficiency(r.runs),
            "gate": {"k": k, "pass_hat_k": gate, "threshold": threshold,
                     "failed": r.failed(k, threshold) and not (allow_empty and not n),
                     **({"reason": next(w["reason"] for w in without if w["id"] == r.case.id)} if not n else {})},
            "runs": Runs(r.runs, show_arguments),
        })
    summary: dict[str, Any] = {}
    for name in SETS:
        members = [r for r in results if r.case.set == name]
        if members:
            summary[name] = set_summary(members, k_max)
    failing = [r for r in results if r.failed(k, threshold) and not (allow_empty and not r.n)]
    regression = [r.case.id for r in failing if r.case.set == "regression"]
    summary["gate"] = {"k": k, "threshold": threshold, "failed_cases": [r.case.id for r in failing],
                       "failed_regression_cases": regression, "cases_without_runs": without,
                       "allow_empty": allow_empty, "failed": bool(regression or (without and not allow_empty))}
    summary.update(extra_summary or {})
    return {"cases": cases, "summary": summary}


def _plain(value: Any) -> Any:
    if isinstance(value, Runs):
        return list(value)
    return str(value)  # as run_json writes it, so the indented and the streamed reports agree


def write_json(doc: dict[str, Any], out: TextIO) -> None:
    """Indented for a reader; compact and streamed run by run past ``PRETTY_UP_TO`` runs."""
    if sum(len(c["runs"]) for c in doc["cases"]) <= PRETTY_UP_TO:
        out.write(orjson.dumps(doc, default=_plain, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode() + "\n")
        return
    sep = (",", ":")
    out.write('{"cases":[')
    for i, case in enumerate(doc["cases"]):
        head = json.dumps({k: v for k, v in case.items() if k != "runs"}, separators=sep)
        out.write(("," if i else "") + head[:-1] + ',"runs":[')
        for j, text in enumerate(case["runs"].json_texts()):  # a loop: one run in memory at a time
            out.write("," + text if j else text)
        out.write("]}")
    out.write("]")
    for key, value in doc.items():
        if key != "cases":
            out.write(f",{json.dumps(key)}:{json.dumps(value, default=_plain, separators=sep)}")
    out.write("}\n")


# --- table -----------------------------------------------------------------------------------------

def _fmt_acc(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f}"


def _curve(d: dict[str, float], limit: int = 8) -> str:
    items = list(d.items())
    if len(items) > limit:  # the ends matter most: first few, then the last
        items = items[: limit - 1] + items[-1:]
    return "  ".join(f"k={k}:{v:.2f}" for k, v in items) or "-"


def _money(v: float | None) -> str:
    return "n/a" if v is None else f"${v:.4f}"


def write_table(doc: dict[str, Any], stream: TextIO, *, all_steps: bool = False) -> None:
    for case in doc["cases"]:
        out: list[str] = []
        gate = case["gate"]
        status = "FAILED" if gate["failed"] else "ok"
        out.append(f"case {case['id']} ({case['set']})  {case['passes']}/{case['trials']} runs passed or warned  "
                   f"pass^k {_curve(case['pass_hat_k'])}  [{status}]")
        if case["runs"]:
            out.append(f"  {_efficiency(case['efficiency'])}")
        if not case["runs"]:
            out.append(f"  {case['gate'].get('reason', 'no run named this case')}")
        for i, run in enumerate(case["runs"], 1):
            trial = run["trial"] if run["trial"] is not None else i
            out.append(f"  trial {trial}  trace {run['trace_id']}  {run['verdict'].upper():4}  "
                       f"coverage {'pass' if run['coverage'] else 'FAIL'}  "
                       f"argument accuracy {_fmt_acc(run['argument_accuracy'])}  "
                       f"extra steps {run['extra_steps']:+d}  duplicate writes {run['duplicate_writes']}  "
                       f"cost {_money(run['cost_usd'])}")
            out.append(f"    {_run_efficiency(run)}")
            if run["reference"] != "main":
                out.append(f"    matched {run['reference']}")
            for reason in run["reasons"]:
                out.append(f"    - {reason}")
            if run["verdict"] != "pass" or all_steps:
                out.extend(_step_table(run))
            if len(out) > 200:  # write as we go: a case may have thousands of runs
                stream.write("\n".join(out) + "\n")
                out = []
        out.append("")
        stream.write("\n".join(out) + "\n")
    stream.write("\n".join(_summary_lines(doc["summary"])) + "\n")


def _rate(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f}"


def _efficiency(e: dict[str, Any]) -> str:
    return (f"recovery rate {_rate(e['recovery_rate'])} ({e['recovered']} of {e['tool_errors']} tool errors)  "
            f"step efficiency {_rate(e['step_efficiency'])}  "
            f"redundant-call rate {_rate(e['redundant_call_rate'])} ({e['redundant_calls']} calls)")


def _run_efficiency(run: dict[str, Any]) -> str:
    rec = run["recovery"]
    nexts = ", ".join(f"step {n['step']} {n['tool']}: {n['next']}" + (" (ok)" if n["retry_ok"] else "")
                      for n in rec["next"])
    return (f"recovery {_rate(rec['rate'])}" + (f" [{nexts}]" if nexts else "")
            + f"  step efficiency {_rate(run['step_efficiency'])}"
            + f"  redundant calls {run['redundant_calls']} (rate {_rate(run['redundant_call_rate'])})")


def _call(step: dict[str, Any]) -> str:
    """``tool`` or, with --show-arguments, ``tool(k='v')``; `` (error)`` when the call failed."""
    text = step["tool"]
    if "arguments" in step:
        text += "(" + ", ".join(f"{k}={v!r}" for k, v in step["arguments"].items()) + ")"
    return text + ("" if step["ok"] else " (error)")


def _step_table(run: dict[str, Any]) -> list[str]:
    calls = [_call(s) for s in run["steps"]]
    width = max([24, *map(len, calls)])
    lines = [f"    step  {'call':<{width}}  verdict"]
    for s, call in zip(run["steps"], calls):
        mark = s["mark"] + (f" ({s['detail']})" if s.get("detail") else "")
        lines.append(f"    {s['step']:>4}  {call:<{width}}  {mark}")
    lines.append(f"    {run['run_steps']:>4}  {'final answer':<{width}}  (reference: {run['reference_steps']} steps)")
    if run["first_divergence"]:
        lines.append(f"    first divergence: {run['first_divergence']}")
    return lines


def _summary_lines(summary: dict[str, Any]) -> list[str]:
    out = []
    for name in SETS:
        s = summary.get(name)
        if s is None:
            continue
        v = s["verdicts"]
        out.append(f"{name}: {s['cases']} cases, {s['runs']} runs ({v['pass']} pass, {v['warn']} warn, "
                   f"{v['fail']} fail), pass rate {_fmt_acc(s['pass_rate'])}")
        out.append(f"  pass^k {_curve(s['pass_hat_k'])}")
        out.append(f"  pass@k {_curve(s['pass_at_k'])}")
        c = s["cost_usd"]
        out.append(f"  cost per success {_money(c['per_success'])}, p50 {_money(c['p50'])}, p95 {_money(c['p95'])}; "
                   f"latency p50 {s['latency_s']['p50']:.2f}s p95 {s['latency_s']['p95']:.2f}s; "
                   f"steps p50 {s['steps']['p50']:g} p95 {s['steps']['p95']:g} max {s['steps']['max']:g}")
        out.append(f"  {_efficiency(s['efficiency'])}")
        if s["cases_without_runs"]:
            out.append(f"  no runs: {', '.join(s['cases_without_runs'])}")
    g = summary["gate"]
    out.append(gate_line(g))
    for w in g.get("cases_without_runs", ()):
        out.append(f"  case {w['id']} ({w['set']}): {w['reason']}" + (" (allowed)" if g.get("allow_empty") else ""))
    if summary.get("unbound_runs"):
        out.append(f"runs without a case: {summary['unbound_runs']}")
    if summary.get("unknown_cases"):
        out.append("runs naming unknown cases: " + ", ".join(f"{k} ({v})" for k, v in summary["unknown_cases"].items()))
    for u in _unbound(summary):
        out.append(f"  unbound run {u['trace_id']}  {_unbound_why(u)}")
    rest = summary.get("unbound", {}).get("not_listed", 0)
    if rest:
        out.append(f"  ... and {rest} more unbound runs")
    return out


def gate_line(g: dict[str, Any]) -> str:
    failed = g["failed_regression_cases"]
    empty = [w["id"] for w in g.get("cases_without_runs", ())]
    parts = [f"regression cases failing: {', '.join(failed)}" if failed else "no regression case fails"]
    if empty:
        parts.append(f"cases with no runs: {', '.join(empty)}" + (" (allowed)" if g.get("allow_empty") else ""))
    verdict = "FAILED" if g.get("failed") else "passed"
    return f"gate: pass^{g['k']} >= {g['threshold']:g}; " + "; ".join(parts) + f" [{verdict}]"


def _unbound(summary: dict[str, Any]) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = summary.get("unbound", {}).get("listed", [])
    return listed


def _unbound_why(u: dict[str, Any]) -> str:
    if u["case_id"] is None:
        return "carries no case id (agenteval.case.id / agentevals.eval.case.id; or --mapping)"
    return f"names case {u['case_id']!r}, which the cases file does not have"
