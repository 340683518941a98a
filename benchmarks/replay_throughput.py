"""Replay throughput and memory: spans per second and peak RSS, end to end.

Generates OTLP JSON lines files of 1k, 10k and 100k agent runs (~14 spans each, see
``make_otlp_traces.py``; the 100k file is ~1.2 GB), then runs ``otel-agenteval replay`` on each
in a fresh process and reports wall and CPU time, spans/s and the child's peak RSS
(``ru_maxrss``). Also splits the cost: reading alone (``iter_batches``) vs reading + engine.

    python benchmarks/replay_throughput.py [--runs 1000,10000,100000] [--dir DIR] [--keep] [--json]

Not part of the test suite: it takes minutes and its numbers depend on the machine.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

CHILD = r"""
import json, os, resource, sys, time
from pathlib import Path
mode, policy, path = sys.argv[1:4]
t0, c0 = time.perf_counter(), time.process_time()
if mode == "read":
    from otel_agenteval.replay.readers import ReadCounts, iter_batches
    counts = ReadCounts()
    for _ in iter_batches([path], counts=counts):
        pass
    spans, code = counts.spans, 0
else:
    from otel_agenteval.cli import main
    out = sys.stdout
    sys.stdout = open(os.devnull, "w")
    code = main(["replay", path, "--policy", policy, "--format", "json", "--quiet"])
    sys.stdout.close()
    sys.stdout = out
    spans = None
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({"code": code, "spans": spans, "wall_s": wall, "cpu_s": cpu,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def child(mode: str, policy: Path, path: Path) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", CHILD, mode, str(policy), str(path)], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(HERE))
    import make_otlp_traces as gen

    a, work = gen.bench_workdir(__doc__, "replay-bench-", argv)
    policy = work / "policy.yaml"
    results = []
    for runs in (int(r) for r in a.runs.split(",")):
        path = gen.runs_file(work, runs)
        read = child("read", policy, path)
        full = child("replay", policy, path)
        spans = read["spans"]
        row = {"runs": runs, "spans": spans, "file_mb": round(path.stat().st_size / 1e6, 1),
               "read_spans_per_s": round(spans / read["cpu_s"]),
               "replay_spans_per_s_cpu": round(spans / full["cpu_s"]),
               "replay_spans_per_s_wall": round(spans / full["wall_s"]),
               "replay_wall_s": round(full["wall_s"], 1), "replay_exit": full["code"],
               "peak_rss_mb": round(full["peak_rss_mb"], 1), "read_peak_rss_mb": round(read["peak_rss_mb"], 1)}
        results.append(row)
        print(f"{runs:>7} runs {spans:>9} spans {row['file_mb']:>7} MB | read {row['read_spans_per_s']:>7}/s | "
              f"replay {row['replay_spans_per_s_cpu']:>7}/s cpu {row['replay_spans_per_s_wall']:>7}/s wall "
              f"({row['replay_wall_s']} s) | peak RSS {row['peak_rss_mb']} MB", file=sys.stderr)
        if not a.keep and not a.dir:
            path.unlink()
    info = {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count(),
            "load_avg": os.getloadavg(), "results": results}
    if a.json:
        print(json.dumps(info, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
