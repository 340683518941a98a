"""Rerun throughput: the harness's own cost, conversations per second with a trivial agent.

Records the demo's runs (``otel-agenteval demo --traces-out``), reads them once, then reruns the
single-turn ones with an agent that makes each recorded call straight back through the gate (no
model, no framework, every path identical): what is measured is the harness (a tracer provider
and processor per conversation, the gate, the spans, the checks), in one process and in ``--jobs``
worker processes.

    python benchmarks/rerun_throughput.py [--runs 2000] [--jobs 2]

Not part of the test suite: its numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from otel_agenteval.cli.demo_world import DEMO_POLICY  # noqa: E402
from otel_agenteval.policy.policy import Policy  # noqa: E402
from otel_agenteval.rerun import read_conversations, rerun  # noqa: E402

CALLS_FILE = "RERUN_BENCH_CALLS"  # the recorded calls by user text, for the workers too
_calls: dict[str, list[list[Any]]] = {}


def trivial(turn: Any, tools: Any) -> None:
    """Every recorded call of the turn, in order (the gate matches each: the path is identical)."""
    if not _calls:
        _calls.update(json.loads(Path(os.environ[CALLS_FILE]).read_text()))
    for tool, args in _calls.get(turn.text or "", ()):
        tools.call(tool, args)


def main() -> None:
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))  # no line a violation
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        traces, policy_file, calls = Path(d) / "demo.jsonl.gz", Path(d) / "policy.json", Path(d) / "calls.json"
        policy_file.write_text(json.dumps(DEMO_POLICY))
        subprocess.run([sys.executable, "-m", "otel_agenteval", "demo", "--runs", str(a.runs), "--no-serve", "--quiet",
                        "--traces-out", str(traces)], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        policy = Policy.from_dict(DEMO_POLICY, "demo")
        t0 = time.perf_counter()
        conversations = read_conversations([traces], policy)
        read_s = time.perf_counter() - t0
        single = [c for c in conversations if len(c.runs) == 1 and all(x.ok for x in c.runs[0].calls)]
        calls.write_text(json.dumps({c.runs[0].user_text: [[x.tool, x.arguments] for x in c.runs[0].calls]
                                     for c in single}))
        os.environ[CALLS_FILE] = str(calls)
        print(f"read {len(conversations)} conversations ({a.runs} runs) in {read_s:.2f}s; "
              f"rerunning the {len(single)} single-turn ones without a failed call")
        for jobs in sorted({1, a.jobs}):
            t0 = time.perf_counter()
            result = rerun([], "rerun_throughput:trivial", policy_file=policy_file, conversations=single, jobs=jobs)
            wall = time.perf_counter() - t0
            same = sum(c.status == "identical" for c in result.conversations)
            print(f"jobs {jobs}: {len(single) / wall:,.0f} conversations/s ({wall:.2f}s; {same} identical)")


if __name__ == "__main__":
    main()
