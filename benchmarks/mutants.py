"""Mutation testing of the safety path: plant one realistic bug at a time, see whether the tests notice.

    make mutants                                      # every site (minutes: one pytest run per mutant)
    python benchmarks/mutants.py --check              # every site still applies to the code (seconds)
    python benchmarks/mutants.py --only guard/ --only policy/starter.py
    python benchmarks/mutants.py --json mutants.json  # the per-module scores, for CONTRIBUTING.md

Each mutant is one textual edit from :data:`SITES` (flip a comparison, drop a condition, ``all``
for ``any``, remove a call, change a constant): applied to a temporary copy of the tree (no
compiled modules: plain Python), the module's mapped tests run with ``-x`` and a timeout, then the
file is put back. A mutant is *killed* when a test fails (or the run times out), *survived* when
every test passes. The mapped tests are first run on the unchanged copy: a failure there makes
the score meaningless, so the script stops (exit 3).

A site whose ``old`` text is not exactly once in its module is a bad site (the code moved on):
exit 2 naming it, so the list is kept true. ``--fail-under PCT``: exit 1 below that score.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "otel_agenteval"


@dataclass(frozen=True)
class Mutant:
    """One planted bug: in ``module`` (under the package), ``old`` becomes ``new``."""

    module: str
    old: str
    new: str
    why: str  # what a user would get
    tests: tuple[str, ...] = ()  # instead of the module's mapped tests

    @property
    def id(self) -> str:
        return f"{self.module}:{self.old.strip().splitlines()[0][:60]}"


# which tests answer for a module, by path prefix (the longest prefix wins)
TESTS: dict[str, tuple[str, ...]] = {
    "rules/": ("test_rules_core.py", "test_rules_scope.py", "test_rules_confirmation.py", "test_rules_edges.py",
               "test_guard.py", "test_guard_concurrency.py", "test_inferred_writes.py", "test_guard_hooks_observe.py"),
    "guard/": ("test_guard.py", "test_guard_concurrency.py", "test_guard_hooks.py", "test_guard_hooks_observe.py"),
    "engine/": ("test_assembly.py", "test_assembly_more.py", "test_rules_core.py", "test_rules_confirmation.py",
                "test_rules_edges.py", "test_threads.py", "test_guard.py"),
    "receiver/wal.py": ("test_wal.py", "test_wal_checkpoint.py", "test_recovery.py"),
    "receiver/durability.py": ("test_wal.py", "test_wal_checkpoint.py", "test_recovery.py"),
    "receiver/decoding.py": ("test_serve_span_times.py", "test_serve_input.py", "test_serve_hostile_bodies.py"),
    "receiver/compression.py": ("test_serve_compression.py", "test_serve_hostile_bodies.py"),
    "replay/live.py": ("test_serve_feeder.py", "test_serve_routing.py", "test_serve.py"),
    "policy/": ("test_policy.py", "test_check_policy.py", "test_init.py", "test_rules_core.py", "test_rules_edges.py"),
}

SITES: tuple[Mutant, ...] = (
    # --- rules ------------------------------------------------------------------------------------
    Mutant("rules/budgets.py", "t.tool_calls + 1 > b.max_steps:", "t.tool_calls > b.max_steps:",
           "a step budget reported one step late"),
    Mutant("rules/budgets.py", "fired = set() if preview else t.budgets_fired", "fired = t.budgets_fired",
           "once a budget was reported, the guard lets every later call over it run"),
    Mutant("rules/budgets.py", "    if budget in fired:\n", "    if budget in fired and False:\n",
           "one budget breach reported at every later step"),
    Mutant("rules/budgets.py", "if n > b.max_repeats:", "if n >= b.max_repeats:",
           "a loop alarm one call early"),
    Mutant("rules/budgets.py", "t.llm_calls + 1 > b.max_llm_calls:", "t.llm_calls > b.max_llm_calls:",
           "a model-call budget reported one call late"),
    Mutant("rules/budgets.py", "elapsed = max(0, end_ns - t.started_ns) / 1e9",
           "elapsed = max(0, end_ns - t.started_ns) / 1e10", "a duration budget ten times too lax"),
    Mutant("rules/writes.py", "first = t.writes_ok.get(key) or (conv.writes_ok.get(key) if conv is not None else None)",
           "first = t.writes_ok.get(key)", "a refund repeated in the next turn of a conversation goes unseen"),
    Mutant("rules/writes.py", '"critical" if event.tool in check.policy.write_tools else "warning",', '"warning",',
           "a declared write's duplicate is only a warning: no page"),
    Mutant("rules/writes.py", "if preview is not None and key in preview.in_flight:",
           "if False and preview is not None and key in preview.in_flight:",
           "the guard lets a write run while the identical one still runs"),
    Mutant("rules/writes.py", "if event.raw_arguments is None:", "if not event.raw_arguments:",
           "a write with no arguments is never a duplicate"),
    Mutant("rules/writes.py",
           "failed = t.writes_failed.get(key) or (conv.writes_failed.get(key) if conv is not None else None)",
           "failed = t.writes_failed.get(key)", "a retry in the next turn after a failed write is not flagged"),
    Mutant("rules/scope.py", "s.tool == r and s.ok and s.end_ns <= start", "s.tool == r and s.end_ns <= start",
           "a failed prerequisite counts as done"),
    Mutant("rules/scope.py", "matching the policy pattern\"))\n                    break\n",
           "matching the policy pattern\"))\n", "one call reported once per earlier flagged result"),
    Mutant("rules/scope.py", "if allowed is None or event.tool in allowed:", "if not allowed or event.tool in allowed:",
           "an agent allowed no tools may call any"),
    Mutant("rules/scope.py", "            if subject is None or value is None:\n",
           "            if subject is None:\n", "a call without the subject argument is reported as another subject's"),
    Mutant("rules/scope.py", "cond.same_subject.argument, str(subject), str(value)):",
           "cond.same_subject.argument, str(subject), str(subject)):", "acting on another customer is never reported"),
    Mutant("rules/confirmation.py", "    if conf is not None:\n        use(conf, step, t)\n",
           "    if False:\n        use(conf, step, t)\n", "one yes authorises any number of refunds"),
    Mutant("rules/confirmation.py", 'return value is True or str(value).lower() == "true"',
           "return value is not None", 'agenteval.approved="false" approves a destructive call'),
    Mutant("rules/grounding.py", "if s.end_ns <= step.start_ns and (x := result_text(s.raw_result))",
           "if (x := result_text(s.raw_result))", "a value grounded by a result that came after the call"),
    Mutant("rules/grounding.py", 'if m.role == "user" and m.text', 'if m.role != "system" and m.text',
           "the assistant's own words ground an argument"),
    # --- guard ------------------------------------------------------------------------------------
    Mutant("guard/guard.py", "needs_confirmation=all(v.rule in CONFIRMATION_RULES", "needs_confirmation=any(v.rule in CONFIRMATION_RULES",
           "an out-of-scope call is offered for approval instead of refused"),
    Mutant("guard/guard.py", "if plan.on_repeat and (repeated(t, step) or step.call_key in in_flight):",
           "if plan.on_repeat and repeated(t, step):", "a write checked while its twin runs is allowed"),
    Mutant("guard/guard.py", "        if not decision.allowed:\n            attrs[sc.AE_BLOCKED] = True\n",
           "        attrs[sc.AE_BLOCKED] = True\n", "observe mode marks calls that ran as blocked: the processor drops them"),
    Mutant("guard/guard.py", "if decision.would_block or plan.write:", "if decision.would_block:",
           "an allowed write is not marked allowed on its span"),
    Mutant("guard/guard.py", 'allowed=plan.mode == "observe", would_block=True, mode=plan.mode, rule=first.rule,',
           "allowed=False, would_block=True, mode=plan.mode, rule=first.rule,", "observe mode stops calls"),
    Mutant("guard/guard.py", "blocking = tuple(v for v in found if v.rule not in allow)",
           "blocking = tuple(v for v in found if v.rule in allow)", "allow_rules blocks what it should let through"),
    Mutant("guard/guard.py", "if plan.gated and (t.tool_calls + 1 > lim.max_steps",
           "if plan.gated and (t.tool_calls > lim.max_steps", "the guard lets the call that crosses the step budget run"),
    Mutant("guard/guard.py", "        for _ in range(3):", "        for _ in range(1):",
           "the loser of a race is failed closed as a guard error, not a duplicate"),
    Mutant("guard/guard.py", 'decision = Decision(tool, allowed=plan.mode == "observe", would_block=True, mode=plan.mode, rule=GUARD_ERROR,',
           "decision = Decision(tool, allowed=True, would_block=True, mode=plan.mode, rule=GUARD_ERROR,",
           "a broken rule lets a write run though the policy fails closed"),
    Mutant("guard/guard.py", 'return name is not None and name == f"{sc.OP_EXECUTE_TOOL} {tool}"', "return False",
           "a tool span named by GenAI semconv only (Google ADK) is not taken as the call's"),
    Mutant("guard/holds.py", "if write and any(p.write and p.hold.call_key == promise.call_key",
           "if False and any(p.write and p.hold.call_key == promise.call_key",
           "two identical writes checked at the same moment both run"),
    Mutant("guard/holds.py", "            if conf is not None and not _free(conf, traj, promise):\n",
           "            if False:\n", "two refunds checked at once share one yes"),
    Mutant("guard/holds.py", "        if conf.used:\n            return False\n", "", "a used yes promised again"),
    Mutant("guard/holds.py", "if p.write and p.hold.span_id != own_span)", "if p.write)",
           "a call asked about twice is a duplicate of itself"),
    Mutant("guard/hooks/plain.py", "                decision = (guard or default_guard()).check(tool, call)\n                if not decision.allowed:",
           "                decision = (guard or default_guard()).check(tool, call)\n                if decision.would_block:",
           "@guarded (sync) stops calls in observe mode"),
    Mutant("guard/hooks/plain.py", "                    decision = (guard or default_guard()).check(tool, call)\n                    if not decision.allowed:",
           "                    decision = (guard or default_guard()).check(tool, call)\n                    if decision.would_block:",
           "@guarded (async) stops calls in observe mode"),
    Mutant("guard/hooks/plain.py", "            bound.apply_defaults()\n", "",
           "a default argument is not what the rules see: a confirmed refund of the default amount is stopped"),
    Mutant("guard/hooks/plain.py", "if span is not None and record and result is not None:",
           "if span is not None and result is not None:", "record_result=False still puts the tool's result on the span"),
    Mutant("guard/plan.py", "mode = own.mode if own is not None and own.mode is not None else g.mode", "mode = g.mode",
           "observe for one tool is ignored"),
    Mutant("guard/plan.py", 'fail == "closed" if fail is not None else tool in confirming)',
           'fail == "closed" if fail is not None else False)', "a write fails open when a rule breaks"),
    Mutant("guard/decision.py", "        if self.needs_confirmation:\n", "        if not self.needs_confirmation:\n",
           "the agent is told to ask the user when a yes would not help"),
    # --- engine -----------------------------------------------------------------------------------
    Mutant("engine/events.py", "if t.tool_calls + 1 > lim.max_steps or lim.check_repeats",
           "if t.tool_calls > lim.max_steps or lim.check_repeats", "the step that crosses the budget is not checked"),
    Mutant("engine/events.py", "gate = (t.llm_calls + 1 > lim.max_llm_calls", "gate = (t.llm_calls > lim.max_llm_calls",
           "the model call that crosses the budget is not checked"),
    Mutant("engine/store.py", "if len(self.open) >= self.max_open else None", "if len(self.open) > self.max_open else None",
           "one open run more than the bound"),
    Mutant("engine/store.py", "if conv is not None and conv.touched_ns < now - self.conv_ttl_ns:",
           "if conv is not None and conv.touched_ns > now - self.conv_ttl_ns:",
           "a live conversation forgotten: the next turn's duplicate refund unseen"),
    Mutant("engine/store.py", 'text[:64] + "~" + short_hash(text)', "text[:64]",
           "two long conversation ids with one prefix are one conversation"),
    # (``if not conf.used`` -> ``if True`` before the carry is equivalent: a used yes is refused where it is read)
    Mutant("engine/finalise.py", "            confirmations.keep(conv.extra, conf)\n", "            pass\n",
           "a yes given in one turn does not authorise the write in the next"),
    Mutant("engine/finalise.py", "    for k, v in t.writes_ok.items():\n        if not keep_first(conv.writes_ok, k, v, MAX_CONVERSATION_WRITES):",
           "    for k, v in ():\n        if not keep_first(conv.writes_ok, k, v, MAX_CONVERSATION_WRITES):",
           "a turn's writes are not carried to the conversation"),
    Mutant("engine/dispatch.py", "frozenset(r for r, on in policy.rules.items() if not on)",
           "frozenset(r for r, on in policy.rules.items() if on)", "the rules turned off run, the others do not"),
    # --- receiver: the write-ahead log ------------------------------------------------------------
    Mutant("receiver/wal.py", "                if zlib.crc32(payload) != crc:\n", "                if False:\n",
           "a corrupt record is played after a crash"),
    Mutant("receiver/wal.py", "if bounded and self.bytes + len(record) > self.max_bytes:",
           "if bounded and self.bytes > self.max_bytes:", "the log grows past its bound by a record"),
    Mutant("receiver/wal.py", "                    os.ftruncate(self._fd, seg.size)  # no partial record left behind\n",
           "                    pass\n", "a refused write leaves half a record: everything after it is cut at start"),
    Mutant("receiver/wal.py", "f.set_result(OK if ok else DISK)", "f.set_result(OK)",
           "a failed fsync acknowledged"),
    # (``min(n, len(self.segments) - 1)`` -> ``min(n, len(self.segments))`` is equivalent: callers pass fewer)
    Mutant("receiver/wal.py", "if seg.size >= self.segment_bytes:", "if seg.size >= 10 * self.segment_bytes:",
           "segments grow ten times past their size: the log frees space ten times later"),
    Mutant("receiver/wal.py", "if start + length > len(data):", "if start + length >= len(data):",
           "the last record of every segment is cut at start"),
    Mutant("receiver/wal.py", "[self.dir / n for n in names[i + 1:]]", "[self.dir / n for n in names[i + 2:]]",
           "a segment after a cut is kept and read as if intact"),
    Mutant("receiver/durability.py", "            if any(feeder.holds(tid) for tid in seg.tids):\n                break\n",
           "            if any(feeder.holds(tid) for tid in seg.tids):\n                continue\n",
           "a checkpoint deletes a segment of a run still open: a crash loses it"),
    Mutant("receiver/durability.py", "again = [s for s in batch.spans if s._context[0] not in played]",
           "again = list(batch.spans)", "runs already scraped are counted again after a crash"),
    Mutant("receiver/durability.py", "if len(held) == len(played) or self._mark(",
           "if True or self._mark(", "played marks forgotten though they were not synced"),
    Mutant("receiver/durability.py", "held = [tid for tid in played if feeder.holds(tid)]  # pieces of runs: marked once "
           "played\n            if len(held) == len(played) or self._mark([tid for tid in played if not feeder.holds(tid)]):",
           "held: list[int] = []\n            if self._mark(played):",
           "a trace marked played while its pieces of a run are held: a crash loses them",
           ("tests/frameworks/test_captured_fragments_wal.py",)),
    Mutant("receiver/durability.py", "if queue.spans + len(spans) > queue.capacity:",
           "if queue.spans > queue.capacity:", "a request the queue refuses is logged anyway"),
    # --- receiver: decoding -------------------------------------------------------------------------
    Mutant("receiver/decoding.py", " and not any(map(gt, starts, ends))", "",
           "a request whose one bad span ends before it starts is played"),
    Mutant("receiver/decoding.py", "    if end > now + FUTURE_NS:\n", "    if end > now + 10 * FUTURE_NS:\n",
           "a span ending in three days is played"),
    Mutant("receiver/decoding.py", " and max(map(sub, ends, starts)) <= MAX_SPAN_NS", "",
           "a request whose one bad span lasts two days is played"),
    Mutant("receiver/decoding.py", "if not 0 <= t < UINT64:", "if not 0 <= t:",
           "a time past OTLP's range is accepted"),
    # --- the ten picked blind (issue 45), not in the lists above ------------------------------------
    Mutant("receiver/compression.py", "if not 0 < size <= limit or body.find(MEMBER_START, 10) >= 0:",
           "if not 0 < size or body.find(MEMBER_START, 10) >= 0:", "a gzip body inflating past the limit is accepted"),
    Mutant("replay/live.py", "h.due = now + self._grace", "h.due = now",
           "serve plays a trace as its root comes: late children of other services miss the run"),
    # --- policy -------------------------------------------------------------------------------------
    Mutant("policy/starter.py", "            if seen >= rank:", "            if seen > rank:",
           "init from a few runs writes budgets the runs break"),
    Mutant("policy/starter.py", "rank = max(1, math.ceil(q * self.n))", "rank = max(1, int(q * self.n))",
           "init's p99 is the second largest of a few runs"),
    Mutant("policy/starter.py", "max(math.ceil(d.quantile(0.99) * HEADROOM), math.ceil(d.quantile(0.99) + least))",
           "math.ceil(d.quantile(0.99) * HEADROOM)", "init writes max_steps: 2 for runs of one step"),
    Mutant("policy/policy.py", "return own.budget.merged_over(base) if own is not None", "return own.budget if own is not None",
           "an agent's own budget drops what '*' sets"),
    Mutant("policy/policy.py", "chosen = own.allowed_tools if own is not None and own.allowed_tools is not None else (",
           "chosen = own.allowed_tools if own is not None else (", "an agent without its own list escapes '*''s"),
    Mutant("policy/policy.py", "                and tool not in self.confirmation.tools)", "                )",
           "a confirmation tool named like a write is taken as one"),
    Mutant("policy/policy.py", "return self.rules.get(rule, True)", "return self.rules.get(rule, False)",
           "every rule not named in the policy is off"),
    Mutant("policy/policy.py", "if model.startswith(name):", "if name.startswith(model):",
           "a dated model name gets no price: no cost budget"),
)


class BadSite(ValueError):
    """A site whose text is not exactly once in its module."""


def mutated(text: str, m: Mutant) -> str:
    n = text.count(m.old)
    if n != 1:
        raise BadSite(f"bad site {m.id!r}: its text is {'not' if n == 0 else f'{n} times'} in {m.module}")
    return text.replace(m.old, m.new)


def check_sites(root: Path, sites: Sequence[Mutant]) -> list[str]:
    """What is wrong with ``sites`` against the package under ``root`` (empty: every site applies)."""
    problems = []
    for m in sites:
        path = root / PACKAGE / m.module
        if not path.is_file():
            problems.append(f"bad site {m.id!r}: no module {m.module}")
            continue
        if m.old == m.new:
            problems.append(f"bad site {m.id!r}: the edit changes nothing")
            continue
        try:
            mutated(path.read_text(), m)
        except BadSite as exc:
            problems.append(str(exc))
    return problems


def tests_for(m: Mutant, root: Path = ROOT) -> tuple[str, ...]:
    """The tests that answer for ``m``'s module, those of them ``root`` has (an older checkout may lack some)."""
    if m.tests:
        return m.tests
    prefix = max((p for p in TESTS if m.module.startswith(p)), key=len, default=None)
    if prefix is None:
        raise BadSite(f"bad site {m.id!r}: no tests mapped to {m.module}")
    return tuple(f"tests/{t}" for t in TESTS[prefix] if (root / "tests" / t).is_file())


def copy_tree(root: Path, into: Path) -> None:
    """The package and its tests, without compiled modules or caches: the plain-Python build."""
    skip = shutil.ignore_patterns("*.so", "*.pyd", "__pycache__", "*.pyc", "build")
    shutil.copytree(root / PACKAGE, into / PACKAGE, ignore=skip)
    shutil.copytree(root / "tests", into / "tests", ignore=skip)
    for name in ("pyproject.toml", "setup.py", "README.md", "CHANGELOG.md", "CONTRIBUTING.md", "Makefile"):
        shutil.copy2(root / name, into / name)
    for name in ("examples", "docs", "dashboards", "deploy", "benchmarks", ".ci"):  # read by some tests
        if (root / name).is_dir():
            shutil.copytree(root / name, into / name, ignore=skip)


def run_tests(tree: Path, tests: Sequence[str], timeout_s: float) -> str:
    """``passed``, ``failed`` or ``timeout``: the tests on the copy at ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1", "OTEL_AGENTEVAL_PURE_PYTHON": "1"}
    env.pop("OTEL_AGENTEVAL_EXPECT_BUILD", None)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-x", "--no-header", "-o", "addopts=",
           *tests]
    try:
        done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return "timeout"
    if done.returncode == 0:
        return "passed"
    if done.returncode in (1, 2):  # tests failed, or the run stopped on an error a mutant caused
        return "failed"
    raise RuntimeError(f"pytest exited {done.returncode} on {' '.join(tests)}:\n{done.stdout[-2000:]}")


def score(results: list[dict[str, str]]) -> dict[str, dict[str, float]]:
    by: dict[str, dict[str, float]] = {}
    for r in [*results, *({**r, "module": "overall"} for r in results)]:
        s = by.setdefault(r["module"], {"mutants": 0, "killed": 0, "survived": 0, "timeout": 0})
        s["mutants"] += 1
        s["killed" if r["result"] != "passed" else "survived"] += 1
        s["timeout"] += r["result"] == "timeout"
    for s in by.values():
        s["score"] = round(100 * s["killed"] / s["mutants"], 1)
    return by


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="only check that every site applies (no tests run)")
    p.add_argument("--only", action="append", default=[], metavar="PREFIX",
                   help="sites of modules starting with PREFIX (e.g. guard/, receiver/wal.py); repeatable")
    p.add_argument("--timeout", type=float, default=180.0, metavar="SECONDS", help="per mutant (default %(default)s)")
    p.add_argument("--fail-under", type=float, default=0.0, metavar="PCT", help="exit 1 below this overall score")
    p.add_argument("--json", metavar="FILE", help="write the results and scores here")
    p.add_argument("--match", action="append", default=[], metavar="TEXT",
                   help="sites whose id (module:first line of the edit) contains TEXT; repeatable")
    p.add_argument("--no-baseline", action="store_true", help="skip the run of the mapped tests on unchanged code")
    p.add_argument("--root", type=Path, default=ROOT, help="the checkout to mutate (default: this one)")
    args = p.parse_args(argv)
    root: Path = args.root.resolve()
    sites = [m for m in SITES if (not args.only or any(m.module.startswith(o) for o in args.only))
             and (not args.match or any(t in m.id for t in args.match))]
    if not sites:
        print(f"mutants: no site matches {args.only + args.match}", file=sys.stderr)
        return 2
    problems = check_sites(root, sites)
    try:
        plans = [(m, tests_for(m, root)) for m in sites]
    except BadSite as exc:
        problems.append(str(exc))
    if problems:
        print("\n".join(f"mutants: {x}" for x in problems), file=sys.stderr)
        return 2
    if args.check:
        print(f"mutants: {len(sites)} sites apply")
        return 0
    results: list[dict[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="agenteval-mutants-") as tmp:
        tree = Path(tmp)
        copy_tree(root, tree)
        if not args.no_baseline:
            for tests in sorted({t for _, t in plans}):
                if run_tests(tree, tests, args.timeout * 2) != "passed":
                    print(f"mutants: the mapped tests fail on unchanged code: {' '.join(tests)}", file=sys.stderr)
                    return 3
        for i, (m, tests) in enumerate(plans, 1):
            path = tree / PACKAGE / m.module
            original = path.read_text()
            path.write_text(mutated(original, m))
            started = time.monotonic()
            try:
                result = run_tests(tree, tests, args.timeout)
            finally:
                path.write_text(original)
            results.append({"module": m.module, "id": m.id, "result": result, "why": m.why})
            print(f"[{i}/{len(plans)}] {'SURVIVED' if result == 'passed' else result.upper():8} "
                  f"{time.monotonic() - started:5.1f}s  {m.id}", flush=True)
    scores = score(results)
    print(f"\n{'module':32} {'mutants':>7} {'killed':>6} {'survived':>8} {'score':>6}")
    for module in [*sorted(k for k in scores if k != "overall"), "overall"]:
        s = scores[module]
        print(f"{module:32} {s['mutants']:7.0f} {s['killed']:6.0f} {s['survived']:8.0f} {s['score']:5.1f}%")
    survivors = [r for r in results if r["result"] == "passed"]
    if survivors:
        print("\nsurvived (a bug the tests let through):")
        for r in survivors:
            print(f"  {r['id']}\n      {r['why']}")
    if args.json:
        Path(args.json).write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "results": results,
                                               "scores": scores}, indent=1) + "\n")
    return 1 if scores["overall"]["score"] < args.fail_under else 0


if __name__ == "__main__":
    sys.exit(main())
