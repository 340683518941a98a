"""``otel-agenteval agreement --judgements J --labels HUMAN.jsonl``: the judge against people, per dimension.

``J``: the JSON lines ``replay --judge --judgements J`` (or ``score``) writes. ``HUMAN.jsonl``: one
object a line, ``{"trace_id": ..., "dimension": ..., "label": ..., "score": ...}`` (label, score or
both). Exit 0 when every dimension was measured, 1 when one has too few labels to be a measurement
(or the low end of its kappa's 95% interval falls below ``--threshold``), 2 for bad input (file and
line named). The figure to record in the policy (``agreement.kappa``) is that low end.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import date
from typing import Any

from ..policy.config_file import ConfigError
from .agreement import dimension_agreement

HELP = "Measure a judge's agreement with human labels per dimension (kappa, Spearman, mean difference)."


class LabelsError(ConfigError):
    what = "cannot read"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--judgements", required=True, metavar="FILE", help="the judge's JSON lines (replay --judgements)")
    p.add_argument("--labels", required=True, metavar="FILE", help="human labels, JSON lines")
    p.add_argument("--min-labels", type=int, default=50,
                   help="fewer labelled runs than this is not a measurement (default 50, as judge.min_labels)")
    p.add_argument("--threshold", type=float, help="the kappa your team requires to trust a dimension (exit 1 when its 95%% interval reaches below)")
    p.add_argument("--format", choices=("table", "json"), default="table")


def read_lines(path: str, required: tuple[str, ...]) -> list[dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise LabelsError(path, [exc.strerror or str(exc)]) from None
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except ValueError as exc:
            raise LabelsError(path, [f"line {n}: not JSON: {exc}"]) from None
        missing = [k for k in required if not isinstance(doc, dict) or not isinstance(doc.get(k), str)]
        if missing:
            raise LabelsError(path, [f"line {n}: field {missing[0]!r} missing or not a string"])
        score = doc.get("score")
        if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))):
            raise LabelsError(path, [f"line {n}: field 'score' is not a number"])
        out.append(doc)
    return out


def measure(judgements: list[dict[str, Any]], labels: list[dict[str, Any]], min_labels: int) -> dict[str, Any]:
    by_dimension: dict[str, dict[str, dict[str, Any]]] = {}
    for h in labels:
        by_dimension.setdefault(h["dimension"], {})[h["trace_id"]] = h
    dims = sorted({j["dimension"] for j in judgements} | set(by_dimension))
    return {d: dimension_agreement([j for j in judgements if j["dimension"] == d], by_dimension.get(d, {}),
                                   min_labels) for d in dims}


def _fig(f: dict[str, Any] | None) -> str:
    if not f or f["value"] is None:
        return "n/a"
    ci = f["interval"]
    return f"{f['value']:.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def _low(r: dict[str, Any]) -> float | None:
    """The low end of kappa's 95% interval: what a dimension's trust rests on."""
    ci = r.get("kappa", {}).get("interval")
    return None if not ci else float(ci[0])


def run(args: argparse.Namespace) -> int:
    if args.min_labels < 1:
        print("agreement: --min-labels must be at least 1", file=sys.stderr)
        return 2
    result = measure(read_lines(args.judgements, ("trace_id", "dimension")),
                     read_lines(args.labels, ("trace_id", "dimension")), args.min_labels)
    failing = [d for d, r in result.items() if not r["measurement"] or (
        args.threshold is not None and (_low(r) is None or _low(r) < args.threshold))]
    if args.format == "json":
        print(json.dumps({"dimensions": result, "threshold": args.threshold}, indent=2))
        return 1 if failing else 0
    for d, r in result.items():
        print(f"{d}: {r['labelled']} labelled runs of {r['judgements']} judged")
        if not r["measurement"]:
            print(f"  too few labels to measure agreement: {r['labelled']} is fewer than {r['min_labels']}; "
                  "no figure is given (label more runs, then run this again)")
        else:
            print(f"  labels: Cohen's kappa {_fig(r['kappa'])} (n={r['kappa']['n']})")
            print(f"  scores: Spearman {_fig(r['spearman'])}, mean abs difference {_fig(r['mean_abs_diff'])} "
                  f"(n={r['spearman']['n']})")
            low = _low(r)
            if low is not None and (args.threshold is None or low >= args.threshold):
                print(f"  to record in the policy (the interval's low end): agreement: {{kappa: {low}, "
                      f"labels: {r['labelled']}, measured: \"{date.today().isoformat()}\"}}")
            elif low is not None:
                print(f"  below --threshold {args.threshold} (the interval's low end, {low}): not to be trusted")
        rules = r["rules"]
        print(f"  judge label vs the rules' verdict: same on {rules['same']} of {rules['of']} runs, "
              f"kappa {_fig(rules['kappa'])}")
    return 1 if failing else 0
