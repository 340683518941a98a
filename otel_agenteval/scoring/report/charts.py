"""The HTML report's charts, as inline SVG: every chart has both axes with a title and ticks,
and a legend naming each series (``.axis-x``, ``.axis-y``, ``.legend`` for the page's tests)."""

from __future__ import annotations

from html import escape
from typing import Any

_HAT, _AT = "#2350c8", "#8892b0"
_SETS = {"regression": ("circle", "#2350c8"), "capability": ("rect", "#c05621")}


def _e(value: Any) -> str:
    return escape(str(value), quote=True)


def _axes(left: float, top: float, w: float, h: float, height: float, x_title: str, y_title: str) -> str:
    return (f'<g class="axes"><line x1="{left}" y1="{top + h}" x2="{left + w}" y2="{top + h}" stroke="#556"/>'
            f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + h}" stroke="#556"/>'
            f'<text class="axis-x" x="{left + w / 2:.1f}" y="{height - 4}" font-size="11" text-anchor="middle">'
            f"{_e(x_title)}</text>"
            f'<text class="axis-y" x="12" y="{top + h / 2:.1f}" font-size="11" text-anchor="middle" '
            f'transform="rotate(-90 12 {top + h / 2:.1f})">{_e(y_title)}</text></g>')


def _legend(x: float, y: float, items: list[tuple[str, str]]) -> str:
    """``items``: (name, the SVG of its key drawn at 0,0)."""
    rows = "".join(f'<g transform="translate(0 {i * 16})" data-series="{_e(name)}">{key}'
                   f'<text x="26" y="4" font-size="11">{_e(name)}</text></g>' for i, (name, key) in enumerate(items))
    return f'<g class="legend" transform="translate({x:.1f} {y:.1f})">{rows}</g>'


def curve_svg(hat: dict[str, float], at: dict[str, float], width: int = 380, height: int = 190) -> str:
    """pass^k (solid) and pass@k (dashed) against k, as an inline SVG line chart."""
    ks = sorted(int(k) for k in hat)
    if not ks:
        return '<p class="muted">no runs: no curve</p>'
    left, right, top, bottom = 48, 96, 10, 40
    w, h = width - left - right, height - top - bottom
    span = max(1, ks[-1] - ks[0])

    def xy(k: int, v: float) -> tuple[str, str]:
        x = left + (k - ks[0]) / span * w if len(ks) > 1 else left + w / 2
        return f"{x:.1f}", f"{top + (1 - v) * h:.1f}"

    def line(d: dict[str, float], dash: str, colour: str, name: str) -> str:
        pts = " ".join(",".join(xy(k, d[str(k)])) for k in ks if str(k) in d)
        dots = "".join(f'<circle cx="{xy(k, d[str(k)])[0]}" cy="{xy(k, d[str(k)])[1]}" r="2.5" fill="{colour}">'
                       f"<title>{name} k={k}: {d[str(k)]:.4f}</title></circle>" for k in ks if str(k) in d)
        return (f'<polyline fill="none" stroke="{colour}" stroke-width="2" stroke-dasharray="{dash}" '
                f'points="{pts}" data-series="{name}"/>{dots}')

    grid = "".join(f'<line x1="{left}" x2="{left + w}" y1="{top + (1 - y) * h:.1f}" y2="{top + (1 - y) * h:.1f}" '
                   f'stroke="#e4e6ee"/><text x="{left - 4}" y="{top + (1 - y) * h + 4:.1f}" font-size="10" '
                   f'text-anchor="end">{y:g}</text>' for y in (0, 0.25, 0.5, 0.75, 1))
    step = max(1, len(ks) // 6)
    ticks = sorted({ks[0], ks[-1], *(k for k in ks[::step] if ks[-1] - k >= step or k == ks[-1])})
    xlab = "".join(f'<text x="{xy(k, 0)[0]}" y="{top + h + 14}" font-size="10" text-anchor="middle">{k}</text>'
                   for k in ticks)
    legend = _legend(left + w + 12, top + 8, [
        ("pass^k", f'<line x1="0" y1="0" x2="20" y2="0" stroke="{_HAT}" stroke-width="2"/>'),
        ("pass@k", f'<line x1="0" y1="0" x2="20" y2="0" stroke="{_AT}" stroke-width="2" stroke-dasharray="4 3"/>')])
    return (f'<svg class="curve" role="img" width="{width}" height="{height}" viewBox="0 0 {width} {height}">'
            f"<title>pass^k (solid) and pass@k (dashed) for k = {ks[0]}..{ks[-1]}</title>{grid}{xlab}"
            + _axes(left, top, w, h, height, "k (runs drawn from the case's trials)", "probability")
            + f'{line(at, "4 3", _AT, "pass@k")}{line(hat, "", _HAT, "pass^k")}{legend}</svg>')


def plane_svg(cmp: dict[str, Any], width: int = 560, height: int = 300) -> str:
    """Each candidate (per set) as a point: cost per successful run against pass rate."""
    points = [(name, r) for name, rows in cmp["sets"].items() for r in rows
              if r["pass_rate"] is not None and (r["cost_per_success"] or r["cost_mean"]) is not None]
    if not points:
        return '<p class="muted">no candidate has both a pass rate and a cost</p>'
    left, right, top, bottom = 56, 150, 10, 40
    w, h = width - left - right, height - top - bottom
    xmax = max((r["cost_per_success"] if r["cost_per_success"] is not None else r["cost_mean"]) for _, r in points) or 1.0
    xmax /= 0.9  # the dearest point sits at 90% of the axis
    out = [f'<svg id="plane" role="img" width="{width}" height="{height}" viewBox="0 0 {width} {height}">',
           "<title>accuracy-cost plane</title>"]
    for y in (0, 0.25, 0.5, 0.75, 1):
        yy = top + (1 - y) * h
        out.append(f'<line x1="{left}" x2="{left + w}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#e4e6ee"/>'
                   f'<text x="{left - 4}" y="{yy + 4:.1f}" font-size="10" text-anchor="end">{y:g}</text>')
    for frac in (0, 0.5, 1):
        out.append(f'<text x="{left + frac * w:.1f}" y="{top + h + 14}" font-size="10" text-anchor="middle">'
                   f"${xmax * frac:.4f}</text>")
    out.append(_axes(left, top, w, h, height, "cost per successful run (USD)", "pass rate"))
    for name, r in points:
        x = r["cost_per_success"] if r["cost_per_success"] is not None else r["cost_mean"]
        cx, cy = left + x / xmax * w, top + (1 - r["pass_rate"]) * h
        shape, colour = _SETS.get(name, _SETS["regression"])
        mark = (f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="5"' if shape == "circle"
                else f'<rect x="{cx - 5:.1f}" y="{cy - 5:.1f}" width="10" height="10"')
        out.append(f'{mark} fill="{colour}" data-candidate="{_e(r["candidate"])}" data-set="{name}" '
                   f'data-pass-rate="{r["pass_rate"]!r}" data-cost="{x!r}"><title>{_e(r["candidate"])} ({name}): '
                   f'pass rate {r["pass_rate"]:.2f}, ${x:.4f}</title></{shape}>')
        out.append(f'<text x="{cx + 8:.1f}" y="{cy + 4:.1f}" font-size="11">{_e(r["candidate"])}</text>')
    keys = [(f"{name} set", f'<circle cx="10" cy="0" r="5" fill="{_SETS[name][1]}"/>' if _SETS[name][0] == "circle"
             else f'<rect x="5" y="-5" width="10" height="10" fill="{_SETS[name][1]}"/>')
            for name in cmp["sets"] if name in _SETS]
    out.append(_legend(left + w + 16, top + 8, keys))
    out.append("</svg>")
    return "".join(out)
