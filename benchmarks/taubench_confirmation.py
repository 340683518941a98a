"""``write_without_confirmation`` on real τ-bench airline conversations: precision and recall.

Replays the dev runs (``shared/datasets/taubench-airline/``, 100 gpt-4o runs as OTLP/JSON with
the conversation on each model call) through :func:`otel_agenteval.replay.replay`, the path the
``replay`` command takes, with ``examples/policies/taubench-airline.yaml``, and compares the
findings with the hand labels in ``benchmarks/labels/taubench-airline-confirmation.jsonl`` (one line
per write call, named by its run and its place among that run's writes, read from the dataset:
``violation`` when the user did not explicitly agree, in answer to the agent's
description of it, to the action that was called; ``ok`` otherwise; each with its reason).

    python benchmarks/taubench_confirmation.py [--policy FILE] [--data DIR] [--json] [--quiet]

Prints precision, recall, the confusion counts, and every disagreement with the label's reason
and the finding's reason fields. The dataset is looked for in ``$OTEL_AGENTEVAL_DATASETS``, then
in ``shared/datasets`` beside the checkout (or beside its parent, for a worktree).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from otel_agenteval.policy.policy import Policy
from otel_agenteval.replay import replay

REPO = Path(__file__).resolve().parent.parent
LABELS = REPO / "benchmarks" / "labels" / "taubench-airline-confirmation.jsonl"
POLICY = REPO / "examples" / "policies" / "taubench-airline.yaml"
TRACES = "gpt-4o-airline-even-tasks.otlp.jsonl.gz"
RULE = "write_without_confirmation"


def find_dataset(explicit: str | None = None) -> Path | None:
    """The ``taubench-airline`` folder, or ``None`` when it is not on this machine."""
    roots = [Path(explicit)] if explicit else []
    if os.environ.get("OTEL_AGENTEVAL_DATASETS"):
        roots.append(Path(os.environ["OTEL_AGENTEVAL_DATASETS"]))
    roots += [REPO.parent / "shared" / "datasets", REPO.parent.parent / "shared" / "datasets"]
    for root in roots:
        for cand in (root, root / "taubench-airline"):
            if (cand / TRACES).is_file():
                return cand
    return None


@dataclass
class Measure:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0
    disagreements: list[dict[str, Any]] = field(default_factory=list)

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    def as_dict(self) -> dict[str, Any]:
        return {"precision": round(self.precision, 3), "recall": round(self.recall, 3), "tp": self.tp,
                "fp": self.fp, "fn": self.fn, "tn": self.tn, "disagreements": self.disagreements}


def load_labels(path: Path = LABELS) -> list[dict[str, Any]]:
    """The hand labels: one write call each, by run and its place among the run's write calls
    (1: the first to run), with the label and its reason; nothing else of the data is kept here."""
    out: list[dict[str, Any]] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        if row.get("label") not in ("ok", "violation"):
            raise SystemExit(f"{path}:{n}: label must be ok or violation, not {row.get('label')!r}")
        if not isinstance(row.get("run"), int) or not isinstance(row.get("write"), int) or row["write"] < 1:
            raise SystemExit(f"{path}:{n}: run and write (1 for a run's first write call) must be whole numbers")
        row["line"] = n
        out.append(row)
    return out


def measure(data: Path, policy: Policy, labels: list[dict[str, Any]]) -> Measure:
    """Replay the dev runs with ``policy``; compare the rule's findings with ``labels``."""
    trace_ids = {e["run"]: e["trace_id"] for e in json.loads((data / "index.json").read_text(encoding="utf-8"))}
    result = replay([data / TRACES], policy, on_reject=lambda msg: None)
    found = {(v.trace_id, v.span_id or ""): v for v in result.violations if v.rule == RULE}
    writes = {t.trace_hex: [s for s in t.steps if policy.is_write(s.tool)] for t in result.trajectories}
    m = Measure()
    for row in labels:
        trace = trace_ids.get(row["run"], "")
        ran = writes.get(trace, [])
        if row["write"] > len(ran):
            raise SystemExit(f"labels line {row['line']}: run {row['run']} has {len(ran)} write calls in {data}, "
                             f"not {row['write']}")
        step = ran[row["write"] - 1]
        key = (trace, f"{step.span_id:016x}")
        v = found.pop(key, None)
        said = v is not None
        truth = row["label"] == "violation"
        if said and truth:
            m.tp += 1
        elif said:
            m.fp += 1
        elif truth:
            m.fn += 1
        else:
            m.tn += 1
        if said != truth:
            m.disagreements.append({"trace_id": key[0], "span_id": key[1], "run": row["run"], "tool": step.tool,
                                    "label": row["label"], "reason": row["reason"],
                                    "finding": dict(v.details) if v is not None else None})
    for key, v in found.items():  # a finding on a span nobody labelled: counted as a false alarm
        m.fp += 1
        m.disagreements.append({"trace_id": key[0], "span_id": key[1], "run": None, "tool": v.tool,
                                "label": "unlabelled", "reason": "", "finding": dict(v.details)})
    return m


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--policy", default=str(POLICY))
    p.add_argument("--labels", default=str(LABELS))
    p.add_argument("--data", default=None, help="the taubench-airline folder (default: looked for)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--quiet", action="store_true", help="figures only, no disagreements")
    args = p.parse_args(argv)
    data = find_dataset(args.data)
    if data is None:
        print("taubench_confirmation: dataset not found (shared/datasets/taubench-airline)", file=sys.stderr)
        return 2
    m = measure(data, Policy.from_file(args.policy), load_labels(Path(args.labels)))
    if args.json:
        print(json.dumps(m.as_dict(), indent=2))
        return 0
    print(f"{RULE} on {m.tp + m.fp + m.fn + m.tn} labelled writes ({m.tp + m.fn} violations): "
          f"precision {m.precision:.2f}, recall {m.recall:.2f}  (tp {m.tp}, fp {m.fp}, fn {m.fn}, tn {m.tn})")
    if not args.quiet:
        for d in m.disagreements:
            kind = "false alarm" if d["finding"] is not None else "missed"
            print(f"  {kind:11} run {d['run']} span {d['span_id']} {d['tool']}: label {d['label']} "
                  f"({d['reason']}); finding {json.dumps(d['finding'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
