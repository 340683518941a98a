"""Two candidates on the same cases, side by side: pass rate, pass^k, cost per success.

Also a PNG of each candidate as a point on the accuracy-cost plane (matplotlib, optional:
``pip install matplotlib``, or ``.[plot]`` from the clone); without it the table is still printed and the plot is
reported as skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .document import SETS


def comparison(labels: Sequence[str], docs: Sequence[dict[str, Any]], k: int) -> dict[str, Any]:
    """Per set and per candidate: pass rate, pass^k at ``k`` (or the longest shared), cost."""
    out: dict[str, Any] = {"k": k, "candidates": list(labels), "sets": {}, "cases": {}}
    for name in SETS:
        rows = []
        for label, doc in zip(labels, docs):
            s = doc["summary"].get(name)
            if s is None:
                continue
            curve = s["pass_hat_k"]
            at = str(k) if str(k) in curve else (max(curve, key=int) if curve else None)
            rows.append({
                "candidate": label,
                "runs": s["runs"],
                "pass_rate": s["pass_rate"],
                "pass_hat_k": {"k": int(at) if at else None, "value": curve.get(at) if at else None},
                "cost_per_success": s["cost_usd"]["per_success"],
                "cost_mean": round(s["cost_usd"]["total"] / s["runs"], 6) if s["runs"] else None,
                "cost_p95": s["cost_usd"]["p95"],
            })
        if rows:
            out["sets"][name] = rows
    for label, doc in zip(labels, docs):
        for case in doc["cases"]:
            row = out["cases"].setdefault(case["id"], {"set": case["set"]})
            row[label] = case["pass_hat_k"].get("1")
    return out


def to_table(cmp: dict[str, Any]) -> str:
    lines = []
    for name, rows in cmp["sets"].items():
        lines.append(f"{name} set")
        lines.append(f"  {'candidate':<20} {'runs':>5} {'pass rate':>9} {'pass^k':>12} {'cost/success':>13} {'p95 cost':>10}")
        for r in rows:
            phk = r["pass_hat_k"]
            phk_s = "n/a" if phk["value"] is None else f"{phk['value']:.2f} (k={phk['k']})"
            lines.append(f"  {r['candidate']:<20} {r['runs']:>5} {_num(r['pass_rate']):>9} {phk_s:>12} "
                         f"{_usd(r['cost_per_success']):>13} {_usd(r['cost_p95']):>10}")
    labels = cmp["candidates"]
    if cmp["cases"]:
        lines.append("per case pass rate")
        lines.append("  " + f"{'case':<28}" + "".join(f"{lab[:14]:>16}" for lab in labels))
        for cid, row in cmp["cases"].items():
            lines.append("  " + f"{cid[:28]:<28}" + "".join(f"{_num(row.get(lab)):>16}" for lab in labels))
    return "\n".join(lines)


def _num(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f}"


def _usd(v: float | None) -> str:
    return "n/a" if v is None else f"${v:.4f}"


def plot(cmp: dict[str, Any], path: str | Path) -> str | None:
    """Write the accuracy-cost PNG; return why it was skipped, or ``None`` when written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install matplotlib, or pip install '.[plot]' in the clone)"
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    markers = {"regression": "o", "capability": "s"}
    for name, rows in cmp["sets"].items():
        for r in rows:
            x = r["cost_per_success"] if r["cost_per_success"] is not None else r["cost_mean"]
            y = r["pass_rate"]
            if x is None or y is None:
                continue
            ax.scatter([x], [y], marker=markers.get(name, "o"), s=60)
            ax.annotate(f"{r['candidate']} ({name})", (x, y), textcoords="offset points", xytext=(6, 6), fontsize=8)
    ax.set_xlabel("cost per successful run (USD)")
    ax.set_ylabel("pass rate (pass^1)")
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlim(left=0)
    ax.grid(True, alpha=0.3)
    ax.set_title("Candidates on the accuracy-cost plane")
    fig.tight_layout()
    fig.savefig(str(path), format="png", dpi=100)
    plt.close(fig)
    return None
