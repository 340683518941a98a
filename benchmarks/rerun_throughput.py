"""Rerun throughput: the harness's own cost, conversations per second with a trivial agent.

Records the demo's runs (``otel-agenteval demo --traces-out``), reads them once, then reruns them
with an agent that makes every recorded call straight back through the gate (no model, no
framework): what is measured is the harness (a tracer provider and processor per conversation, the
gate, the spans, the checks), in one process.

    python benchmarks/rerun_throughput.py [--runs 2000]

Not part of the test suite: its numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from otel_agenteval.cli.demo_world import DEMO_POLICY  # noqa: E402
from otel_agenteval.policy.policy import Policy  # noqa: E402
from otel_agenteval.rerun import read_conversations, rerun  # noqa: E402

RECORDED: dict[str, list[Any]] = {}  # trace-free trivial agent: the calls it should make, by user text


def trivial(turn: Any, tools: Any) -> None:
    """Every recorded call of the turn, in order (the gate matches each, so the path is identical)."""
    for tool, args in RECORDED.get(turn.text or "", ()):
        tools.call(tool, args)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=2000)
    a = ap.parse_args()
    policy = Policy.from_dict(DEMO_POLICY, "demo")
    with tempfile.TemporaryDirectory() as d:
        traces = Path(d) / "demo.jsonl.gz"
        subprocess.run([sys.executable, "-m", "otel_agenteval", "demo", "--runs", str(a.runs), "--no-serve", "--quiet",
                        "--traces-out", str(traces)], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        t0 = time.perf_counter()
        conversations = read_conversations([traces], policy)
        read_s = time.perf_counter() - t0
        single = [c for c in conversations if len(c.runs) == 1 and all(x.ok for x in c.runs[0].calls)]
        for c in single:
            RECORDED[c.runs[0].user_text or ""] = [(x.tool, x.arguments) for x in c.runs[0].calls]
        print(f"read {len(conversations)} conversations ({a.runs} runs) in {read_s:.2f}s; "
              f"rerunning {len(single)} single-turn ones")
        t0 = time.perf_counter()
        result = rerun([], trivial, policy=policy, conversations=single)
        wall = time.perf_counter() - t0
        same = sum(c.status == "identical" for c in result.conversations)
        print(f"{len(single) / wall:,.0f} conversations/s ({wall:.2f}s; {same} identical)")


if __name__ == "__main__":
    main()
