"""Score throughput and memory: ``otel-agenteval score`` end to end, against ``replay`` alone.

Generates OTLP JSON lines files of 1k, 10k and 100k agent runs (~14 spans each, see
``make_otlp_traces.py``), then in a fresh process per file runs ``replay`` and ``score
--format json`` (the JSON report of every run, streamed to /dev/null) and reports spans/s (CPU
and wall), the child's peak RSS, and what scoring adds per run.

The generated runs carry no case id, so the child binds every run to the one case below by
replacing ``case_id_of`` (a dict lookup in real use); everything else is the command's path:
replay, matching, verdicts, the spool of run details, pass^k, the streamed report.

    python benchmarks/score_throughput.py [--runs 1000,10000,100000] [--dir DIR] [--keep] [--json]
    python benchmarks/score_throughput.py --runs 10000 --against /tmp/base --rounds 5   # A/B

``--against SRC`` scores each file with the package found in the source tree SRC too (e.g.
``git archive <commit> | tar -x -C /tmp/base``), alternating the two ``--rounds`` times in fresh
processes, and reports each side's median CPU spans/s, its spread, and the median paired ratio.

Not part of the test suite: it takes minutes and its numbers depend on the machine.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from otel_agenteval.cli.build import build_name

HERE = Path(__file__).resolve().parent

CASES = """\
cases:
  - id: support
    set: regression
    reference:
      order: in_order
      required:
        - {tool: lookup_order, args: {order_id: any}, normalise: {order_id: ignore}}
        - {tool: get_policy, args: {topic: damaged_delivery}}
        - {tool: create_claim, args: {order_id: any, reason: damaged}, normalise: {order_id: ignore}}
      allowed_extras: [search_kb, get_customer, check_inventory, send_email, close_ticket]
      budget: {max_steps: 12}
"""

CHILD = r"""
import json, os, resource, sys, time
mode, policy, cases, path = sys.argv[1:5]
t0, c0 = time.perf_counter(), time.process_time()
from otel_agenteval.cli.main import main
if mode == "score":
    import otel_agenteval.cli.score as command
    command.case_id_of = lambda t, mapping=None: "support"
    argv = ["score", path, "--cases", cases, "--policy", policy, "--format", "json", "--quiet"]
else:
    argv = ["replay", path, "--policy", policy, "--format", "json", "--quiet"]
out = sys.stdout
sys.stdout = open(os.devnull, "w")
code = main(argv)
sys.stdout.close()
sys.stdout = out
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({"code": code, "wall_s": wall, "cpu_s": cpu,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def child(mode: str, policy: Path, cases: Path, path: Path, src: str | None = None) -> dict[str, Any]:
    env = dict(os.environ)
    if src is not None:  # that tree's otel_agenteval first on the path
        env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    out = subprocess.run([sys.executable, "-c", CHILD, mode, str(policy), str(cases), str(path)], check=True,
                         capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def a_b(policy: Path, cases: Path, path: Path, spans: int, against: str, rounds: int) -> dict[str, Any]:
    """This tree against ``against``, alternating (which goes first alternates too); CPU spans/s."""
    here: list[float] = []
    there: list[float] = []
    for i in range(rounds):
        order = [(here, None), (there, against)] if i % 2 == 0 else [(there, against), (here, None)]
        for out, src in order:
            out.append(spans / child("score", policy, cases, path, src)["cpu_s"])
    ratios = sorted(h / t for h, t in zip(here, there))

    def stats(v: list[float]) -> dict[str, float]:
        v = sorted(v)
        return {"median": round(v[len(v) // 2]), "min": round(v[0]), "max": round(v[-1])}

    return {"rounds": rounds, "this": stats(here), "against": stats(there),
            "ratio_median": round(ratios[len(ratios) // 2], 3), "ratio_min": round(ratios[0], 3),
            "ratio_max": round(ratios[-1], 3)}


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(HERE))
    import argparse

    import make_otlp_traces as gen

    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--against", help="a source tree to compare with (A/B, alternating rounds)")
    pre.add_argument("--rounds", type=int, default=5, help="A/B rounds (default 5)")
    ab, rest = pre.parse_known_args(argv)
    a, work = gen.bench_workdir(__doc__, "score-bench-", rest)
    policy = work / "policy.yaml"
    cases = work / "cases.yaml"
    cases.write_text(CASES)
    results = []
    for runs in (int(r) for r in a.runs.split(",")):
        path = gen.runs_file(work, runs)
        spans = gen.count_spans(path)
        replay = child("replay", policy, cases, path)
        score = child("score", policy, cases, path)
        row = {"runs": runs, "spans": spans, "file_mb": round(path.stat().st_size / 1e6, 1),
               "replay_spans_per_s_cpu": round(spans / replay["cpu_s"]),
               "score_spans_per_s_cpu": round(spans / score["cpu_s"]),
               "score_spans_per_s_wall": round(spans / score["wall_s"]),
               "scoring_us_per_run_cpu": round((score["cpu_s"] - replay["cpu_s"]) / runs * 1e6),
               "replay_peak_rss_mb": round(replay["peak_rss_mb"], 1),
               "score_peak_rss_mb": round(score["peak_rss_mb"], 1), "score_exit": score["code"]}
        if ab.against:
            row["a_b"] = a_b(policy, cases, path, spans, ab.against, ab.rounds)
            x = row["a_b"]
            print(f"  A/B against {ab.against}: this {x['this']['median']}/s ({x['this']['min']}-{x['this']['max']}), "
                  f"against {x['against']['median']}/s ({x['against']['min']}-{x['against']['max']}), "
                  f"paired ratio {x['ratio_median']} ({x['ratio_min']}-{x['ratio_max']})", file=sys.stderr)
        results.append(row)
        print(f"{runs:>7} runs {spans:>9} spans {row['file_mb']:>7} MB | replay {row['replay_spans_per_s_cpu']:>7}/s cpu"
              f" | score {row['score_spans_per_s_cpu']:>7}/s cpu {row['score_spans_per_s_wall']:>7}/s wall"
              f" (+{row['scoring_us_per_run_cpu']} us/run) | peak RSS replay {row['replay_peak_rss_mb']} MB,"
              f" score {row['score_peak_rss_mb']} MB", file=sys.stderr)
        if not a.keep and not a.dir:
            path.unlink()
    info = {"python": platform.python_version(), "build": build_name(), "machine": platform.machine(), "cpus": os.cpu_count(),
            "load_avg": os.getloadavg(), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "results": results}
    print(f"build: {info['build']}", file=sys.stderr)
    if a.json:
        print(json.dumps(info, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
