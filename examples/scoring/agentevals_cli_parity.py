"""agentevals-cli and ``otel-agenteval score`` on the same traces: verdicts run for run.

Writes N runs (GenAI-semconv spans through the real OTel SDK: an agent span carrying
``agentevals.eval.case.id``, chat spans with the user message, one tool span per call) perturbed
from 20 EvalSet cases, then for EXACT, IN_ORDER and ANY_ORDER runs

    agentevals run runs.jsonl -e evalset.json --trajectory-match-type M -o json
    otel-agenteval score runs.jsonl --cases evalset.json --match M --max-steps-factor 0 --format json

and prints how many runs each passes and how many verdicts differ. agentevals-cli is not a
dependency of this project: install it in its own environment (``pip install agentevals-cli``)
and pass its executable with ``--agentevals``.

    python examples/scoring/agentevals_cli_parity.py --agentevals /tmp/aev/bin/agentevals --runs 300
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_agenteval.replay.write import otlp_json_line

TOOLS = {"lookup_order": ("order_id", ["100", "101", "102"]), "get_policy": ("topic", ["refunds", "damaged"]),
         "create_claim": ("reason", ["damaged", "missing"]), "search_kb": ("query", ["returns", "fees"])}
Call = tuple[str, dict[str, Any]]


def a_call(rng: random.Random) -> Call:
    tool = rng.choice(sorted(TOOLS))
    key, values = TOOLS[tool]
    return (tool, {key: rng.choice(values)})


def perturb(expected: list[Call], rng: random.Random) -> list[Call]:
    """Swap, drop, insert, change an argument, add an argument, repeat: zero to two of them."""
    run = [(t, dict(a)) for t, a in expected]
    for _ in range(rng.choice((0, 0, 1, 1, 2))):
        how = rng.choice(("swap", "drop", "insert", "change", "extra_key", "repeat"))
        if how == "swap" and len(run) > 1:
            i, j = rng.sample(range(len(run)), 2)
            run[i], run[j] = run[j], run[i]
        elif how == "drop" and run:
            run.pop(rng.randrange(len(run)))
        elif how == "insert":
            run.insert(rng.randrange(len(run) + 1), a_call(rng))
        elif how == "change" and run:
            i = rng.randrange(len(run))
            key, values = TOOLS[run[i][0]]
            run[i] = (run[i][0], {key: rng.choice(values)})
        elif how == "extra_key" and run:
            i = rng.randrange(len(run))
            run[i] = (run[i][0], {**run[i][1], "note": "x"})
        elif how == "repeat" and run:
            i = rng.randrange(len(run))
            run.insert(i, run[i])
    return run


def chat(tracer: Any, user: str, parts: list[dict[str, Any]]) -> None:
    with tracer.start_as_current_span("chat m", attributes={
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.input.messages": user,
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": parts}])}):
        pass


def write(work: Path, runs: int, seed: int) -> tuple[Path, Path]:
    rng = random.Random(seed)
    cases = {f"case-{i}": [a_call(rng) for _ in range(rng.randint(1, 4))] for i in range(20)}
    evalset = work / "evalset.json"
    evalset.write_text(json.dumps({"eval_set_id": "parity", "eval_cases": [
        {"eval_id": cid, "conversation": [{
            "invocation_id": "1", "user_content": {"role": "user", "parts": [{"text": f"task {cid}"}]},
            "final_response": {"role": "model", "parts": [{"text": "done"}]},
            "intermediate_data": {"tool_uses": [{"name": t, "args": a} for t, a in calls]}}]}
        for cid, calls in cases.items()]}))
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "parity"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("parity")
    for n in range(runs):
        cid = f"case-{n % 20}"
        run = perturb(cases[cid], rng)
        user = json.dumps([{"role": "user", "parts": [{"type": "text", "content": f"task {cid}"}]}])
        with tracer.start_as_current_span("invoke_agent support", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support", "agentevals.eval.case.id": cid}):
            chat(tracer, user, [{"type": "tool_call", "name": t, "arguments": a} for t, a in run])
            for t, a in run:
                with tracer.start_as_current_span(f"execute_tool {t}", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": t,
                        "gen_ai.tool.call.arguments": json.dumps(a)}):
                    pass
            chat(tracer, user, [{"type": "text", "content": "done"}])  # the final answer
    traces = work / "runs.jsonl"
    spans = list(exporter.get_finished_spans())
    with open(traces, "w", encoding="utf-8") as f:
        for i in range(0, len(spans), 64):  # one OTLP/JSON request per line, as the Collector's file exporter
            f.write(otlp_json_line(spans[i:i + 64]) + "\n")
    return traces, evalset


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agentevals", required=True, help="the agentevals executable (agentevals-cli)")
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--seed", type=int, default=14)
    a = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="agentevals-parity-"))
    traces, evalset = write(work, a.runs, a.seed)
    differ = 0
    for m in ("exact", "in_order", "any_order"):
        got = subprocess.run([a.agentevals, "run", str(traces), "-e", str(evalset), "--trajectory-match-type", m,
                              "-o", "json"], capture_output=True, text=True)
        theirs = {t["trace_id"]: t["metrics"][0]["eval_status"] == "PASSED" for t in json.loads(got.stdout)["traces"]}
        got = subprocess.run([sys.executable, "-m", "otel_agenteval", "score", str(traces), "--cases", str(evalset),
                              "--match", m, "--max-steps-factor", "0", "--format", "json", "-q"],
                             capture_output=True, text=True)
        ours = {r["trace_id"]: r["verdict"] != "fail" for c in json.loads(got.stdout)["cases"] for r in c["runs"]}
        n = sum(theirs.get(t) != ours.get(t) for t in set(theirs) | set(ours))
        differ += n
        print(f"{m:>9}: {len(ours)} runs; agentevals-cli passes {sum(theirs.values())}, score passes "
              f"{sum(ours.values())}; verdicts that differ: {n}")
    shutil.rmtree(work)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
