"""``span.end()`` under contention: the SDK with a BatchSpanProcessor alone, and with this processor.

Each arm is a fresh ``TracerProvider`` + ``BatchSpanProcessor`` (no-op exporter); the ``agenteval``
arm adds a ``TrajectoryProcessor`` (checks in the thread that ends the span), the ``background``
arm one with ``background=True`` (span ends handed to its consumer thread). N threads (1, 4, 32 by default) each make agent runs as
fast as they can for ``--seconds``: an ``invoke_agent`` root, four ``execute_tool`` spans, one
``chat`` span, the root ended (no rule fires: arguments carry the thread and run number).
Every ``span.end()`` is timed with ``perf_counter_ns``.

Per arm and thread count: throughput (spans/s), p50 / p99 / max of ``span.end()``, calls over
100 ms, fairness (fewest / most spans of any thread), the share of spans the BatchSpanProcessor
exported (it drops what finds its queue full) and, for ``background``, the share the processor
checked (not dropped at a full queue, nor left unchecked when shutdown's few seconds ran out). Arms alternate (order reversed every
round) for ``--rounds`` rounds; every figure is also given as a ratio to the baseline of the same
round: the median of the per-round ratios and their range.

Optional modes (``--mode``):
- ``sleep``: a custom rule that sleeps ``--sleep-ms`` (default 50) on every tool step, as a
  rule calling a slow service would;
- ``reentrant``: a custom rule that makes a span of its own on every tool step (an instrumented
  HTTP client, an LLM judge). A round that does not finish within ``--seconds`` + 20 s is
  reported as HUNG with every thread's stack, and the script exits 2.

    python benchmarks/contention.py [--threads 1,4,32] [--seconds 2] [--rounds 3] [--mode plain|sleep|reentrant] [--json]
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import statistics
import sys
import threading
import time
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _harness import make_app, quiet  # noqa: E402

from otel_agenteval import Policy  # noqa: E402
from otel_agenteval.cli.build import build_name  # noqa: E402
from otel_agenteval.model.trajectory import ToolStep  # noqa: E402
from otel_agenteval.rules import builtin_rules  # noqa: E402

POLICY = Policy.from_dict({
    "tools": {"create_claim": {"write": True}},
    "agents": {"*": {"budget": {"max_steps": 40, "max_tokens": 200_000, "max_duration_s": 600}}},
    "outcome": {"success_when": ["create_claim"]},
})
TOOLS = ("lookup_order", "get_policy", "create_claim", "send_email")
SLOW_MS = 100
_tracer: list[trace.Tracer] = []  # the running arm's tracer, for the re-entrant rule
_sleep_s = [0.05]


def sleepy_rule(event: Any, check: Any) -> None:
    if isinstance(event, ToolStep):
        time.sleep(_sleep_s[0])


def reentrant_rule(event: Any, check: Any) -> None:
    if isinstance(event, ToolStep) and _tracer:
        _tracer[0].start_span("judge", context=Context()).end()  # a span made while the rule runs


def one_run(tracer: trace.Tracer, call_id: str, root_ends: list[int], other_ends: list[int]) -> None:
    """One agent run (a root, four tool spans, a ``chat`` span), each ``span.end()`` timed in ns."""
    clock = time.perf_counter_ns
    root = tracer.start_span("invoke_agent support", context=Context(), attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"})
    ctx = trace.set_span_in_context(root)
    for tool in TOOLS:
        s = tracer.start_span(f"execute_tool {tool}", context=ctx, attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
            "gen_ai.tool.call.arguments": f'{{"order_id": "{call_id}"}}'})
        t0 = clock()
        s.end()
        other_ends.append(clock() - t0)
    s = tracer.start_span("chat gpt-4o", context=ctx, attributes={
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
        "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 20})
    t0 = clock()
    s.end()
    other_ends.append(clock() - t0)
    t0 = clock()
    root.end()
    root_ends.append(clock() - t0)


def _worker(tracer: trace.Tracer, n: int, stop: threading.Event, lat: list[int], counts: list[int]) -> None:
    run = 0
    while not stop.is_set():
        run += 1
        one_run(tracer, f"{n}-{run}", lat, lat)
        counts[n] = run * 6


def _pct(sorted_ns: list[int], q: float) -> float:
    return sorted_ns[min(len(sorted_ns) - 1, int(q * len(sorted_ns)))] / 1e6


def one_round(arm: str, threads: int, seconds: float, mode: str) -> dict[str, Any]:
    rules = None
    if arm != "baseline" and mode != "plain":
        extra = sleepy_rule if mode == "sleep" else reentrant_rule
        rules = [*(r for name, r in builtin_rules().items() if POLICY.rule_enabled(name)), extra]
    kwargs: dict[str, Any] = {"background": True} if arm == "background" else {}
    app = make_app(POLICY, agenteval=arm != "baseline", rules=rules, **kwargs)
    tracer = app.provider.get_tracer("contention")
    _tracer[:] = [tracer]
    stop = threading.Event()
    lats: list[list[int]] = [[] for _ in range(threads)]
    counts = [0] * threads
    workers = [threading.Thread(target=_worker, args=(tracer, i, stop, lats[i], counts), daemon=True)
               for i in range(threads)]
    t0 = time.perf_counter()
    for w in workers:
        w.start()
    time.sleep(seconds)
    stop.set()
    deadline = time.monotonic() + 20
    for w in workers:
        w.join(timeout=max(deadline - time.monotonic(), 0.01))
    elapsed = time.perf_counter() - t0
    if any(w.is_alive() for w in workers):
        print(f"HUNG: arm={arm} threads={threads} mode={mode}: {sum(w.is_alive() for w in workers)} of {threads} "
              f"threads still inside the span API 20 s after the stop; stacks:", flush=True)
        faulthandler.dump_traceback(all_threads=True)
        os._exit(2)
    shut = threading.Thread(target=app.provider.shutdown, daemon=True)
    shut.start()
    shut.join(timeout=20)
    if shut.is_alive():
        print(f"HUNG: TracerProvider.shutdown() arm={arm} threads={threads}", flush=True)
        faulthandler.dump_traceback(all_threads=True)
        os._exit(2)
    all_ns = sorted(x for lat in lats for x in lat)
    errors = sum(app.processor.stats()["errors"].values()) if app.processor is not None else 0
    made = max(sum(counts), 1)
    lost = app.processor.stats()["dropped"] if app.processor is not None else {}
    dropped = lost.get("queue_full", 0) + lost.get("shutdown_timeout", 0)  # not checked: no room, or no time left
    return {"exported": app.exporter.exported / made, "checked": 1 - dropped / made if app.processor else 0.0,
            "spans_per_s": sum(counts) / elapsed, "p50_ms": _pct(all_ns, 0.50), "p99_ms": _pct(all_ns, 0.99),
            "max_ms": all_ns[-1] / 1e6, "over_100ms": sum(1 for x in all_ns if x > SLOW_MS * 1e6),
            "fairness": min(counts) / max(max(counts), 1), "min_spans": min(counts), "max_spans": max(counts),
            "errors": errors}


FIGURES = ("spans_per_s", "p50_ms", "p99_ms", "max_ms", "over_100ms", "fairness")


ARMS = ("baseline", "agenteval", "background")


def bench(threads: int, seconds: float, rounds: int, mode: str) -> dict[str, Any]:
    per: dict[str, list[dict[str, Any]]] = {arm: [] for arm in ARMS}
    for r in range(rounds):
        order = ARMS if r % 2 == 0 else ARMS[::-1]
        for arm in order:
            per[arm].append(one_round(arm, threads, seconds, mode))
    out: dict[str, Any] = {"threads": threads, "mode": mode, "rounds": rounds}
    for arm, rs in per.items():
        out[arm] = {f: statistics.median(x[f] for x in rs)
                    for f in (*FIGURES, "min_spans", "max_spans", "exported", "checked")}
        out[arm]["errors"] = sum(x["errors"] for x in rs)
    for arm in ARMS[1:]:
        ratios: dict[str, Any] = {}
        for f in FIGURES:
            paired = [a[f] / b[f] for a, b in zip(per[arm], per["baseline"]) if b[f]]
            ratios[f] = (statistics.median(paired), min(paired), max(paired)) if paired else None
        out["ratio" if arm == "agenteval" else f"ratio_{arm}"] = ratios
    return out


def _show(res: dict[str, Any]) -> None:
    print(f"\n== {res['threads']} thread(s), mode {res['mode']}, {res['rounds']} rounds (medians) ==")
    print(f"{'':>12} {'spans/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'>100ms':>7} {'fair':>6} "
          f"{'min..max spans/thread':>22} {'exported':>9} {'checked':>8}")
    for arm in ARMS:
        a = res[arm]
        checked = f"{a['checked']:8.2f}" if arm != "baseline" else f"{'':>8}"
        print(f"{arm:>12} {a['spans_per_s']:9.0f} {a['p50_ms']:8.3f} {a['p99_ms']:8.2f} {a['max_ms']:8.1f} "
              f"{a['over_100ms']:7.0f} {a['fairness']:6.2f} {a['min_spans']:>10.0f}..{a['max_spans']:<10.0f} "
              f"{a['exported']:9.2f} {checked}")
    for arm in ARMS[1:]:
        cells = []
        for f in FIGURES:
            r = res["ratio" if arm == "agenteval" else f"ratio_{arm}"][f]
            cells.append(f"{f} {r[0]:.2f}x ({r[1]:.2f}-{r[2]:.2f})" if r else f"{f} n/a")
        print(f"  ratio {arm}/baseline (median, range of paired rounds): " + "; ".join(cells))
        if res[arm]["errors"]:
            print(f"  processor errors counted ({arm}): {res[arm]['errors']}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default="1,4,32")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--mode", choices=("plain", "sleep", "reentrant"), default="plain")
    ap.add_argument("--sleep-ms", type=float, default=50.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    _sleep_s[0] = args.sleep_ms / 1000
    print(f"build: {build_name()}; python {sys.version.split()[0]}; {os.cpu_count()} cpus; "
          f"switch interval {sys.getswitchinterval() * 1000:.0f} ms", flush=True)
    results = []
    with quiet():
        for n in (int(x) for x in args.threads.split(",")):
            res = bench(n, args.seconds, args.rounds, args.mode)
            results.append(res)
            if not args.json:
                _show(res)
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
