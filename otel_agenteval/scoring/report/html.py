"""The score report as one self-contained HTML page: read it after each evaluation.

No network: styles, the filter script and the charts (inline SVG) are in the page, and its
Content-Security-Policy forbids loading anything else. Per case: the pass^k curve (k = 1..n,
pass@k dashed), capability and regression sets apart, then its runs with verdict, reasons,
first divergence, recovery and the step table (and the run's messages where spans captured
them; their text only with ``--show-arguments``). With ``--compare``, the accuracy-cost plane.

Bounded: a case shows at most ``RUNS_PER_CASE`` runs, failed first, then warned, then passed
(the rest are counted, and in ``--format json``); the page is written as it goes, so a report
of a hundred thousand runs never holds more than one case's shown runs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape
from typing import Any, TextIO

from .charts import curve_svg, plane_svg
from .document import SETS, Runs, _run_efficiency, _unbound, _unbound_why, gate_line

RUNS_PER_CASE = 200  # runs shown per case, failed first
_ORDER = ("fail", "warn", "pass")

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1200px;padding:0 16px 48px;color:#1d2330}
h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #dde}h3{font-size:15px;margin:0}
table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #dde;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f4f8}.num{text-align:right;font-variant-numeric:tabular-nums}
.case{border:1px solid #ccd;border-radius:6px;padding:10px 14px;margin:14px 0}
.case-head{display:flex;gap:24px;align-items:flex-start;flex-wrap:wrap}
.fail{color:#b3261e}.warn{color:#8a5a00}.pass{color:#1b6e2d}.badge{font-weight:600;text-transform:uppercase}
.run{border-top:1px dashed #dde;padding:6px 0}.run[hidden]{display:none}.muted{color:#667}
#filters label{margin-right:14px}code{font-size:12px}details summary{cursor:pointer}
.msg{white-space:pre-wrap;margin:2px 0}.set{margin-left:4px}
#index ul{padding-left:18px}#index li{margin:3px 0}#index .runs a{text-decoration:none;font-size:12px;padding:0 2px}
a.fail{color:#b3261e}a.warn{color:#8a5a00}a.pass{color:#1b6e2d}
#verdict{border:2px solid;border-radius:8px;padding:12px 18px;margin:12px 0 20px}
#verdict.fail{background:#fde8e6;border-color:#b3261e}#verdict.pass{background:#e6f4e9;border-color:#1b6e2d}
#verdict .word{font-size:26px;font-weight:700;letter-spacing:.02em}#verdict p{margin:4px 0 0;color:#1d2330}
.sbs td{min-width:90px}.sbs td.cell{width:45%}.sbs tr.differs td{background:#fff6d6}
.sbs tr td.better{background:#d9f2de}.sbs tr td.worse{background:#f9dcd9}.sbs .why{font-size:12px;color:#556}
"""

_SCRIPT = """
(function(){
  var boxes = document.querySelectorAll('#filters input[type=checkbox]');
  function apply(){
    var on = {};
    boxes.forEach(function(b){ on[b.value] = b.checked; });
    var shown = 0;
    document.querySelectorAll('.run').forEach(function(r){
      var v = on[r.getAttribute('data-verdict')];
      r.hidden = !v;
      if (v) { shown++; }
    });
    document.getElementById('shown').textContent = String(shown);
  }
  boxes.forEach(function(b){ b.addEventListener('change', apply); });
  apply();
})();
"""


def _e(value: Any) -> str:
    return escape(str(value), quote=True)


def _num(v: float | None, digits: int = 2) -> str:
    return "n/a" if v is None else f"{v:.{digits}f}"


def _field(name: str, value: float | None, digits: int = 2, fmt: str | None = None) -> str:
    """A number the tests read back: ``data-field`` names it, ``data-value`` holds it exactly."""
    raw = "" if value is None else repr(value)
    text = "n/a" if value is None else (fmt.format(value) if fmt else f"{value:.{digits}f}")
    return f'<span data-field="{_e(name)}" data-value="{_e(raw)}">{_e(text)}</span>'


def _shown(runs: Runs, cap: int) -> tuple[list[Any], dict[str, int]]:
    """Up to ``cap`` runs (their small records), failed first, then warned, then passed, in trial
    order within each; and how many of each verdict there were. No run's detail is read here."""
    kept: dict[str, list[Any]] = {v: [] for v in _ORDER}
    counts = dict.fromkeys(_ORDER, 0)
    for run in runs.records():
        v = run.verdict
        counts[v] = counts.get(v, 0) + 1
        if len(kept.setdefault(v, [])) < cap:
            kept[v].append(run)
    out: list[Any] = []
    for v in _ORDER:
        out += kept[v][: cap - len(out)]
    return out, counts


def _index(cases: list[dict[str, Any]], cap: int) -> str:
    """Every case, and each run shown, as a link to its place on the page (``#case-N``, ``#run-N-I``)."""
    items = []
    for n, case in enumerate(cases):
        shown, _ = _shown(case["runs"], cap)
        badge = "fail" if case["gate"]["failed"] else "pass"
        links = "".join(f'<a class="{r.verdict}" href="#run-{n}-{i}" title="{r.verdict}">'
                        f'{_e(r.trial if r.trial is not None else i)}</a> ' for i, r in enumerate(shown, 1))
        items.append(f'<li><a href="#case-{n}"><b>{_e(case["id"])}</b></a> <span class="muted">({case["set"]})</span> '
                     f'<span class="badge {badge}">{"FAILED" if case["gate"]["failed"] else "ok"}</span> '
                     f'{case["passes"]}/{case["trials"]} pass or warn · trials: <span class="runs">{links}</span></li>')
    return ('<nav id="index"><h2>Index</h2><p class="muted">each case, and its runs by trial (red: fail, amber: warn, '
            'green: pass)</p><ul>' + "".join(items) + "</ul></nav>\n")


def _run_html(run: dict[str, Any], i: int, anchor: str = "") -> str:
    v = run["verdict"]
    trial = run["trial"] if run["trial"] is not None else i
    at = f' id="{anchor}"' if anchor else ""
    parts = [f'<div class="run"{at} data-verdict="{v}" data-trace="{run["trace_id"]}">',
             f'<span class="badge {v}">{v}</span> trial {_e(trial)} · trace <code>{run["trace_id"]}</code> · '
             f'coverage {"pass" if run["coverage"] else "FAIL"} · argument accuracy '
             f'{_field("argument_accuracy", run["argument_accuracy"])} · extra steps {run["extra_steps"]:+d} · '
             f'duplicate writes {run["duplicate_writes"]} · cost {_field("cost_usd", run["cost_usd"], fmt="${:.4f}")}',
             f'<div class="muted">{_e(_run_efficiency(run)).replace("  ", " · ")}</div>']
    if run["reasons"]:
        parts.append("<ul>" + "".join(f"<li>{_e(r)}</li>" for r in run["reasons"]) + "</ul>")
    if run["first_divergence"]:
        parts.append(f'<div>first divergence: <span class="divergence">{_e(run["first_divergence"])}</span></div>')
    rows = "".join(
        f'<tr><td class="num">{s["step"]}</td><td><code>{_e(s["tool"])}</code>'
        + (f' <code class="muted">{_e(json.dumps(s["arguments"], sort_keys=True, default=str))}</code>'
           if "arguments" in s else "")
        + f'{"" if s["ok"] else " <span class=fail>(error)</span>"}</td>'
        f'<td>{_e(s["mark"])}{" (" + _e(s["detail"]) + ")" if s.get("detail") else ""}</td></tr>'
        for s in run["steps"])
    rows += (f'<tr><td class="num">{run["run_steps"]}</td><td>final answer</td>'
             f'<td class="muted">reference: {run["reference_steps"]} steps ({_e(run["reference"])})</td></tr>')
    parts.append(f'<details{" open" if v == "fail" else ""}><summary>step table ({len(run["steps"])} calls)</summary>'
                 f'<table class="steps"><tr><th>step</th><th>call</th><th>verdict</th></tr>{rows}</table></details>')
    if run.get("messages") is not None:
        msgs = "".join(
            f'<div class="msg"><b>{_e(m.get("role"))}</b>: '
            + (f'<span class="muted">({m.get("chars", 0)} characters hidden; --show-arguments shows them)</span>'
               if m.get("hidden") else _e(m.get("content", ""))) + "</div>"
            for m in run["messages"])
        parts.append(f"<details><summary>messages ({len(run['messages'])})</summary>{msgs}</details>")
    parts.append("</div>")
    return "".join(parts)


def _set_table(name: str, s: dict[str, Any]) -> str:
    e, c = s["efficiency"], s["cost_usd"]
    return (f'<table class="set-summary" data-set="{name}"><tr><th>cases</th><th>runs</th><th>pass / warn / fail</th>'
            "<th>pass rate</th><th>cost per success</th><th>p95 cost</th><th>p95 latency</th><th>recovery rate</th>"
            "<th>step efficiency</th><th>redundant-call rate</th></tr>"
            f'<tr><td class="num">{s["cases"]}</td><td class="num">{_field("runs", s["runs"], fmt="{:d}")}</td>'
            f'<td class="num">{s["verdicts"]["pass"]} / {s["verdicts"]["warn"]} / {s["verdicts"]["fail"]}</td>'
            f'<td class="num">{_field("pass_rate", s["pass_rate"])}</td>'
            f'<td class="num">{_field("cost_per_success", c["per_success"], fmt="${:.4f}")}</td>'
            f'<td class="num">{_field("cost_p95", c["p95"], fmt="${:.4f}")}</td>'
            f'<td class="num">{s["latency_s"]["p95"]:.2f}s</td>'
            f'<td class="num">{_field("recovery_rate", e["recovery_rate"])}</td>'
            f'<td class="num">{_field("step_efficiency", e["step_efficiency"])}</td>'
            f'<td class="num">{_field("redundant_call_rate", e["redundant_call_rate"])}</td></tr></table>'
            + (f"<div>pass^k (solid) and pass@k (dashed), mean over the set's cases:<br>"
               f"{curve_svg(s['pass_hat_k'], s['pass_at_k'], 480, 180)}</div>" if len(s["pass_hat_k"]) > 1 else
               f'<p class="muted">The set\'s pass^k curve stops at k={len(s["pass_hat_k"])}, the fewest trials of any of '
               "its cases; each case's own curve is below.</p>"))


def write_html(doc: dict[str, Any], out: TextIO, cmp: dict[str, Any] | None = None,
               runs_per_case: int | None = None, title: str = "otel-agenteval score",
               candidates: Sequence[tuple[str, dict[str, Any]]] = ()) -> None:
    """Write the page for ``doc`` (:func:`report.build`), case by case, to ``out``; a case shows at
    most ``runs_per_case`` runs (default ``RUNS_PER_CASE``). With ``candidates`` (``--compare``:
    (label, doc) each, the first one ``doc``'s), the candidates side by side, run by run."""
    cap = RUNS_PER_CASE if runs_per_case is None else runs_per_case
    summary, gate = doc["summary"], doc["summary"]["gate"]
    out.write('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
              "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
              "script-src 'unsafe-inline'; img-src data:\">"
              f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>\n")
    verdict = "fail" if gate["failed"] else "pass"  # a banner: the first thing a reader sees
    word = "FAILED · exit 1" if gate["failed"] else "PASSED · exit 0"
    out.write(f'<h1>{_e(title)}</h1><div id="verdict" class="{verdict}"><div class="word {verdict}">{word}</div>'
              f'<p id="gate">{_e(gate_line(gate))}</p></div>\n')
    cases = [c for name in SETS for c in doc["cases"] if c["set"] == name]  # the page's order
    if len(candidates) > 1:
        from .html_compare import side_by_side

        if cmp is not None:
            out.write(f'<h2>Candidates on the accuracy-cost plane</h2>{plane_svg(cmp)}\n')
        side_by_side(candidates, out, cap)
        out.write(f"<h2>{_e(candidates[0][0])}: every case and run</h2>\n")
    for name in SETS:
        if name in summary:
            out.write(f'<h2>{name.title()} set</h2>{_set_table(name, summary[name])}\n')
    if cmp is not None and len(candidates) < 2:
        out.write(f'<h2>Candidates on the accuracy-cost plane</h2>{plane_svg(cmp)}\n')
    out.write(_index(cases, cap))
    out.write('<h2>Cases</h2><div id="filters">show: '
              + "".join(f'<label><input type="checkbox" value="{v}" checked> {label}</label>'
                        for v, label in (("fail", "failed"), ("warn", "warned"), ("pass", "passed")))
              + ' · <span id="shown">0</span> runs shown</div>\n')
    for n, case in enumerate(cases):
        if n == 0 or cases[n - 1]["set"] != case["set"]:
            out.write(f"<h2>{case['set'].title()} cases</h2>\n")
        _write_case(case, out, cap, n)
    unbound = _unbound(summary)
    if unbound:
        rest = summary.get("unbound", {}).get("not_listed", 0)
        out.write('<h2>Runs bound to no case</h2><table id="unbound"><tr><th>trace</th><th>why</th></tr>'
                  + "".join(f'<tr><td><code>{u["trace_id"]}</code></td><td>{_e(_unbound_why(u))}</td></tr>' for u in unbound)
                  + (f"<tr><td>...</td><td>and {rest} more</td></tr>" if rest else "") + "</table>\n")
    out.write(f"<script>{_SCRIPT}</script></body></html>\n")


def _write_case(case: dict[str, Any], out: TextIO, cap: int, n: int) -> None:
    g = case["gate"]
    status = "FAILED" if g["failed"] else "ok"
    e = case["efficiency"]
    out.write(f'<section class="case" id="case-{n}" data-case="{_e(case["id"])}" data-set="{case["set"]}">'
              '<div class="case-head"><div>'
              f'<h3>{_e(case["id"])} <span class="set muted">({case["set"]})</span> '
              f'<span class="badge {"fail" if g["failed"] else "pass"}">{status}</span> '
              '<a class="muted" href="#index">index</a></h3>'
              + (f'<p class="muted">{_e(case["task"])}</p>' if case.get("task") else "")
              + f'<p>{_field("passes", case["passes"], fmt="{:d}")} of {_field("trials", case["trials"], fmt="{:d}")}'
              f' runs passed or warned · pass^1 {_field("pass_hat_1", case["pass_hat_k"].get("1"))}'
              f' · gate pass^{g["k"]} {_field("gate_pass_hat_k", g["pass_hat_k"])} (threshold {g["threshold"]:g})</p>'
              f'<p>recovery rate {_field("recovery_rate", e["recovery_rate"])} · step efficiency '
              f'{_field("step_efficiency", e["step_efficiency"])} · redundant-call rate '
              f'{_field("redundant_call_rate", e["redundant_call_rate"])}</p>'
              + (f'<p class="fail">{_e(g["reason"])}</p>' if "reason" in g else "")
              + f'</div>{curve_svg(case["pass_hat_k"], case["pass_at_k"])}</div>\n')
    runs: Runs = case["runs"]
    shown, counts = _shown(runs, cap)
    for i, run in enumerate(shown, 1):
        out.write(_run_html(runs.detail(run), i, f"run-{n}-{i}") + "\n")
    hidden = sum(counts.values()) - len(shown)
    if hidden:
        out.write(f'<p class="muted not-shown" data-count="{hidden}">{hidden} more runs not shown '
                  f"(failed first, at most {cap} per case): --format json has every run</p>\n")
    out.write("</section>\n")


def labels_title(labels: Sequence[str]) -> str:
    return "otel-agenteval score: " + " vs ".join(labels)
STYLE = _STYLE  # the page style other reports share (rerun)
