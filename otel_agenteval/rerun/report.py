"""The rerun's answer to the ship question, as one JSON-ready document and as a table.

Per conversation: its status (identical path, diverged at step k with both calls, stubbed, raised,
timed out, looped, not rerunnable), violations new in the candidate and gone from it, steps and
cost old against new. Overall: counts by status, a histogram of divergence steps, the totals, and
``critical_added`` (the CI gate: a critical violation the recording did not have). Where the
candidate stopped short (at its divergence, or by raising, timing out or looping), violations are
compared up to that step only: what the recording did later was never reached, so it is not "gone".
"""

from __future__ import annotations

from collections import Counter
from typing import Any, TextIO

from ..model.arguments import arguments_key
from ..model.trajectory import short_hash
from .harness import STATUSES, ConversationResult
from .recording import Finding
from .run import RerunResult


def _compared(findings: list[Finding], limit: int | None) -> Counter[tuple[str, str, str | None]]:
    return Counter((f.rule, f.severity, f.tool) for f in findings
                   if limit is None or (f.step is not None and f.step <= limit))


def _named(counts: Counter[tuple[str, str, str | None]]) -> list[dict[str, Any]]:
    return [{"rule": r, "severity": s, "tool": t, "count": n} for (r, s, t), n in sorted(counts.items(), key=str)]


def _call(call: dict[str, Any] | None, show_arguments: bool) -> dict[str, Any] | None:
    """A call as reported: values only when asked; else the names and a hash of the values."""
    if call is None or show_arguments:
        return call
    args = call.get("arguments") or {}
    return {"tool": call["tool"], "argument_names": list(args), "arguments_hash": short_hash(arguments_key(args))}


def _divergence(c: ConversationResult, show_arguments: bool) -> dict[str, Any] | None:
    if c.divergence is None:
        return None
    d = c.divergence.as_dict()
    return {**d, "recorded": _call(d["recorded"], show_arguments), "new": _call(d["new"], show_arguments)}


def conversation_entry(c: ConversationResult, stopped: bool, show_arguments: bool = False) -> dict[str, Any]:
    limit = None  # where the candidate stopped short, what the recording did later was never reached
    if stopped and c.status == "diverged" and c.divergence is not None:
        limit = c.divergence.step
    elif c.status in ("raised", "timed_out", "looped"):
        limit = c.new_steps
    old, new = _compared(c.old_findings, limit), _compared(c.new_findings, limit)
    return {
        "conversation_id": c.id, "status": c.status, "turns": c.turns, "turns_run": c.turns_run,
        "divergence": _divergence(c, show_arguments), "stubbed_calls": c.stubbed,
        "detail": c.detail, "steps": {"old": c.old_steps, "new": c.new_steps},
        "cost_usd": {"old": round(c.old_cost_usd, 6), "new": round(c.new_cost_usd, 6)},
        "violations_new": _named(new - old), "violations_gone": _named(old - new),
        "new_traces": c.new_traces,
    }


def summarise(result: RerunResult, show_arguments: bool = False) -> dict[str, Any]:
    """The whole report: ``summary`` (counts, histogram, totals, gate) and ``conversations``.
    Argument values only with ``show_arguments`` (else their names and a hash, as ``score``)."""
    stopped = result.settings.on_divergence == "stop"
    entries = [conversation_entry(c, stopped, show_arguments) for c in result.conversations]
    counts = Counter(e["status"] for e in entries)
    steps = Counter(e["divergence"]["step"] for e in entries if e["divergence"] is not None)
    new_v: Counter[str] = Counter()
    gone_v: Counter[str] = Counter()
    critical = 0
    for e in entries:
        for v in e["violations_new"]:
            new_v[v["rule"]] += v["count"]
            critical += v["count"] if v["severity"] == "critical" else 0
        for v in e["violations_gone"]:
            gone_v[v["rule"]] += v["count"]
    rerun_ok = [e for e in entries if e["status"] != "not_rerunnable"]
    summary = {
        "conversations": len(entries), "on_divergence": result.settings.on_divergence,
        "counts": {s: counts.get(s, 0) for s in STATUSES},
        "identical_share": round(counts.get("identical", 0) / len(rerun_ok), 4) if rerun_ok else None,
        "divergence_steps": {str(k): steps[k] for k in sorted(steps)},
        "violations_new": dict(sorted(new_v.items())), "violations_gone": dict(sorted(gone_v.items())),
        "critical_added": critical,
        "steps": {"old": sum(e["steps"]["old"] for e in rerun_ok), "new": sum(e["steps"]["new"] for e in rerun_ok)},
        "cost_usd": {"old": round(sum(e["cost_usd"]["old"] for e in rerun_ok), 6),
                     "new": round(sum(e["cost_usd"]["new"] for e in rerun_ok), 6)},
    }
    return {"summary": summary, "conversations": entries}


def call_text(call: dict[str, Any] | None, show_arguments: bool = False) -> str:
    """``tool(a=1)`` with values, or ``tool(a, b)`` with names only (the default: values are private)."""
    if call is None:
        return "(answered without it)"
    args = call.get("arguments")
    inner = ", ".join(f"{k}={v!r}" for k, v in args.items()) if show_arguments and args is not None \
        else ", ".join(call.get("argument_names") or args or ())
    return f"{call['tool']}({inner})"


def write_table(doc: dict[str, Any], out: TextIO, verbose: bool = False, show_arguments: bool = False) -> None:
    s = doc["summary"]
    out.write(f"rerun: {s['conversations']} conversations (on divergence: {s['on_divergence']})\n")
    out.write("  " + "  ".join(f"{k} {v}" for k, v in s["counts"].items() if v or k == "identical") + "\n")
    if s["identical_share"] is not None:
        out.write(f"  identical paths: {s['identical_share']:.1%} of the conversations rerun\n")
    if s["divergence_steps"]:
        top = max(s["divergence_steps"].values())
        out.write("  divergence at step:\n")
        for k, n in s["divergence_steps"].items():
            out.write(f"    {k:>4} {'#' * max(1, round(30 * n / top))} {n}\n")
    out.write(f"  steps  old {s['steps']['old']}  new {s['steps']['new']}\n")
    out.write(f"  cost   old ${s['cost_usd']['old']:.4f}  new ${s['cost_usd']['new']:.4f}\n")
    for label, key in (("violations new", "violations_new"), ("violations gone", "violations_gone")):
        if s[key]:
            out.write(f"  {label}: " + ", ".join(f"{r} {n}" for r, n in s[key].items()) + "\n")
    shown = [e for e in doc["conversations"] if verbose or e["status"] != "identical"]
    for e in shown[: None if verbose else 50]:
        out.write(f"{e['conversation_id']}: {e['status']}")
        d = e["divergence"]
        if d is not None:
            out.write(f" at step {d['step']} (turn {d['turn']}, {d['kind']}): recorded "
                      f"{call_text(d['recorded'], show_arguments) if d['recorded'] else '(nothing)'}, new "
                      f"{call_text(d['new'], show_arguments)}")
        if e["stubbed_calls"]:
            out.write(f"; {e['stubbed_calls']} calls stubbed")
        if e["detail"]:
            out.write(f"; {e['detail']}")
        if e["violations_new"]:
            out.write("; new: " + ", ".join(v["rule"] for v in e["violations_new"]))
        out.write("\n")
    if len(shown) > 50 and not verbose:
        out.write(f"... {len(shown) - 50} more (-v: every conversation; --format json)\n")
    if s["critical_added"]:
        out.write(f"FAIL: the candidate adds {s['critical_added']} critical violation(s)\n")


__all__ = ["call_text", "conversation_entry", "summarise", "write_table"]
