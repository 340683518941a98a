"""A storm of what a busy or broken app sends, through the public API: is every bound held?

One TracerProvider + BatchSpanProcessor (no-op exporter) + TrajectoryProcessor with the default
limits, then, one after the other:

1. ``roots``: ``--roots`` (default 1,000,000) agent runs whose root never ends, each with one
   tool call that does (a run opened and abandoned: a crashed worker, a lost root span);
2. ``long_run``: one run with ``--calls`` (default 100,000) tool calls, distinct arguments, then
   its root ends;
3. ``names``: ``--names`` (default 10,000) runs, each with its own agent name and tool name;
4. ``long_keys``: 2,000 runs whose tool name and conversation id are 100,000 characters each.

After each phase: peak RSS, RSS now, open trajectories, evictions by reason, open spans and
steps dropped. At the end (after ``gc.collect()``): RSS after, ``/metrics`` over HTTP in both
formats (size, time, label values), and a clean run checked right (its duplicate write found,
counted under its own agent name). Each bound is printed with the limit it must respect; exit 1
if one is broken.

    python benchmarks/storm.py [--roots 1000000] [--calls 100000] [--names 10000] [--json]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _harness import by_label, make_app, peak_rss_mb, quiet, rss_mb, scrape  # noqa: E402

from otel_agenteval import Policy  # noqa: E402
from otel_agenteval.cli.build import build_name  # noqa: E402

POLICY = Policy.from_dict({"tools": {"create_claim": {"write": True}},
                           "agents": {"*": {"budget": {"max_steps": 50, "max_repeats": 5}}}})


def _tool(tracer: trace.Tracer, ctx: Context, name: str, args: str, conv: str | None = None) -> None:
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.call.arguments": args}
    if conv is not None:
        attrs["gen_ai.conversation.id"] = conv
    tracer.start_span(f"execute_tool {name[:40]}", context=ctx, attributes=attrs).end()


def _root(tracer: trace.Tracer, agent: str) -> Any:
    return tracer.start_span(f"invoke_agent {agent[:40]}", context=Context(), attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent})


def phase_roots(tracer: trace.Tracer, n: int) -> None:
    for i in range(n):
        root = _root(tracer, "abandoned")
        _tool(tracer, trace.set_span_in_context(root), "lookup_order", f'{{"order_id": "{i}"}}')
        # the root is dropped without end(): the SDK forgets it, the processor must too


def phase_long_run(tracer: trace.Tracer, calls: int) -> None:
    root = _root(tracer, "looping")
    ctx = trace.set_span_in_context(root)
    for i in range(calls):
        _tool(tracer, ctx, ("lookup_order", "create_claim")[i % 2], f'{{"order_id": "{i}"}}')
    root.end()


def phase_names(tracer: trace.Tracer, n: int) -> None:
    for i in range(n):
        root = _root(tracer, f"agent-{i}")
        _tool(tracer, trace.set_span_in_context(root), f"tool-{i}", "{}")
        root.end()


def phase_long_keys(tracer: trace.Tracer, n: int = 2_000) -> None:
    for i in range(n):
        root = _root(tracer, "support")
        _tool(tracer, trace.set_span_in_context(root), f"{i}-" + "t" * 100_000, "{}", conv=f"{i}-" + "c" * 100_000)
        root.end()


def _violations_by_agent(registry: Any, rule: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for m in registry.collect():
        if m.name == "agenteval_violations":
            for smp in m.samples:
                if smp.name.endswith("_total") and smp.labels.get("rule") == rule:
                    out[smp.labels["agent_name"]] = out.get(smp.labels["agent_name"], 0.0) + smp.value
    return out


def _state(app: Any, phase: str, seconds: float) -> dict[str, Any]:
    s = app.processor.stats()
    return {"phase": phase, "seconds": round(seconds, 1), "peak_rss_mb": round(peak_rss_mb()),
            "rss_mb": round(rss_mb()), "open_trajectories": app.processor.engine.open_trajectories,
            "evicted": s["evicted"], "conversations_evicted": s["conversations_evicted"],
            "open_spans_dropped": s["routes_dropped"], "steps_dropped": s["steps_dropped"],
            "late": s["late"], "errors": sum(s["errors"].values())}


def storm(roots: int, calls: int, names: int) -> dict[str, Any]:
    watch: set[str] = set()
    found: list[Any] = []
    app = make_app(POLICY, finalise_on_flush=False,
                   on_violation=[lambda v: found.append(v) if v.trace_id in watch else None])
    tracer = app.provider.get_tracer("storm")
    lim = POLICY.limits
    phases = []
    start_rss = rss_mb()
    for name, fn in (("roots", lambda: phase_roots(tracer, roots)), ("long_run", lambda: phase_long_run(tracer, calls)),
                     ("names", lambda: phase_names(tracer, names)), ("long_keys", lambda: phase_long_keys(tracer))):
        t0 = time.perf_counter()
        fn()
        app.provider.force_flush()  # the BSP queue emptied; open runs stay open (finalise_on_flush=False)
        phases.append(_state(app, name, time.perf_counter() - t0))
        print(json.dumps(phases[-1]), file=sys.stderr, flush=True)
    gc.collect()
    after = {"rss_after_mb": round(rss_mb()), "rss_at_start_mb": round(start_rss)}
    scraped = scrape(app.registry)
    agents = by_label(app.registry, "agenteval_trajectories", "agent_name")
    tools = by_label(app.registry, "agenteval_tool_calls", "tool")
    # a clean run afterwards: its duplicate write found, under its own name
    def duplicates() -> dict[str, float]:
        return {k: v for k, v in _violations_by_agent(app.registry, "duplicate_write").items() if v}

    before = duplicates()
    root = _root(tracer, "support")
    trace_hex = format(root.get_span_context().trace_id, "032x")
    watch.add(trace_hex)
    ctx = trace.set_span_in_context(root)
    for _ in range(2):
        _tool(tracer, ctx, "create_claim", '{"order_id": "clean-1"}')
    root.end()
    clean = sorted(v.rule for v in found if v.trace_id == trace_hex)
    after_dup = duplicates()
    clean_counted = {k: v - before.get(k, 0.0) for k, v in after_dup.items() if v != before.get(k, 0.0)}
    bounds = {
        "open_trajectories <= limits.max_open_trajectories":
            (max(p["open_trajectories"] for p in phases), lim.max_open_trajectories),
        "agent_name values <= limits.max_agent_labels + 1 (other)": (len(agents), 64 + 1),
        "tool values <= limits.max_tool_labels + policy tools + 1": (len(tools), lim.max_tool_labels + 1 + 1),
        "scrape bytes (text) <= 2 MB": (scraped.text_bytes, 2_000_000),
        "rss after - rss at start <= 300 MB": (after["rss_after_mb"] - after["rss_at_start_mb"], 300),
    }
    broken = [k for k, (got, limit) in bounds.items() if got > limit]
    if clean != ["duplicate_write"] or sum(clean_counted.values()) != 1:
        broken.append(f"clean run checked wrong: {clean}, counted {clean_counted}")
    app.provider.shutdown()
    return {"build": build_name(), "roots": roots, "calls": calls, "names": names, "phases": phases, **after,
            "scrape": vars(scraped), "agent_name_values": len(agents), "tool_values": len(tools),
            "label_overflow": by_label(app.registry, "agenteval_label_overflow", "label"),
            "clean_run_rules": clean, "clean_run_counted_under": clean_counted, "bounds": {k: {"got": g, "limit": lim_} for k, (g, lim_) in bounds.items()},
            "broken": broken}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--roots", type=int, default=1_000_000)
    ap.add_argument("--calls", type=int, default=100_000)
    ap.add_argument("--names", type=int, default=10_000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with quiet():
        report = storm(args.roots, args.calls, args.names)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for p in report["phases"]:
            print(f"{p['phase']:>10}: {p['seconds']:6.1f}s peak RSS {p['peak_rss_mb']:5d} MB, RSS {p['rss_mb']:5d} MB, "
                  f"open {p['open_trajectories']}, evicted {p['evicted']}, conversations evicted "
                  f"{p['conversations_evicted']}, open spans dropped {p['open_spans_dropped']}, steps dropped "
                  f"{p['steps_dropped']}, errors {p['errors']}")
        print(f"RSS at start {report['rss_at_start_mb']} MB, after (gc) {report['rss_after_mb']} MB")
        s = report["scrape"]
        print(f"scrape: text {s['text_bytes']:,} B in {s['text_s']:.2f}s, OpenMetrics {s['openmetrics_bytes']:,} B in "
              f"{s['openmetrics_s']:.2f}s, {s['samples']:,} samples; agent_name values {report['agent_name_values']}, "
              f"tool values {report['tool_values']}, label overflow {report['label_overflow']}")
        print(f"clean run afterwards: {report['clean_run_rules']}, counted under agent_name "
              f"{report['clean_run_counted_under']}")
        for k, b in report["bounds"].items():
            print(f"  {'ok ' if b['got'] <= b['limit'] else 'BROKEN'} {k}: {b['got']:,} (limit {b['limit']:,})")
    for b in report["broken"]:
        print(f"BROKEN: {b}", file=sys.stderr)
    return 1 if report["broken"] else 0


if __name__ == "__main__":
    sys.exit(main())
