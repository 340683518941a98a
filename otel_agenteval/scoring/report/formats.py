"""The score report as Markdown (a CI summary) and JUnit XML (one test case per case); ``write_report``
writes it in the format asked for."""

from __future__ import annotations

from typing import Any, TextIO
from xml.etree import ElementTree as ET

from .document import SETS, _call, _curve, _fmt_acc, _money, _rate, _run_efficiency, _unbound, _unbound_why, gate_line


def _eff_cells(e: dict[str, Any]) -> str:
    return f"{_rate(e['recovery_rate'])} | {_rate(e['step_efficiency'])} | {_rate(e['redundant_call_rate'])}"


# --- markdown --------------------------------------------------------------------------------------

def write_markdown(doc: dict[str, Any], stream: TextIO) -> None:
    out = ["# Trajectory scores", ""]
    for name in SETS:
        s = doc["summary"].get(name)
        if s is None:
            continue
        c = s["cost_usd"]
        out += [f"## {name.title()} set", "",
                "| cases | runs | pass rate | pass^k | cost per success | p95 cost | p95 latency | recovery rate "
                "| step efficiency | redundant-call rate |",
                "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|",
                (f"| {s['cases']} | {s['runs']} | {_fmt_acc(s['pass_rate'])} | {_curve(s['pass_hat_k'])} | "
                 f"{_money(c['per_success'])} | {_money(c['p95'])} | {s['latency_s']['p95']:.2f}s | "
                 f"{_eff_cells(s['efficiency'])} |"), ""]
    out += ["## Cases", "", "| case | set | pass or warn | pass^k | recovery rate | step efficiency | redundant-call rate | gate |",
            "|---|---|---:|---|---:|---:|---:|---|"]
    for case in doc["cases"]:
        gate = "**FAILED**" if case["gate"]["failed"] else "ok"
        if "reason" in case["gate"]:
            gate += f" ({case['gate']['reason']})"
        out.append(f"| {case['id']} | {case['set']} | {case['passes']}/{case['trials']} | "
                   f"{_curve(case['pass_hat_k'])} | {_eff_cells(case['efficiency'])} | {gate} |")
    out += ["", gate_line(doc["summary"]["gate"]), ""]
    unbound = _unbound(doc["summary"])
    if unbound:
        out += ["## Runs bound to no case", "", "| trace | case named | why |", "|---|---|---|"]
        out += [f"| `{u['trace_id']}` | {u['case_id'] or '-'} | {_unbound_why(u)} |" for u in unbound]
        rest = doc["summary"].get("unbound", {}).get("not_listed", 0)
        out += ([f"| ... | | and {rest} more |"] if rest else []) + [""]
    stream.write("\n".join(out) + "\n")
    for case in doc["cases"]:
        out = []
        headed = False
        for run in case["runs"]:
            if run["verdict"] == "pass":
                continue
            if not headed:
                out += [f"### {case['id']}", ""]
                headed = True
            out += [(f"**trace `{run['trace_id']}`: {run['verdict']}** — coverage {'pass' if run['coverage'] else 'fail'}, "
                     f"argument accuracy {_fmt_acc(run['argument_accuracy'])}, extra steps {run['extra_steps']:+d}, "
                     f"duplicate writes {run['duplicate_writes']}"), ""]
            out += [f"- {r}" for r in run["reasons"]] + [f"- {_run_efficiency(run)}", ""]
            out += ["| step | call | verdict |", "|---:|---|---|"]
            for s in run["steps"]:
                out.append(f"| {s['step']} | `{_call(s)}` | {s['mark']} |")
            out += [f"| {run['run_steps']} | final answer | |", ""]
            if len(out) > 200:
                stream.write("\n".join(out) + "\n")
                out = []
        if out:
            stream.write("\n".join(out) + "\n")


# --- junit -----------------------------------------------------------------------------------------

JUNIT_RUNS_SHOWN = 20  # failed runs listed per failing case


def to_junit(doc: dict[str, Any]) -> str:
    """One test case per case; it fails when pass^k at the gate's k is below the threshold."""
    cases = doc["cases"]
    g = doc["summary"]["gate"]
    failures = sum(1 for c in cases if c["gate"]["failed"])
    root = ET.Element("testsuites", name="otel-agenteval score", tests=str(len(cases)), failures=str(failures))
    for name in SETS:
        members = [c for c in cases if c["set"] == name]
        if not members:
            continue
        suite = ET.SubElement(root, "testsuite", name=name, tests=str(len(members)),
                              failures=str(sum(1 for c in members if c["gate"]["failed"])), errors="0")
        for c in members:
            tc = ET.SubElement(suite, "testcase", classname=f"agenteval.{name}", name=c["id"])
            props = ET.SubElement(tc, "properties")
            for key in ("recovery_rate", "step_efficiency", "redundant_call_rate"):
                value = c["efficiency"][key]
                ET.SubElement(props, "property", name=key, value="n/a" if value is None else f"{value:g}")
            gate = c["gate"]
            if not gate["failed"]:
                continue
            if not c["trials"]:
                msg = gate.get("reason", "no run named this case")
            elif gate["pass_hat_k"] is None:
                msg = f"{c['trials']} trials, fewer than k={g['k']}"
            else:
                msg = f"pass^{g['k']} {gate['pass_hat_k']:.2f} below {g['threshold']:g}"
            fail = ET.SubElement(tc, "failure", message=msg, type="pass_hat_k")
            lines = []
            failed_runs = 0
            for run in c["runs"]:
                if run["verdict"] == "fail":
                    failed_runs += 1
                    if failed_runs <= JUNIT_RUNS_SHOWN:
                        lines.append(f"trace {run['trace_id']}: " + "; ".join(run["reasons"]))
            if failed_runs > JUNIT_RUNS_SHOWN:
                lines.append(f"... and {failed_runs - JUNIT_RUNS_SHOWN} more failed runs")
            fail.text = "\n".join(lines) or msg
    unbound = _unbound(doc["summary"])
    if unbound:  # listed as skipped tests, so a CI page shows them next to the cases
        suite = ET.SubElement(root, "testsuite", name="unbound runs", tests=str(len(unbound)), failures="0",
                              errors="0", skipped=str(len(unbound)))
        for u in unbound:
            tc = ET.SubElement(suite, "testcase", classname="agenteval.unbound", name=u["trace_id"])
            ET.SubElement(tc, "skipped", message=_unbound_why(u))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode")


def write_report(doc: dict[str, Any], out: TextIO, fmt: str, cmp: dict[str, Any] | None,
                 candidates: list[tuple[str, dict[str, Any]]], *, detailed: bool, all_steps: bool) -> None:
    """The report in ``fmt`` (html, json, markdown, junit, table); ``cmp`` compares the candidates
    (``score --compare``); a table is the overview unless ``detailed``."""
    from . import compare, overview
    from .document import write_json, write_table

    if fmt == "html":
        from .html import labels_title, write_html

        write_html(doc, out, cmp, title=labels_title([label for label, _ in candidates]), candidates=candidates)
    elif fmt == "json":
        write_json(doc, out)
    elif fmt == "markdown":
        write_markdown(doc, out)
    elif fmt == "junit":
        out.write(to_junit(doc) + "\n")
    else:
        if detailed:
            write_table(doc, out, all_steps=all_steps)
        else:
            overview.write_overview(doc, out)
        if cmp is not None:
            out.write("\n" + compare.to_table(cmp) + "\n")
    if "judge" in doc and fmt == "table":
        from ...judging.offline import table

        out.write("\n" + table(doc["judge"]) + "\n")
