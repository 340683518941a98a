"""The rerun report as one self-contained HTML page, in the style of ``score --compare``.

No network: the style is the score report's, inline. The summary (counts by status, identical
share, steps and cost old against new, violations new and gone), the histogram of divergence
steps as bars, then each conversation that did not keep its path: the step, both calls (argument
names only unless ``show_arguments``), stubs, and the violations the candidate added.
"""

from __future__ import annotations

from html import escape
from typing import Any, TextIO

from ..scoring.report.html import STYLE
from .report import call_text

_EXTRA = (".bar{display:inline-block;height:12px;background:#5b6ee1;vertical-align:middle}"
          "td.num{white-space:nowrap}")


def write_html(doc: dict[str, Any], out: TextIO, show_arguments: bool = False) -> None:
    s = doc["summary"]
    w = out.write
    w("<!doctype html><html lang=en><head><meta charset=utf-8><title>otel-agenteval rerun</title>"
      "<meta http-equiv=Content-Security-Policy content=\"default-src 'none'; style-src 'unsafe-inline'\">"
      f"<style>{STYLE}{_EXTRA}</style></head><body><h1>Rerun: {s['conversations']} recorded conversations</h1>")
    verdict = ("fail", f"FAIL: the candidate adds {s['critical_added']} critical violation(s)") if s["critical_added"] \
        else ("pass", "no critical violation added")
    w(f"<p class='badge {verdict[0]}' id=gate>{escape(verdict[1])}</p>")
    share = "" if s["identical_share"] is None else f"{s['identical_share']:.1%}"
    w("<table id=summary><tr><th>status</th><th class=num>conversations</th></tr>")
    for k, n in s["counts"].items():
        w(f"<tr><td>{escape(k)}</td><td class=num>{n}</td></tr>")
    w(f"</table><p>identical paths: <b>{share}</b> of the conversations rerun (on divergence: "
      f"{escape(s['on_divergence'])})</p><table class=sbs><tr><th></th><th>recorded</th><th>candidate</th></tr>"
      f"<tr><td>steps</td><td class=num>{s['steps']['old']}</td><td class=num>{s['steps']['new']}</td></tr>"
      f"<tr><td>cost (USD)</td><td class=num>{s['cost_usd']['old']:.4f}</td><td class=num>{s['cost_usd']['new']:.4f}"
      "</td></tr></table>")
    for label, key in (("Violations new in the candidate", "violations_new"), ("Violations gone", "violations_gone")):
        items = ", ".join(f"{escape(r)} {n}" for r, n in s[key].items()) or "none"
        w(f"<p><b>{label}:</b> <span id={key}>{items}</span></p>")
    if s["divergence_steps"]:
        top = max(s["divergence_steps"].values())
        w("<h2>Divergence at step</h2><table id=histogram>")
        for k, n in s["divergence_steps"].items():
            w(f"<tr><td class=num>{escape(k)}</td><td><span class=bar style='width:{max(2, round(300 * n / top))}px'>"
              f"</span> {n}</td></tr>")
        w("</table>")
    w("<h2>Conversations that did not keep their path</h2><table id=conversations><tr><th>conversation</th>"
      "<th>status</th><th>step</th><th>recorded call</th><th>new call</th><th>new violations</th><th>gone</th>"
      "<th>steps</th>"
      "<th>cost</th></tr>")
    for e in doc["conversations"]:
        if e["status"] == "identical":
            continue
        d = e["divergence"] or {}
        rec = call_text(d["recorded"], show_arguments) if d.get("recorded") else ""
        new = call_text(d["new"], show_arguments) if d else ""
        extra = f" ({e['stubbed_calls']} stubbed)" if e["stubbed_calls"] else ""
        w(f"<tr class=differs><td><code>{escape(e['conversation_id'])}</code></td>"
          f"<td>{escape(e['status'])}{extra}<div class=muted>{escape(e['detail'] or '')}</div></td>"
          f"<td class=num>{d.get('step', '')}</td><td><code>{escape(rec)}</code></td><td><code>{escape(new)}</code></td>"
          f"<td class=fail>{escape(', '.join(v['rule'] for v in e['violations_new']))}</td>"
          f"<td class=pass>{escape(', '.join(v['rule'] for v in e['violations_gone']))}</td>"
          f"<td class=num>{e['steps']['old']} → {e['steps']['new']}</td>"
          f"<td class=num>{e['cost_usd']['old']:.4f} → {e['cost_usd']['new']:.4f}</td></tr>")
    w("</table></body></html>\n")


__all__ = ["write_html"]
