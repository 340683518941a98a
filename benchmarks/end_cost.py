"""``span.end()`` alone, root ends apart from the rest: the SDK with a BatchSpanProcessor, with and
without this processor, one thread, arms alternated.

Where the contention benchmark's p99 comes from: p99 follows the work done inside ``end()``,
not waiting for a lock. The runs are the contention benchmark's (an ``invoke_agent`` root, four
tool spans, one ``chat`` span).

    python benchmarks/end_cost.py [--runs 20000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import contention  # noqa: E402
from _harness import make_app, quiet  # noqa: E402


def _q(xs: list[int], p: float) -> float:
    return sorted(xs)[int(len(xs) * p)] / 1000


def arm(agenteval: bool, runs: int) -> dict[str, float]:
    tracer = make_app(contention.POLICY, agenteval=agenteval).provider.get_tracer("end-cost")
    roots: list[int] = []
    others: list[int] = []
    for run in range(runs):
        contention.one_run(tracer, str(run), roots, others)
    return {"other p50": _q(others, 0.5), "other p99": _q(others, 0.99), "root p50": _q(roots, 0.5),
            "root p99": _q(roots, 0.99), "all p99": _q(roots + others, 0.99)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    base: list[dict[str, float]] = []
    ours: list[dict[str, float]] = []
    with quiet():
        for _ in range(a.rounds):
            base.append(arm(False, a.runs))
            ours.append(arm(True, a.runs))
    print(f"span.end() in µs, {a.runs} runs of 6 spans, {a.rounds} rounds (baseline / with the processor / ratio)")
    for key in base[0]:
        b = [r[key] for r in base]
        o = [r[key] for r in ours]
        ratios = ", ".join(f"{y / x:.2f}x" for x, y in zip(b, o))
        print(f"  {key:9}  {'/'.join(f'{x:.1f}' for x in b):>12}  {'/'.join(f'{y:.1f}' for y in o):>12}  {ratios}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
