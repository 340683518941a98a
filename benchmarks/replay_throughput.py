"""Replay throughput and memory: spans per second and peak RSS, end to end.

Generates OTLP JSON lines files of 1k, 10k and 100k agent runs (~14 spans each, see
``make_otlp_traces.py``; the 100k file is ~1.2 GB), then runs ``otel-agenteval replay`` on each
in a fresh process and reports wall and CPU time, spans/s and the child's peak RSS
(``ru_maxrss``). Also splits the cost: reading alone (``iter_batches``) vs reading + engine.
The read figure leaves out the package import (~0.2 s CPU, the same for any file); the JSON
output also has it with the import counted (``read_spans_per_s_incl_import``), as measured before.

    python benchmarks/replay_throughput.py [--runs 1000,10000,100000] [--dir DIR] [--keep] [--json]
        [--read-rounds N] [--baseline SRC]

``--read-rounds N`` reads each file N times (median CPU). ``--baseline SRC`` also reads it with
the ``otel_agenteval`` of another source tree (e.g. ``git archive REV | tar -x -C SRC``), rounds
interleaved with the current tree's, so before/after compare on the same machine load.

``--protobuf`` replays the same runs as an OTLP protobuf file (varint length-delimited requests,
converted from the JSON lines once). ``--readers c,python,upb`` (with ``--protobuf``) replays it
``--read-rounds`` times with each of protobuf's readers (``OTEL_AGENTEVAL_WIRE_READER``), rounds
rotated, and reports each reader's replay CPU spans/s and its ratio to the first, paired by round.

Not part of the test suite: it takes minutes and its numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from otel_agenteval.cli.build import build_name

HERE = Path(__file__).resolve().parent

CHILD = r"""
import json, os, resource, sys, time
from pathlib import Path
mode, policy, path = sys.argv[1:4]
t0, c0 = time.perf_counter(), time.process_time()
imported = 0.0
if mode == "read":
    from otel_agenteval.replay.readers import ReadCounts, iter_batches
    imported = time.process_time() - c0
    counts = ReadCounts()
    for _ in iter_batches([path], counts=counts):
        pass
    spans, code = counts.spans, 0
else:
    from otel_agenteval.cli.main import main
    out = sys.stdout
    sys.stdout = open(os.devnull, "w")
    code = main(["replay", path, "--policy", policy, "--format", "json", "--quiet"])
    sys.stdout.close()
    sys.stdout = out
    spans = None
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({"code": code, "spans": spans, "wall_s": wall, "cpu_s": cpu, "import_cpu_s": imported,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def child(mode: str, policy: Path, path: Path, src: str | None = None, reader: str | None = None) -> dict[str, Any]:
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src
    if reader:
        env["OTEL_AGENTEVAL_WIRE_READER"] = reader
    out = subprocess.run([sys.executable, "-c", CHILD, mode, str(policy), str(path)], check=True,
                         capture_output=True, text=True, env=env, cwd=src)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def reads(policy: Path, path: Path, rounds: int, baseline: str | None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Median-CPU read of ``path`` by this tree (and the baseline tree), rounds interleaved."""
    mine: list[dict[str, Any]] = []
    base: list[dict[str, Any]] = []
    for r in range(rounds):
        arms = [(mine, None), (base, baseline)] if baseline else [(mine, None)]
        for got, src in (arms if r % 2 == 0 else arms[::-1]):
            got.append(child("read", policy, path, src))

    def median(runs: list[dict[str, Any]]) -> dict[str, Any]:
        return sorted(runs, key=lambda x: x["cpu_s"] - x["import_cpu_s"])[len(runs) // 2]

    return median(mine), (median(base) if base else None)


def protobuf_file(path: Path) -> Path:
    """``path`` (OTLP JSON lines) as an OTLP protobuf file of the same requests, varint-delimited."""
    import base64

    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    out = path.with_suffix(".pb")
    if out.exists():
        return out

    def b64_ids(doc: Any) -> Any:
        if isinstance(doc, dict):
            return {k: (base64.b64encode(bytes.fromhex(v)).decode() if k in ("traceId", "spanId", "parentSpanId")
                        else b64_ids(v)) for k, v in doc.items()}
        return [b64_ids(v) for v in doc] if isinstance(doc, list) else doc

    with open(path, encoding="utf-8") as src, open(out, "wb") as dst:
        for line in src:
            data = ParseDict(b64_ids(json.loads(line)), ExportTraceServiceRequest()).SerializeToString()
            n = len(data)
            while n >= 0x80:
                dst.write(bytes([n & 0x7F | 0x80]))
                n >>= 7
            dst.write(bytes([n]) + data)
    return out


def by_reader(policy: Path, path: Path, rounds: int, readers: list[str]) -> dict[str, dict[str, Any]]:
    """``replay`` of ``path`` with each reader, ``rounds`` times, the order rotated every round."""
    got: dict[str, list[dict[str, Any]]] = {r: [] for r in readers}
    for n in range(rounds):
        turn = n % len(readers)
        order = readers[turn:] + readers[:turn]
        for reader in (order if n % 2 == 0 else order[::-1]):
            got[reader].append(child("replay", policy, path, reader=reader))
    spans = child("read", policy, path)["spans"]
    first = [spans / r["cpu_s"] for r in got[readers[0]]]
    out = {}
    for reader, runs in got.items():
        rate = [spans / r["cpu_s"] for r in runs]
        ratio = [a / b for a, b in zip(first, rate)]
        out[reader] = {"replay_spans_per_s_cpu": rate, "ratio_first_to_this": ratio,
                       "peak_rss_mb": [r["peak_rss_mb"] for r in runs]}
        print(f"  reader {reader:>6}: replay {statistics.median(rate):>9,.0f} spans/s cpu "
              f"({min(rate):,.0f}-{max(rate):,.0f}); {readers[0]} / {reader} paired: "
              f"{statistics.median(ratio):.2f}x ({min(ratio):.2f}-{max(ratio):.2f})", file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(HERE))
    import make_otlp_traces as gen

    extra = argparse.ArgumentParser(add_help=False)
    extra.add_argument("--read-rounds", type=int, default=1)
    extra.add_argument("--baseline")
    extra.add_argument("--protobuf", action="store_true")
    extra.add_argument("--readers")
    more, rest = extra.parse_known_args(argv)
    a, work = gen.bench_workdir(__doc__, "replay-bench-", rest)
    baseline = str(Path(more.baseline).resolve()) if more.baseline else None
    policy = work / "policy.yaml"
    results = []
    for runs in (int(r) for r in a.runs.split(",")):
        path = gen.runs_file(work, runs)
        if more.protobuf:
            path = protobuf_file(path)
        if more.readers:
            results.append({"runs": runs, "file_mb": round(path.stat().st_size / 1e6, 1),
                            "readers": by_reader(policy, path, more.read_rounds, more.readers.split(","))})
            continue
        read, base = reads(policy, path, more.read_rounds, baseline)
        full = child("replay", policy, path)
        spans = read["spans"]
        row = {"runs": runs, "spans": spans, "file_mb": round(path.stat().st_size / 1e6, 1),
               "read_spans_per_s": round(spans / (read["cpu_s"] - read["import_cpu_s"])),
               "read_spans_per_s_incl_import": round(spans / read["cpu_s"]),
               "replay_spans_per_s_cpu": round(spans / full["cpu_s"]),
               "replay_spans_per_s_wall": round(spans / full["wall_s"]),
               "replay_wall_s": round(full["wall_s"], 1), "replay_exit": full["code"],
               "peak_rss_mb": round(full["peak_rss_mb"], 1), "read_peak_rss_mb": round(read["peak_rss_mb"], 1)}
        if base is not None:
            row["baseline_read_spans_per_s"] = round(base["spans"] / (base["cpu_s"] - base["import_cpu_s"]))
            row["baseline_read_peak_rss_mb"] = round(base["peak_rss_mb"], 1)
        results.append(row)
        vs = f" (baseline {row['baseline_read_spans_per_s']:>7}/s)" if base is not None else ""
        print(f"{runs:>7} runs {spans:>9} spans {row['file_mb']:>7} MB | read {row['read_spans_per_s']:>7}/s{vs} | "
              f"replay {row['replay_spans_per_s_cpu']:>7}/s cpu {row['replay_spans_per_s_wall']:>7}/s wall "
              f"({row['replay_wall_s']} s) | peak RSS {row['peak_rss_mb']} MB", file=sys.stderr)
        if not a.keep and not a.dir:
            path.unlink()
    info = {"python": platform.python_version(), "build": build_name(), "machine": platform.machine(), "cpus": os.cpu_count(),
            "load_avg": os.getloadavg(), "results": results}
    print(f"build: {info['build']}", file=sys.stderr)
    if a.json:
        print(json.dumps(info, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
