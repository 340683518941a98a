"""What the processor adds to every span, measured run by run: the arms take turns on every agent run.

``processor_overhead.py`` times whole rounds of 200 runs per arm. On a shared VM one round can
catch a full garbage collection, the BatchSpanProcessor's export or another tenant's burst that
the next arm's round does not, so its per-round ratios spread wide (an empty second processor
measures 0.77-1.57x). Here the arms alternate run by run (baseline, empty, processor, in an order
that rotates each run), every run is timed on its own, and each round compares the arms' median
run: a pause lands on one run of one arm and moves no median. What a pause costs on average is
still reported (the ratio of the arms' total times), next to the medians.

    .venv/bin/python benchmarks/overhead_by_run.py --workload tool-heavy            # 10 rounds x 200 runs
    .venv/bin/python benchmarks/overhead_by_run.py --workload pydantic-ai --in-calls --json

``--in-calls`` also times the processor's own ``on_start``/``on_end`` calls in place (by span
kind): what they take next to what the arm adds says how much of the processor's cost lands
outside its calls (the SDK's own work slowed by the processor's garbage and cache footprint).

``--background`` adds a fourth arm, ``TrajectoryProcessor(background=True)``: its median run is
what the app's thread pays (the checks run on the processor's own thread); after each round its
queue is drained, untimed, and how long that took is reported (near zero: the checks kept up).
A median run says nothing of CPU spent on another thread, so ``--cpu N`` also runs each arm alone
in a child process of its own, N runs after 200 warm-up runs, and compares the processes' CPU
time (all threads, the background arm's drain included), five alternating children per arm.

``--floor`` adds an arm with :class:`Floor`, the least any design must do for this mix in plain
Python: a floor to read the processor's figure against, not a processor. With ``--in-calls`` too,
the floor's calls are timed the same way, so the two compare call by call. A second floor arm,
:class:`DeferredFloor`, does the same work once at the run's end (each span only kept as it ends):
the floor under a design that gives up detecting as a span ends.
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import statistics
import subprocess
import sys
import time
from bisect import bisect_left
from typing import Any

import orjson
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import StatusCode

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import processor_overhead as po  # noqa: E402

from otel_agenteval import TrajectoryProcessor  # noqa: E402

CPU_REPEATS = 5  # --cpu: children per arm, alternating


class TimedCalls(SpanProcessor):
    """The processor's calls, each timed where the SDK makes it, by call and span kind. The timing
    itself adds to the arm's time: with ``--in-calls`` the arm's ratio is not the headline."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.ns: dict[str, list[int]] = collections.defaultdict(list)

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        t0 = time.perf_counter_ns()
        self.inner.on_start(span, parent_context)
        self.ns["start:" + str(span._attributes.get("gen_ai.operation.name"))].append(time.perf_counter_ns() - t0)

    def on_end(self, span: ReadableSpan) -> None:
        t0 = time.perf_counter_ns()
        self.inner.on_end(span)
        self.ns["end:" + str(span._attributes.get("gen_ai.operation.name"))].append(time.perf_counter_ns() - t0)

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self.inner.force_flush(timeout_millis))


BOUNDS = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)  # the floor's histogram buckets (+Inf past them)


class Floor(SpanProcessor):
    """The least any design must do for the tool-heavy mix, written plainly: each span routed to its
    run at its start; at its end the run found, the span's kind read, a tool step kept (name,
    status, end), the write tool's arguments parsed and keyed against the run's writes, the step
    budget checked, tool calls counted in plain cells read at scrape (as the processor does); at
    the run's end four histogram observations (a bucket found by bisect, a count and a sum). No
    rules, no conversations, no bounds, no exposition, no thread safety beyond the GIL's: it is not
    a processor, only a floor under what one costs."""

    def __init__(self) -> None:
        self.calls: dict[str, list[int]] = {}  # tool -> [ok, error]
        self.histograms = [[0] * (len(BOUNDS) + 1) for _ in range(4)]  # steps, model calls, seconds, USD
        self.sums = [0.0] * 4
        self.routes: dict[int, dict[str, Any]] = {}

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        parent = span._parent
        run = self.routes.get(parent.span_id) if parent is not None else None
        if run is None:
            run = {"steps": [], "writes": set(), "llm_calls": 0, "tokens": 0, "start": span._start_time}
        self.routes[span._context.span_id] = run

    def on_end(self, span: ReadableSpan) -> None:
        run = self.routes.pop(span._context.span_id, None)
        if run is not None:
            self.take(run, span)

    def take(self, run: dict[str, Any], span: ReadableSpan) -> None:
        """One span's end into its run: a tool step kept and its write keyed, a model call added up,
        or, for the agent span, the run's four observations."""
        attrs = span._attributes._dict
        op = attrs.get("gen_ai.operation.name")
        if op == "execute_tool":
            tool = attrs.get("gen_ai.tool.name")
            ok = span._status._status_code is not StatusCode.ERROR
            run["steps"].append((tool, ok, span._end_time))
            if tool == "create_claim":
                key = orjson.dumps(orjson.loads(attrs["gen_ai.tool.call.arguments"]), option=orjson.OPT_SORT_KEYS)
                if key in run["writes"]:
                    raise AssertionError("the floor's mix repeats no write")
                run["writes"].add(key)
            if len(run["steps"]) > 40:
                raise AssertionError("the floor's mix stays in its step budget")
            cell = self.calls.get(tool)
            if cell is None:
                cell = self.calls[tool] = [0, 0]
            cell[0 if ok else 1] += 1
        elif op == "chat":
            run["llm_calls"] += 1
            run["tokens"] += attrs["gen_ai.usage.input_tokens"] + attrs["gen_ai.usage.output_tokens"]
        elif op == "invoke_agent":
            values = (len(run["steps"]), run["llm_calls"], (span._end_time - run["start"]) / 1e9,
                      run["tokens"] * 2.5e-6)
            for i, value in enumerate(values):
                self.histograms[i][bisect_left(BOUNDS, value)] += 1
                self.sums[i] += value


class DeferredFloor(Floor):
    """The floor's work done once, at the run's end: every other span only kept on its trace as it
    ends (nothing at its start), then at the agent span's end each routed to the run through its
    parents and taken in order. Detection moves to the run's end (a processor could not do this
    and still count a violation as its span ends); the floor under even that design."""

    def __init__(self) -> None:
        super().__init__()
        self.pending: dict[int, list[ReadableSpan]] = {}  # trace id -> its ended spans

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        if span._attributes._dict.get("gen_ai.operation.name") != "invoke_agent":
            self.pending.setdefault(span._context.trace_id, []).append(span)
            return
        spans = self.pending.pop(span._context.trace_id, [])
        agent_id = span._context.span_id
        parents = {s._context.span_id: s._parent.span_id for s in spans}
        run = {"steps": [], "writes": set(), "llm_calls": 0, "tokens": 0, "start": span._start_time}
        for s in spans:
            up = s._parent.span_id
            while up != agent_id:  # routed through its parents
                up = parents[up]
            self.take(run, s)
        self.take(run, span)


def check_saw_all(proc: TrajectoryProcessor, runs: int) -> None:
    stats = proc.stats()
    if stats["spans"]["agent"] != runs or sum(stats["errors"].values()) or po.VIOLATIONS:
        raise SystemExit(f"processor did not see the mix as expected: {stats}, {len(po.VIOLATIONS)} violations")


def measure(workload_name: str, rounds: int, runs: int, warmup: int, in_calls: bool,
            background: bool, floor: bool) -> dict[str, Any]:
    workload = po.make_workload(workload_name)
    proc = po.make_processor()
    timed = TimedCalls(proc) if in_calls else None
    arms = [po.Arm("baseline", None, workload), po.Arm("empty", po.EmptyProcessor(), workload),
            po.Arm("agenteval", timed if timed is not None else proc, workload)]
    bg = po.make_processor(background=True) if background else None
    if bg is not None:
        arms.append(po.Arm("background", bg, workload))
    timed_floor = TimedCalls(Floor()) if floor and in_calls else None
    if floor:
        arms.append(po.Arm("floor", timed_floor if timed_floor is not None else Floor(), workload))
        deferred = DeferredFloor()
        arms.append(po.Arm("deferred_floor", deferred, workload))
    names = [arm.name for arm in arms]
    drains: list[float] = []  # ms to check what the background arm's round left queued
    orders = [arms[i:] + arms[:i] for i in range(len(arms))]
    orders += [o[::-1] for o in orders]  # every arm first, middle and last, both ways round
    clock, emit = time.perf_counter_ns, workload.emit
    per_round: dict[str, list[float]] = {name: [] for name in names}  # median run, ns
    totals: dict[str, int] = dict.fromkeys(names, 0)
    for r in range(warmup + rounds):
        inputs = {}
        for arm in arms:
            inputs[arm.name] = workload.prepare(range(arm.next_run, arm.next_run + runs))
            arm.next_run += runs
            arm.bsp.force_flush()
        gc.collect()
        if r == warmup:
            for t in (timed, timed_floor):
                if t is not None:
                    t.ns.clear()
        times: dict[str, list[int]] = {name: [] for name in names}
        for i in range(runs):
            for arm in orders[i % len(orders)]:
                t0 = clock()
                emit(arm.tracer, inputs[arm.name][i])
                times[arm.name].append(clock() - t0)
        if bg is not None:
            t0 = clock()
            bg.force_flush()
            if r >= warmup:
                drains.append((clock() - t0) / 1e6)
        if r < warmup:
            continue
        for name in names:
            per_round[name].append(statistics.median(times[name]))
            totals[name] += sum(times[name])
    for arm in arms:
        arm.shutdown()
    for checked in (proc, bg):
        if checked is not None:
            check_saw_all(checked, (warmup + rounds) * runs)
    if floor and (deferred.pending or sum(deferred.histograms[0]) != (warmup + rounds) * runs):
        raise SystemExit("the deferred floor did not take every run")
    spans = runs * po.SPANS_PER_RUN

    def spread(name: str) -> dict[str, Any]:
        ratios = [x / b for x, b in zip(per_round[name], per_round["baseline"])]
        q = statistics.quantiles(ratios, n=4)
        return {"median": statistics.median(ratios), "iqr": [q[0], q[2]], "range": [min(ratios), max(ratios)],
                "rounds": ratios, "rounds_over_target": sum(x > po.TARGET for x in ratios)}

    base_us = statistics.median(per_round["baseline"]) / po.SPANS_PER_RUN / 1e3
    out: dict[str, Any] = {
        "workload": workload_name, "workload_description": workload.description, "build": po.build_name(),
        "rounds": rounds, "runs_per_round": runs, "warmup_rounds": warmup, "spans_per_run": po.SPANS_PER_RUN,
        "baseline_us_per_span": base_us,
        "processor": spread("agenteval"), "empty": spread("empty"),
        "ratio_of_totals": {name: totals[name] / totals["baseline"] for name in names[1:]},
        "added_us_per_span": (statistics.median(per_round["agenteval"]) - statistics.median(per_round["baseline"]))
        / po.SPANS_PER_RUN / 1e3,
    }
    if floor:
        out["floor"] = spread("floor")
        out["deferred_floor"] = spread("deferred_floor")
    if bg is not None:
        out["background"] = spread("background")
        out["background_drain_ms"] = {"median": statistics.median(drains), "max": max(drains)}
    if timed is not None:  # median calls, as the runs above
        by_kind = {k: statistics.median(v) / 1e3 for k, v in sorted(timed.ns.items())}
        out["in_calls_us_by_kind"] = by_kind
        out["in_calls_us_per_span"] = sum(by_kind[k] * len(v) for k, v in timed.ns.items()) / (rounds * spans)
    if timed_floor is not None:  # the floor's calls timed the same way: where the processor's excess lies
        by_kind = {k: statistics.median(v) / 1e3 for k, v in sorted(timed_floor.ns.items())}
        out["floor_in_calls_us_by_kind"] = by_kind
        out["floor_in_calls_us_per_span"] = sum(by_kind[k] * len(v) for k, v in timed_floor.ns.items()) / (
            rounds * spans)
    return out


# --- --cpu: each arm alone in a process of its own, its CPU time (all threads) -------------------------
def cpu_child(arm_name: str, workload_name: str, runs: int) -> int:
    """CPU ns of ``runs`` runs (after 200 warm-up runs) with this arm alone, the queues drained."""
    workload = po.make_workload(workload_name)
    extra = None if arm_name == "baseline" else po.make_processor(background=arm_name == "background")
    arm = po.Arm(arm_name, extra, workload)
    for run in workload.prepare(range(200)):
        workload.emit(arm.tracer, run)
    inputs = workload.prepare(range(200, 200 + runs))
    arm.bsp.force_flush()
    if extra is not None:
        extra.force_flush()
    gc.collect()
    c0 = time.process_time_ns()
    for run in inputs:
        workload.emit(arm.tracer, run)
    if extra is not None:
        extra.force_flush()  # the background arm's backlog: its CPU counts
    arm.bsp.force_flush()
    cpu = time.process_time_ns() - c0
    if extra is not None:
        check_saw_all(extra, 200 + runs)
    arm.shutdown()
    return cpu


def measure_cpu(workload_name: str, runs: int, arm_names: list[str]) -> dict[str, Any]:
    cpu: dict[str, list[int]] = {name: [] for name in arm_names}
    for _ in range(CPU_REPEATS):
        for name in arm_names:
            done = subprocess.run([sys.executable, __file__, "--workload", workload_name, "--cpu-child", name,
                                   "--cpu", str(runs)], capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise SystemExit(f"--cpu: the {name} child failed: {done.stderr[-800:]}")
            cpu[name].append(int(done.stdout.split()[-1]))
    base = statistics.median(cpu["baseline"])
    return {"runs": runs, "repeats": CPU_REPEATS,
            "us_per_span": {k: statistics.median(v) / (runs * po.SPANS_PER_RUN) / 1e3 for k, v in cpu.items()},
            "ratio": {k: statistics.median(v) / base for k, v in cpu.items() if k != "baseline"},
            "ratio_range": {k: [min(v) / max(cpu["baseline"]), max(v) / min(cpu["baseline"])]
                            for k, v in cpu.items() if k != "baseline"}}


def print_report(s: dict[str, Any]) -> None:
    print(f"workload {s['workload']}: {s['workload_description']}")
    print(f"otel-agenteval {s['build']}; {s['rounds']} rounds x {s['runs_per_round']} runs x {s['spans_per_run']} spans "
          f"(+{s['warmup_rounds']} warm-up), the arms taking turns run by run; SDK + BSP: {s['baseline_us_per_span']:.1f} "
          "us a span (median run)")
    rows = [("empty", "empty 2nd processor"), ("processor", "TrajectoryProcessor")]
    if "background" in s:
        rows.append(("background", "  background=True"))
    if "floor" in s:
        rows.append(("floor", "floor (not a processor)"))
        rows.append(("deferred_floor", "  all at the run's end"))
    for name, label in rows:
        x = s[name]
        print(f"{label:<22} median-run ratio by round: median {x['median']:.3f}x, IQR {x['iqr'][0]:.3f}-{x['iqr'][1]:.3f}x, "
              f"range {x['range'][0]:.3f}-{x['range'][1]:.3f}x, {x['rounds_over_target']} of {len(x['rounds'])} rounds "
              f"over {po.TARGET:.2f}x")
    t = s["ratio_of_totals"]
    print(f"ratio of total times (pauses included): empty {t['empty']:.3f}x, processor {t['agenteval']:.3f}x")
    print(f"added: {s['added_us_per_span']:.2f} us a span (median runs)")
    if "background_drain_ms" in s:
        d = s["background_drain_ms"]
        print(f"background=True: what a round left queued was checked in {d['median']:.1f} ms (median; max "
              f"{d['max']:.1f}) after it")
    if "in_calls_us_per_span" in s:
        print(f"  in the processor's own calls (median call): {s['in_calls_us_per_span']:.2f} us a span; by call, us: " +
              ", ".join(f"{k} {v:.2f}" for k, v in s["in_calls_us_by_kind"].items()))
    if "floor_in_calls_us_per_span" in s:
        print(f"  in the floor's own calls, timed the same way: {s['floor_in_calls_us_per_span']:.2f} us a span; by "
              "call, us: " + ", ".join(f"{k} {v:.2f}" for k, v in s["floor_in_calls_us_by_kind"].items()))
    if "cpu" in s:
        c = s["cpu"]
        print(f"CPU time, each arm alone in its own process ({c['repeats']} each, {c['runs']} runs): SDK + BSP "
              f"{c['us_per_span']['baseline']:.1f} us a span; " + ", ".join(
                  f"{k} {v:.3f}x ({c['ratio_range'][k][0]:.3f}-{c['ratio_range'][k][1]:.3f}x)"
                  for k, v in c["ratio"].items()))
    print(f"overhead ratio (median run): {s['processor']['median']:.2f}x (target <= {po.TARGET:.2f}x every round, "
          f"goal {po.GOAL:.2f}x)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workload", choices=("pydantic-ai", "lean", "tool-heavy"), default="tool-heavy")
    p.add_argument("--rounds", type=int, default=10, help="measured rounds (default 10)")
    p.add_argument("--runs-per-round", type=int, default=200, help="agent runs per arm and round (default 200)")
    p.add_argument("--warmup", type=int, default=1, help="rounds run first and discarded (default 1)")
    p.add_argument("--in-calls", action="store_true", help="also time the processor's own calls in place")
    p.add_argument("--background", action="store_true", help="also the processor with background=True")
    p.add_argument("--floor", action="store_true",
                   help="also the floor, the least any design does, span by span and all at the run's end (tool-heavy only)")
    p.add_argument("--cpu", type=int, metavar="N", default=0,
                   help="also each arm's CPU time alone in a process of its own, N runs (e.g. 2000)")
    p.add_argument("--cpu-child", choices=("baseline", "agenteval", "background"), help=argparse.SUPPRESS)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the report")
    args = p.parse_args(argv)
    if args.cpu_child:
        print(cpu_child(args.cpu_child, args.workload, args.cpu))
        return 0
    if args.rounds < 2 or args.runs_per_round < 3 or args.warmup < 0 or args.cpu < 0:
        p.error("--rounds must be >= 2, --runs-per-round >= 3, --warmup >= 0, --cpu >= 0")
    if args.floor and args.workload != "tool-heavy":
        p.error("--floor is written for the tool-heavy mix")
    s = measure(args.workload, args.rounds, args.runs_per_round, args.warmup, args.in_calls, args.background,
                args.floor)
    if args.cpu:
        s["cpu"] = measure_cpu(args.workload, args.cpu,
                               ["baseline", "agenteval", *(["background"] if args.background else [])])
    if args.json:
        json.dump(s, sys.stdout, indent=2)
        print()
    else:
        print_report(s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
