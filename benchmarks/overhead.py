"""What the processor adds to every span: against the SDK alone, and against the floor.

Every arm is a ``TracerProvider`` with a ``BatchSpanProcessor`` (no-op exporter) running the same
spans (``_workloads.py``: the captured pydantic-ai mix, tool-heavy, lean); only what is added differs:

- ``sdk``: nothing (the SDK's own cost);
- ``empty``: a second processor that does nothing (the noise of being a second processor);
- ``processor``: ``TrajectoryProcessor`` with the benchmark's policy (every rule at work);
- ``floor``: :class:`_floor.Floor`, the least any design must do for the mix; not a processor;
- ``background`` (``--background``): ``TrajectoryProcessor(background=True)``: its median run is what
  the app's thread pays; after each round its queue is drained, untimed, and how long that took is
  reported (near zero: the checks kept up);
- ``deferred_floor`` (``--deferred-floor``): the floor's work done once at the run's end;
- ``compiled_floor`` (``--compiled-floor``): the floor's source compiled with mypyc (built once,
  cached outside the clone: ``_compiled_floor.py``), read against the plain floor: whether the floor
  is cheap only because it is bytecode;
- ``rules_floor`` (``--rules-floor``): :class:`_rules_floor.RulesFloor`, the floor plus the least state
  the shipped rules keep on the mix (the conversation, the write's values tested, the tool results
  handed on): how much of the processor / floor ratio the job itself takes, and the processor over it;
- ``footprint_hot``, ``footprint_spread`` (``--footprint``): :class:`_footprint.FootprintFloor`, the floor
  plus the same native calls at each span's end, into one function or into 210 distinct ones a run
  (compiled once, cached outside the clone): what the code a run passes through costs by itself;
- ``no_taint``, ``bare`` (``--variants``): the processor with the tainted-flow rule off, and with
  nothing but the write named (no budget, price, success or tainted-flow rule): what the rules cost
  against what the engine itself costs, in the same rounds.

The arms take turns run by run (the order rotating every run, so each arm goes first, middle and
last, both ways round), every run is timed on its own, and each round compares the arms' median
run: a pause (a collection, the BatchSpanProcessor's export, another tenant's burst) lands on one
run of one arm and moves no median; its average cost is still reported (the ratio of total times).
Per arm: its median run over the SDK's, by round (median, IQR, range); for the processor arms also
over the floor's; and the us a span each adds.

    .venv/bin/python benchmarks/overhead.py --workload tool-heavy            # 10 rounds x 200 runs
    .venv/bin/python benchmarks/overhead.py --workload pydantic-ai --in-calls --json

``--in-calls`` times the processor's and the floor's own ``on_start``/``on_end`` calls in place, by
span kind and by place in the run (the write, the first model call), and where their means differ.
``--cpu N`` runs each arm alone in a child process, N runs after 200 warm-up runs, and
compares the processes' CPU time (all threads, the background arm's drain included). ``--alone``
replays recorded spans straight into the processor's and the floor's calls (no SDK), caches warm.
``--instructions`` counts each arm's instructions under valgrind's callgrind (deterministic: the
figure to A/B a change by on a busy machine) and the objects each arm makes a run (its calls into
CPython's allocators, ``_callgrind.py``); ``--cache-sim`` adds its simulated cache misses and
mispredicted branches (the processor's time is not its instructions: see benchmarks/README.md).
``--profile`` prints cProfile's view of the processor alone.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import gc
import io
import json
import os
import pstats
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import _workloads as wl  # noqa: E402
from _callgrind import objects_made  # noqa: E402
from _compiled_floor import compiled_floor as compiled_floor_module  # noqa: E402
from _floor import DeferredFloor, Floor  # noqa: E402
from _footprint import FUNCTIONS as FOOTPRINT_FUNCTIONS  # noqa: E402
from _footprint import FootprintFloor  # noqa: E402
from _footprint import functions as footprint_functions  # noqa: E402
from _in_calls import TimedCalls  # noqa: E402
from _rules_floor import RulesFloor  # noqa: E402

from otel_agenteval import TrajectoryProcessor  # noqa: E402
from otel_agenteval.cli.build import build_name  # noqa: E402

TARGET, GOAL = 1.05, 1.02  # processor / floor (issue 44)
CPU_REPEATS = 5  # --cpu: children per arm, alternating
LABELS = {"empty": "empty 2nd processor", "processor": "TrajectoryProcessor", "background": "  background=True",
          "floor": "floor (not a processor)", "deferred_floor": "  floor, all at the run's end",
          "compiled_floor": "  floor compiled (mypyc)", "rules_floor": "  floor with the rules' state",
          "no_taint": "  taint: {enabled: false}", "bare": "  the write named, taint off",
          "footprint_hot": "  floor + calls, one function",
          "footprint_spread": f"  floor + calls, {FOOTPRINT_FUNCTIONS} functions"}
VARIANTS = tuple(wl.VARIANTS)  # --variants: the processor on the policy with rules left out
OVER_FLOOR = ("processor", "background", "compiled_floor", "rules_floor", "footprint_hot", "footprint_spread",
              *VARIANTS)  # the arms also compared with the floor


def check_saw_all(proc: TrajectoryProcessor, runs: int) -> None:
    stats = proc.stats()
    if stats["spans"]["agent"] != runs or sum(stats["errors"].values()) or wl.VIOLATIONS:
        raise SystemExit(f"processor did not see the mix as expected: {stats}, {len(wl.VIOLATIONS)} violations")


def check_floor(floor: Any, runs: int) -> None:
    if floor.runs != runs or getattr(floor, "pending", None):
        raise SystemExit(f"the floor counted {floor.runs} runs of {runs}")


def spread(ratios: list[float]) -> dict[str, Any]:
    q = statistics.quantiles(ratios, n=4)
    return {"median": statistics.median(ratios), "iqr": [q[0], q[2]], "range": [min(ratios), max(ratios)],
            "rounds": ratios}


def measure(workload_name: str, rounds: int, runs: int, warmup: int, in_calls: bool, background: bool,
            deferred_floor: bool, gc_off: bool, variants: bool = False,
            compiled_floor: bool = False, with_rules_floor: bool = False, footprint: bool = False) -> dict[str, Any]:
    workload = wl.make_workload(workload_name)
    proc, floor = wl.make_processor(), Floor()
    timed = {"processor": TimedCalls(proc), "floor": TimedCalls(floor)} if in_calls else {}
    arms = [wl.Arm("sdk", None, workload), wl.Arm("empty", wl.EmptyProcessor(), workload),
            wl.Arm("processor", timed.get("processor", proc), workload),
            wl.Arm("floor", timed.get("floor", floor), workload)]
    bg = wl.make_processor(background=True) if background else None
    if bg is not None:
        arms.append(wl.Arm("background", bg, workload))
    deferred = DeferredFloor() if deferred_floor else None
    if deferred is not None:
        arms.append(wl.Arm("deferred_floor", deferred, workload))
    native_module = compiled_floor_module() if compiled_floor else None
    native = None
    if native_module is not None:
        native = native_module.Floor()
        arms.append(wl.Arm("compiled_floor", native, workload))
    rules_floor = RulesFloor() if with_rules_floor else None
    if rules_floor is not None:
        arms.append(wl.Arm("rules_floor", rules_floor, workload))
    compiled = footprint_functions() if footprint else []
    footprints = {f"footprint_{k}": FootprintFloor(compiled, spread=k == "spread") for k in ("hot", "spread")
                  if footprint}
    arms.extend(wl.Arm(name, f, workload) for name, f in footprints.items())
    variant_procs = {v: wl.make_processor(variant=v) for v in VARIANTS} if variants else {}
    arms.extend(wl.Arm(v, vp, workload) for v, vp in variant_procs.items())
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
            for t in timed.values():
                t.ns.clear()
        times: dict[str, list[int]] = {name: [] for name in names}
        if gc_off:
            gc.disable()
        try:
            for i in range(runs):
                for arm in orders[i % len(orders)]:
                    t0 = clock()
                    emit(arm.tracer, inputs[arm.name][i])
                    times[arm.name].append(clock() - t0)
        finally:
            gc.enable()
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
    all_runs = (warmup + rounds) * runs
    for checked in (proc, bg, *variant_procs.values()):
        if checked is not None:
            check_saw_all(checked, all_runs)
    for f in (floor, deferred, native, rules_floor, *footprints.values()):
        if f is not None:
            check_floor(f, all_runs)

    def over(name: str, base: str) -> list[float]:
        return [x / b for x, b in zip(per_round[name], per_round[base])]

    def added_us(name: str, base: str) -> float:  # median run over median run, a span
        return (statistics.median(per_round[name]) - statistics.median(per_round[base])) / wl.SPANS_PER_RUN / 1e3

    out: dict[str, Any] = {
        "workload": workload_name, "workload_description": workload.description, "build": build_name(),
        "rounds": rounds, "runs_per_round": runs, "warmup_rounds": warmup, "spans_per_run": wl.SPANS_PER_RUN,
        "gc": "off during the runs" if gc_off else "on (collected before each round)",
        "sdk_us_per_span": statistics.median(per_round["sdk"]) / wl.SPANS_PER_RUN / 1e3,
        "over_sdk": {name: spread(over(name, "sdk")) for name in names[1:]},
        "over_floor": {name: spread(over(name, "floor")) for name in names if name in OVER_FLOOR},
        "added_us_per_span": {name: added_us(name, "sdk") for name in names[1:]},
        "over_floor_us_per_span": {name: added_us(name, "floor") for name in names if name in OVER_FLOOR},
        "ratio_of_totals": {name: totals[name] / totals["sdk"] for name in names[1:]},
    }
    if native_module is not None:
        out["compiled_floor_module"] = native_module.__file__
    if rules_floor is not None:  # the processor against the floor that keeps what the rules need
        out["processor_over_rules_floor"] = spread(over("processor", "rules_floor"))
        out["processor_over_rules_floor_us_per_span"] = added_us("processor", "rules_floor")
    if footprints:  # the same calls, into 210 functions a run against into one: the footprint alone
        out["footprint_spread_over_hot"] = spread(over("footprint_spread", "footprint_hot"))
        out["footprint_spread_over_hot_us_per_span"] = added_us("footprint_spread", "footprint_hot")
    if bg is not None:
        out["background_drain_ms"] = {"median": statistics.median(drains), "max": max(drains)}
    for name, t in timed.items():  # median calls, as the runs above; mean calls add up to the arm's time
        kinds = t.by_kind
        by_kind = {k: statistics.median(v) / 1e3 for k, v in sorted(kinds.items())}
        measured = rounds * runs
        out.setdefault("in_calls", {})[name] = {
            "us_by_kind": by_kind,
            "us_per_span": sum(by_kind[k] * len(v) for k, v in kinds.items()) / (measured * wl.SPANS_PER_RUN),
            "us_a_run_by_mean": sum(sum(v) for v in t.ns.values()) / measured / 1e3,
            "us_a_run_by_place": {k: sum(v) / measured / 1e3 for k, v in t.ns.items()}}
    if timed:  # where the processor's calls take longer than the floor's, by place, us a run (means)
        p, f = (out["in_calls"][n]["us_a_run_by_place"] for n in ("processor", "floor"))
        out["in_calls_gap_us_a_run"] = dict(sorted(((k, p[k] - f.get(k, 0.0)) for k in p), key=lambda kv: -kv[1]))
    return out


# --- --cpu: each arm alone in a process of its own, its CPU time (all threads) -------------------------
def make_extra(arm_name: str) -> Any:
    return {"sdk": lambda: None, "processor": wl.make_processor, "floor": Floor,
            "compiled_floor": lambda: compiled_floor_module().Floor(),
            "background": lambda: wl.make_processor(background=True),
            "footprint_hot": lambda: FootprintFloor(footprint_functions(), spread=False),
            "footprint_spread": lambda: FootprintFloor(footprint_functions(), spread=True)}[arm_name]()


class CollectorTime:
    """The garbage collector's time while installed (``gc.callbacks``): young (generations 0 and 1)
    and full collections, ns, and how many full ones."""

    def __init__(self) -> None:
        self.young_ns = self.full_ns = self.full = 0
        self._t0 = 0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._t0 = time.perf_counter_ns()
            return
        spent = time.perf_counter_ns() - self._t0
        if info["generation"] == 2:
            self.full_ns += spent
            self.full += 1
        else:
            self.young_ns += spent


def cpu_child(arm_name: str, workload_name: str, runs: int) -> dict[str, int]:
    """CPU ns of ``runs`` runs (after 200 warm-up runs) with this arm alone, the queues drained, and
    the collector's part of it. The inputs are made 100 runs at a time, outside the CPU counted, so
    what the process keeps between collections is the arm's (and the SDK's), not the harness's: a
    long-lived process's full collections visit every object the processor keeps."""
    workload = wl.make_workload(workload_name)
    extra = make_extra(arm_name)
    arm = wl.Arm(arm_name, extra, workload)
    for run in workload.prepare(range(200)):
        workload.emit(arm.tracer, run)
    arm.bsp.force_flush()
    if extra is not None:
        extra.force_flush()
    gc.collect()
    collector = CollectorTime()
    gc.callbacks.append(collector)
    cpu = 0
    for first in range(200, 200 + runs, 100):
        inputs = workload.prepare(range(first, min(first + 100, 200 + runs)))
        c0 = time.process_time_ns()
        for run in inputs:
            workload.emit(arm.tracer, run)
        cpu += time.process_time_ns() - c0
    c0 = time.process_time_ns()
    if extra is not None:
        extra.force_flush()  # the background arm's backlog: its CPU counts
    arm.bsp.force_flush()
    cpu += time.process_time_ns() - c0
    gc.callbacks.remove(collector)
    if isinstance(extra, TrajectoryProcessor):
        check_saw_all(extra, 200 + runs)
    arm.shutdown()
    return {"cpu_ns": cpu, "gc_young_ns": collector.young_ns, "gc_full_ns": collector.full_ns,
            "full_collections": collector.full, "gc_tracked": len(gc.get_objects())}


def measure_cpu(workload_name: str, runs: int, arm_names: list[str]) -> dict[str, Any]:
    got: dict[str, list[dict[str, int]]] = {name: [] for name in arm_names}
    for _ in range(CPU_REPEATS):
        for name in arm_names:
            done = subprocess.run([sys.executable, __file__, "--workload", workload_name, "--cpu-child", name,
                                   "--cpu", str(runs)], capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise SystemExit(f"--cpu: the {name} child failed: {done.stderr[-800:]}")
            got[name].append(json.loads(done.stdout.splitlines()[-1]))
    cpu = {name: [g["cpu_ns"] for g in v] for name, v in got.items()}
    base, floor = statistics.median(cpu["sdk"]), statistics.median(cpu["floor"])
    return {"runs": runs, "repeats": CPU_REPEATS,
            "us_per_span": {k: statistics.median(v) / (runs * wl.SPANS_PER_RUN) / 1e3 for k, v in cpu.items()},
            "over_sdk": {k: statistics.median(v) / base for k, v in cpu.items() if k != "sdk"},
            "over_sdk_range": {k: [min(v) / max(cpu["sdk"]), max(v) / min(cpu["sdk"])]
                               for k, v in cpu.items() if k != "sdk"},
            "over_floor": {k: statistics.median(v) / floor for k, v in cpu.items() if k in OVER_FLOOR},
            # the collector's part, per arm (medians): its share of the CPU, full collections and their ms
            "collector": {k: {"share": statistics.median((g["gc_young_ns"] + g["gc_full_ns"]) / g["cpu_ns"] for g in v),
                              "full_collections": statistics.median(g["full_collections"] for g in v),
                              "full_ms": statistics.median(g["gc_full_ns"] for g in v) / 1e6,
                              "tracked_objects": statistics.median(g["gc_tracked"] for g in v)}
                          for k, v in got.items()}}


# --- --alone: recorded spans replayed straight into the calls, no SDK ---------------------------------
def record(workload: wl.Workload, runs: int) -> list[tuple[str, Any]]:
    rec = wl.Recorder()
    provider = TracerProvider(resource=Resource.create({"service.name": "bench-support"}))
    provider.add_span_processor(rec)
    tracer = provider.get_tracer("bench")
    for run in workload.prepare(range(1_000_000, 1_000_000 + runs)):
        workload.emit(tracer, run)
    return rec.calls


def replay(calls: list[tuple[str, Any]], proc: SpanProcessor) -> int:
    on_start, on_end = proc.on_start, proc.on_end
    t0 = time.perf_counter_ns()
    for phase, span in calls:
        if phase == "start":
            on_start(span)
        else:
            on_end(span)
    return time.perf_counter_ns() - t0


def measure_alone(workload: wl.Workload, runs: int, repeats: int) -> dict[str, Any]:
    """us a span of the processor and of the floor, each fed the same recorded spans (fresh per
    pass, taking turns, GC on, the recorded spans ``gc.freeze()``d), caches warm."""
    calls = record(workload, runs)
    spans = len(calls) // 2
    makers: dict[str, Callable[[], SpanProcessor]] = {"processor": wl.make_processor, "floor": Floor}
    times: dict[str, list[int]] = {name: [] for name in makers}
    gc.collect()
    gc.freeze()  # the recorded spans are not the processor's garbage: keep collections off them
    try:
        for _ in range(repeats):
            for name, make in makers.items():
                gc.collect()
                times[name].append(replay(calls, make()))
    finally:
        gc.unfreeze()
    us = {name: statistics.median(t) / spans / 1e3 for name, t in times.items()}
    return {"spans": spans, "repeats": repeats, "us_per_span": us, "processor_over_floor": us["processor"] / us["floor"]}


def profile_alone(workload: wl.Workload, runs: int, top: int) -> str:
    calls = record(workload, runs)
    proc = wl.make_processor()
    prof = cProfile.Profile()
    prof.enable()
    replay(calls, proc)
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(top)
    return buf.getvalue()


# --- --instructions: callgrind's count of each arm, one child process each ---------------------------
def callgrind_arm(name: str, workload: wl.Workload, runs: int) -> None:
    """Run one arm for valgrind: ``runs`` warm-up runs, then ``runs`` runs inside ``functools.reduce``,
    the function to toggle collection on (``--collect-atstart=no --toggle-collect=functools_reduce``).
    The measured runs' inputs are built before, outside it."""
    arm = wl.Arm(name, make_extra(name), workload)
    emit = workload.emit
    for run in workload.prepare(range(runs)):
        emit(arm.tracer, run)
    inputs = workload.prepare(range(runs, 2 * runs))
    arm.bsp.force_flush()
    gc.collect()

    def measured(_: Any, __: Any) -> None:
        for run in inputs:
            emit(arm.tracer, run)

    functools.reduce(measured, [0], None)
    arm.shutdown()


# callgrind's simulated misses (--cache-sim): first-level instruction and data cache misses, and
# mispredicted branches (conditional and indirect), as its event names sum them
MISSES = {"I1 misses": ("I1mr",), "D1 misses": ("D1mr", "D1mw"), "mispredicted branches": ("Bcm", "Bim")}


def instruction_counts(workload: str, runs: int, cache_sim: bool = False,
                       compiled_floor: bool = False, footprint: bool = False) -> dict[str, Any]:
    """Instructions the SDK, processor and floor arms (and the compiled floor's) execute for ``runs``
    measured runs (after as many warm-up runs), counted by callgrind in a child process per arm,
    ``PYTHONHASHSEED=0``; with ``cache_sim`` also its simulated cache misses and mispredicted
    branches, a run."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit("--instructions: valgrind is not installed (apt-get install valgrind)")
    if compiled_floor:
        compiled_floor_module()  # built now, not under valgrind
    if footprint:
        footprint_functions()
    counts: dict[str, int] = {}
    events: dict[str, dict[str, int]] = {}
    objects: dict[str, dict[str, float]] = {}
    for arm in ("sdk", "processor", "floor", *(["compiled_floor"] if compiled_floor else []),
                *(["footprint_hot", "footprint_spread"] if footprint else [])):
        with tempfile.TemporaryDirectory() as tmp:
            out_file = Path(tmp, "callgrind.out")
            cmd = [valgrind, "--tool=callgrind", "--collect-atstart=no", "--toggle-collect=functools_reduce",
                   *(["--cache-sim=yes", "--branch-sim=yes"] if cache_sim else []),
                   f"--callgrind-out-file={out_file}", sys.executable, __file__, "--workload", workload,
                   "--callgrind-arm", arm, "--runs-per-round", str(runs)]
            done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"},
                                  check=False)
            if done.returncode == 0 and out_file.exists():
                objects[arm] = objects_made(out_file, runs)  # calls into CPython's allocators
        names = re.search(r"Events +: ([\w ]+)", done.stderr)
        found = re.search(r"Collected : ([\d ]+)", done.stderr)
        if done.returncode != 0 or found is None or names is None:
            raise SystemExit(f"--instructions: callgrind counted nothing for the {arm} arm "
                             f"(exit {done.returncode}): {done.stderr[-800:]}")
        events[arm] = dict(zip(names.group(1).split(), map(int, found.group(1).split())))
        counts[arm] = events[arm]["Ir"]
    spans = runs * wl.SPANS_PER_RUN
    out = {"runs": runs, "spans": spans, "counts": counts,
           "added_per_span": {arm: (counts[arm] - counts["sdk"]) / spans for arm in ("processor", "floor")},
           "over_sdk": counts["processor"] / counts["sdk"], "floor_over_sdk": counts["floor"] / counts["sdk"],
           "over_floor": counts["processor"] / counts["floor"]}
    if compiled_floor:
        out["compiled_floor_over_floor"] = counts["compiled_floor"] / counts["floor"]
    if footprint:  # the same instructions, whichever functions they run in
        out["footprint_spread_over_hot"] = counts["footprint_spread"] / counts["footprint_hot"]
    out["objects_a_run"] = objects
    floor_made = objects.get("floor", {})
    out["processor_over_floor_objects_a_run"] = {
        what: n - floor_made[what] for what, n in objects.get("processor", {}).items() if what in floor_made}
    if cache_sim:
        a_run = out["a_run"] = {arm: {what: sum(ev[e] for e in names_) / runs
                                      for what, names_ in {"instructions": ("Ir",), **MISSES}.items()}
                                for arm, ev in events.items()}
        out["processor_over_floor_a_run"] = {what: a_run["processor"][what] - a_run["floor"][what]
                                             for what in a_run["processor"]}
    return out


# --- report -----------------------------------------------------------------------------------------
def fmt(x: dict[str, Any]) -> str:
    return (f"median {x['median']:.3f}x (IQR {x['iqr'][0]:.3f}-{x['iqr'][1]:.3f}, "
            f"range {x['range'][0]:.3f}-{x['range'][1]:.3f})")


def print_report(s: dict[str, Any]) -> None:
    print(f"workload {s['workload']}: {s['workload_description']}")
    print(f"otel-agenteval {s['build']}; {s['rounds']} rounds x {s['runs_per_round']} runs x {s['spans_per_run']} spans "
          f"(+{s['warmup_rounds']} warm-up), the arms taking turns run by run, GC {s['gc']}; SDK + BSP: "
          f"{s['sdk_us_per_span']:.1f} us a span (median run)")
    print("each round's median run over the SDK's (and over the floor's); us a span added (median runs):")
    for name, x in s["over_sdk"].items():
        line = f"{LABELS[name]:<30} / SDK {fmt(x)}, {s['added_us_per_span'][name]:+.2f} us"
        if name in s["over_floor"]:
            line += f"\n{'':<30} / floor {fmt(s['over_floor'][name])}, {s['over_floor_us_per_span'][name]:+.2f} us"
        print(line)
    if "processor_over_rules_floor" in s:
        print(f"{LABELS['processor']:<30} / floor with the rules' state {fmt(s['processor_over_rules_floor'])}, "
              f"{s['processor_over_rules_floor_us_per_span']:+.2f} us")
    if "footprint_spread_over_hot" in s:
        label = f"the same calls, {FOOTPRINT_FUNCTIONS} functions"
        print(f"{label:<30} / one function {fmt(s['footprint_spread_over_hot'])}, "
              f"{s['footprint_spread_over_hot_us_per_span']:+.2f} us: the footprint alone")
    print("ratio of total times (pauses included): " +
          ", ".join(f"{name} {v:.3f}x" for name, v in s["ratio_of_totals"].items()))
    if "background_drain_ms" in s:
        d = s["background_drain_ms"]
        print(f"background=True: what a round left queued was checked in {d['median']:.1f} ms (median; max "
              f"{d['max']:.1f}) after it")
    for name, c in s.get("in_calls", {}).items():
        print(f"in the {name}'s own calls (median call): {c['us_per_span']:.2f} us a span; by call, us: " +
              ", ".join(f"{k} {v:.2f}" for k, v in c["us_by_kind"].items()) +
              f"; by mean, {c['us_a_run_by_mean']:.1f} us a run")
    if "in_calls_gap_us_a_run" in s:
        gap = s["in_calls_gap_us_a_run"]
        print(f"the processor's calls over the floor's (means), {sum(gap.values()):.1f} us a run: " +
              ", ".join(f"{k} {v:+.1f}" for k, v in gap.items()))
    if "cpu" in s:
        c = s["cpu"]
        print(f"CPU time, each arm alone in its own process ({c['repeats']} each, {c['runs']} runs): SDK + BSP "
              f"{c['us_per_span']['sdk']:.1f} us a span; / SDK: " + ", ".join(
                  f"{k} {v:.3f}x ({c['over_sdk_range'][k][0]:.3f}-{c['over_sdk_range'][k][1]:.3f})"
                  for k, v in c["over_sdk"].items()) + "; / floor: " +
              ", ".join(f"{k} {v:.3f}x" for k, v in c["over_floor"].items()))
        print("the garbage collector's part of that CPU (medians): " + "; ".join(
            f"{k} {g['share']:.1%}, {g['full_collections']:.0f} full collections ({g['full_ms']:.0f} ms), "
            f"{g['tracked_objects']:,.0f} objects tracked at the end" for k, g in c["collector"].items()))
    if "alone" in s:
        a = s["alone"]
        print(f"alone (recorded spans into the calls, no SDK, {a['spans']} spans): processor "
              f"{a['us_per_span']['processor']:.2f} us a span, floor {a['us_per_span']['floor']:.2f}: "
              f"{a['processor_over_floor']:.2f}x")
    if "instructions" in s:
        ir = s["instructions"]
        n = ir["counts"]
        print(f"instructions (callgrind, {ir['spans']} spans): SDK {n['sdk'] / 1e6:.1f}M, processor "
              f"{n['processor'] / 1e6:.1f}M ({ir['over_sdk']:.3f}x, +{ir['added_per_span']['processor'] / 1e3:.1f}k a "
              f"span), floor {n['floor'] / 1e6:.1f}M ({ir['floor_over_sdk']:.3f}x, +"
              f"{ir['added_per_span']['floor'] / 1e3:.1f}k): processor / floor {ir['over_floor']:.3f}x")
        made = ir["objects_a_run"]
        if ir["processor_over_floor_objects_a_run"]:
            print("objects made a run (calls into CPython's allocators): " + "; ".join(
                f"{what}: " + ", ".join(f"{arm} {m[what]:,.0f}" for arm, m in made.items() if what in m)
                + f" (processor - floor {d:+,.0f})" for what, d in ir["processor_over_floor_objects_a_run"].items()))
        else:
            print("objects made a run: callgrind saw none of CPython's allocators (a stripped interpreter?)")
        if "compiled_floor_over_floor" in ir:
            print(f"the floor compiled (mypyc): {n['compiled_floor'] / 1e6:.1f}M instructions, "
                  f"{ir['compiled_floor_over_floor']:.3f}x the plain floor's")
        if "footprint_spread_over_hot" in ir:
            print(f"the same calls into {FOOTPRINT_FUNCTIONS} functions / into one: "
                  f"{ir['footprint_spread_over_hot']:.4f}x the "
                  f"instructions ({n['footprint_hot'] / 1e6:.1f}M, {n['footprint_spread'] / 1e6:.1f}M)")
        if "processor_over_floor_a_run" in ir:
            print("the processor's arm over the floor's, a run (callgrind's cache simulation): " +
                  ", ".join(f"{k} {v:+,.0f}" for k, v in ir["processor_over_floor_a_run"].items()))
            for arm, a_run in ir["a_run"].items():
                print(f"  {arm}, a run: " + ", ".join(f"{k} {v:,.0f}" for k, v in a_run.items()))
    print(f"processor / floor: {s['over_floor']['processor']['median']:.3f}x (target <= {TARGET:.2f}x, goal "
          f"{GOAL:.2f}x); processor / SDK: {s['over_sdk']['processor']['median']:.3f}x; "
          f"+{s['added_us_per_span']['processor']:.2f} us a span")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workload", choices=("pydantic-ai", "tool-heavy", "lean"), default="tool-heavy")
    p.add_argument("--rounds", type=int, default=10, help="measured rounds (default 10)")
    p.add_argument("--runs-per-round", type=int, default=200, help="agent runs per arm and round (default 200)")
    p.add_argument("--warmup", type=int, default=1, help="rounds run first and discarded (default 1)")
    p.add_argument("--in-calls", action="store_true", help="also time the processor's and the floor's calls in place")
    p.add_argument("--background", action="store_true", help="also the processor with background=True")
    p.add_argument("--deferred-floor", action="store_true", help="also the floor with all its work at the run's end")
    p.add_argument("--compiled-floor", action="store_true",
                   help="also the floor compiled with mypyc (built once into ~/.cache/otel-agenteval/bench-floor)")
    p.add_argument("--rules-floor", action="store_true",
                   help="also the floor with the state the rules keep (conversation, values tested, results handed on)")
    p.add_argument("--footprint", action="store_true",
                   help="also the floor plus the same native calls into one function and into 210 (built once into "
                        "~/.cache/otel-agenteval/bench-footprint): what the code a run passes through costs")
    p.add_argument("--variants", action="store_true",
                   help="also the processor with the tainted-flow rule off, and with only the write named")
    p.add_argument("--gc-off", action="store_true", help="the garbage collector off during the runs")
    p.add_argument("--otel", action="store_true",
                   help="the processor with meter_provider and logger_provider (evaluation_runs: true)")
    p.add_argument("--cpu", type=int, metavar="N", default=0,
                   help="also each arm's CPU time alone in a process of its own, N runs (e.g. 2000)")
    p.add_argument("--alone", action="store_true", help="also the processor and the floor alone (recorded spans)")
    p.add_argument("--instructions", action="store_true",
                   help="also count each arm's instructions with valgrind's callgrind (runs-per-round runs)")
    p.add_argument("--cache-sim", action="store_true",
                   help="with --instructions: also callgrind's simulated cache misses and mispredicted branches")
    p.add_argument("--profile", action="store_true", help="also cProfile the processor alone (the top functions)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the report")
    p.add_argument("--cpu-child", choices=("sdk", "processor", "floor", "background", "compiled_floor"),
                   help=argparse.SUPPRESS)
    p.add_argument("--callgrind-arm", choices=("sdk", "processor", "floor", "compiled_floor", "footprint_hot",
                                              "footprint_spread"),
                   help="only run this arm, for valgrind's instruction count (see benchmarks/README.md)")
    args = p.parse_args(argv)
    if args.otel:
        wl.OTEL.update(on=True)
    if args.cpu_child:
        print(json.dumps(cpu_child(args.cpu_child, args.workload, args.cpu)))
        return 0
    if args.callgrind_arm:
        callgrind_arm(args.callgrind_arm, wl.make_workload(args.workload), args.runs_per_round)
        return 0
    if args.rounds < 2 or args.runs_per_round < 3 or args.warmup < 0 or args.cpu < 0:
        p.error("--rounds must be >= 2, --runs-per-round >= 3, --warmup >= 0, --cpu >= 0")
    if args.cache_sim and not args.instructions:
        p.error("--cache-sim goes with --instructions")
    s = measure(args.workload, args.rounds, args.runs_per_round, args.warmup, args.in_calls, args.background,
                args.deferred_floor, args.gc_off, args.variants, args.compiled_floor, args.rules_floor, args.footprint)
    if args.cpu:
        s["cpu"] = measure_cpu(args.workload, args.cpu,
                               ["sdk", "processor", "floor", *(["background"] if args.background else []),
                                *(["compiled_floor"] if args.compiled_floor else [])])
    if args.alone:
        s["alone"] = measure_alone(wl.make_workload(args.workload), runs=1000, repeats=7)
    if args.instructions:
        s["instructions"] = instruction_counts(args.workload, args.runs_per_round, args.cache_sim, args.compiled_floor,
                                               args.footprint)
    if args.json:
        json.dump(s, sys.stdout, indent=2)
        print()
    else:
        print_report(s)
    if args.profile:
        print(profile_alone(wl.make_workload(args.workload), runs=2000, top=30),
              file=sys.stderr if args.json else sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
