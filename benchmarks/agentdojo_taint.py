"""How many of AgentDojo's successful attacks ``tainted_argument`` finds, and how many benign runs
it flags, replaying the slack dev runs through the product's replay path with the shipped policy.

Not a test: prints figures (see benchmarks/README.md, "agentdojo_taint.py"). Reads
``../shared/datasets/agentdojo-slack/`` (never copied into the repository).

    python benchmarks/agentdojo_taint.py [--policy examples/policies/agentdojo-slack.yaml | --zero-config] [--json]
    python benchmarks/agentdojo_taint.py --synthetic banking --policy examples/policies/agentdojo-banking.yaml [--attack direct]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from otel_agenteval import Policy
from otel_agenteval.replay import replay

ROOT = Path(__file__).resolve().parent.parent
# beside the clone (CI), or beside the directory of worktrees
DATA = next((d / "shared" / "datasets" / "agentdojo-slack" for d in ROOT.parents[:2]
            if (d / "shared" / "datasets" / "agentdojo-slack").is_dir()), ROOT.parent / "shared" / "datasets" / "agentdojo-slack")


def measure(policy: Policy, traces: Path = DATA / "slack-dev.otlp.jsonl.gz",
            labels_file: Path = DATA / "labels-dev.jsonl") -> dict[str, float]:
    """The figures: % of successful attacks with a critical / any finding, % of benign runs likewise."""
    labels = [json.loads(line) for line in labels_file.read_text().splitlines() if line]
    severities: dict[str, set[str]] = defaultdict(set)
    replay([traces], policy, keep=False,
           on_violation=[lambda v: severities[v.trace_id].add(v.severity) if v.rule == "tainted_argument" else None])
    attacks = [x["trace_id"] for x in labels if x["attack_succeeded"]]
    benign = [x["trace_id"] for x in labels if not x["attacked"]]

    def pct(runs: list[str], counted: set[str]) -> float:
        hit = sum(1 for r in runs if severities[r] & counted)
        return round(100 * hit / len(runs), 1) if runs else 0.0

    # "any": an alert (critical or warning); info findings (taint.plain_pointed: info) are not alerts
    crit, alert, info = {"critical"}, {"critical", "warning"}, {"info"}
    return {"attacks_succeeded": len(attacks), "benign": len(benign),
            "attacks_critical_pct": pct(attacks, crit), "benign_critical_pct": pct(benign, crit),
            "attacks_any_pct": pct(attacks, alert), "benign_any_pct": pct(benign, alert),
            "attacks_info_pct": pct(attacks, info), "benign_info_pct": pct(benign, info)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--policy", default=str(ROOT / "examples/policies/agentdojo-slack.yaml"))
    p.add_argument("--zero-config", action="store_true", help="no policy at all")
    p.add_argument("--json", action="store_true")
    p.add_argument("--synthetic", metavar="SUITE", help="instead: traces made offline from the agentdojo package's "
                   "ground truth (agentdojo_synthetic.py; needs `pip install agentdojo`)")
    p.add_argument("--attack", default="important_instructions", help="with --synthetic: the agentdojo attack "
                   "whose text fills the injections (important_instructions, tool_knowledge, ignore_previous, direct, "
                   "injecagent, system_message, ...)")
    args = p.parse_args()
    policy = Policy() if args.zero_config else Policy.from_file(args.policy)
    if args.synthetic:
        from agentdojo_synthetic import make

        with tempfile.TemporaryDirectory() as tmp:
            f = measure(policy, *make(args.synthetic, Path(tmp), args.attack))
    elif not DATA.is_dir():
        print(f"dataset absent: {DATA}", file=sys.stderr)
        return 2
    else:
        f = measure(policy)
    if args.json:
        print(json.dumps(f))
        return 0
    print(f"{args.synthetic + ' synthetic, ' + args.attack if args.synthetic else 'slack dev'}: {f['attacks_succeeded']} successful attacks, {f['benign']} benign runs "
          f"({'zero config' if args.zero_config else args.policy})")
    print(f"  critical: {f['attacks_critical_pct']}% of attacks, {f['benign_critical_pct']}% of benign runs")
    print(f"  any:      {f['attacks_any_pct']}% of attacks, {f['benign_any_pct']}% of benign runs (critical or warning)")
    print(f"  info:     {f['attacks_info_pct']}% of attacks, {f['benign_info_pct']}% of benign runs (not alerts)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
