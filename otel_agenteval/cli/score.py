"""``otel-agenteval score``: recorded runs against reference trajectories; pass^k and cost."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..judging.offline import add_arguments as judge_arguments
from ..metrics.blindspots import UncheckedTally, checked_tools
from ..model.trajectory import Trajectory
from ..model.violation import Violation
from ..policy.policy import Policy
from ..scoring.bind import case_id_of, load_mapping
from ..scoring.cases.load import DEFAULT_STEPS_FACTOR, ORDERS, ResolvedCase, load_cases
from ..scoring.reliability import CaseResult, check_trials
from ..scoring.report import compare, formats
from ..scoring.report import document as report
from ..scoring.score import score_run
from ..scoring.store import RunStore
from .check_policy import load_policy
from .replay import fragment_counts

HELP = "Score recorded runs against reference trajectories (cases file); report pass^k, cost and a gate."

EPILOG = """\
Runs are bound to cases by the root span attribute agenteval.case.id (or agentevals.eval.case.id),
trials by agenteval.trial, or by --mapping (lines 'TRACE_ID CASE_ID', or a YAML/JSON object).
The cases file is YAML, or a Google ADK / agentevals EvalSet JSON (expected tool_uses per case).
Lengths count the final answer on both sides, so extra steps = tool calls - required calls
(7 steps against a reference of 4 is +3). A run succeeds (for pass^k) when its verdict is pass or warn. A case fails the gate when pass^k at
--k is below --threshold (defaults: any failed run fails the case). A case no run names fails the gate too,
whatever its set (the reason names the closest case ids the runs did carry): a job pointed at the
wrong file, or at traces without agenteval.case.id, does not go green.
--match overrides every case's order (agentevals-cli --trajectory-match-type EXACT / IN_ORDER /
ANY_ORDER is --match exact / in_order / any_order); --max-steps-factor sets the step ceiling of
references without a budget (default 2 x the reference length; 0: no ceiling, as agentevals).
Exit status: 0 ok, 1 a regression-set case fails the gate or a case has no runs, 2 usage or input
error, or no span could be read from the input (--allow-empty: neither is an error)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = EPILOG
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("traces", nargs="+", metavar="TRACES", help="trace files (any format replay reads)")
    p.add_argument("--cases", required=True, help="cases file: YAML, or ADK/agentevals EvalSet JSON")
    p.add_argument("--policy", help="policy YAML: which tools write, which rules run (default: none, writes "
                                    "inferred from tool names, as replay does)")
    p.add_argument("--match", type=str.lower, choices=ORDERS, metavar="{" + ",".join(ORDERS) + "}",
                   help="one order rule for every case and alternative (default: each case's own)")
    p.add_argument("--max-steps-factor", type=float, default=DEFAULT_STEPS_FACTOR, metavar="F",
                   help="step ceiling where a reference sets no budget: F x its length (default 2; 0: none)")
    p.add_argument("--allow-empty", action="store_true",
                   help="no span in the input, or a case no run names, is not an error (exit 0)")
    p.add_argument("--mapping", help="trace id -> case id file, for runs without a case attribute")
    p.add_argument("--format", choices=("table", "json", "markdown", "junit", "html"), default="table",
                   help="output format (default table: a one-screen summary; -v: every run); html: one "
                        "self-contained page")
    p.add_argument("--output", "-o", metavar="FILE", help="write the report here instead of standard output")
    p.add_argument("--k", type=int, default=1, help="k for the gate's pass^k (default 1)")
    p.add_argument("--threshold", type=float, default=1.0,
                   help="a case fails when pass^k at --k is below this (default 1.0)")
    p.add_argument("--k-max", type=int, default=None,
                   help="report pass^k for k = 1..K (default: up to the fewest trials of any case, at most 32)")
    p.add_argument("--compare", nargs="+", metavar="OTHER_TRACES",
                   help="a second candidate's traces, scored on the same cases, shown side by side")
    p.add_argument("--labels", help="names for the two candidates, comma separated (default: file names)")
    p.add_argument("--plot", default="agenteval-compare.png",
                   help="with --compare: PNG of the accuracy-cost plane (default agenteval-compare.png)")
    p.add_argument("--show-arguments", action="store_true",
                   help="put tool argument values in the report (default: hashes only)")
    p.add_argument("--all-steps", action="store_true", help="table: a step table for passing runs too")
    p.add_argument("--strict", action="store_true", help="stop at the first bad line or span (exit 2)")
    p.add_argument("--quiet", "-q", action="store_true", help="no rejected-line messages or warnings")
    p.add_argument("--verbose", "-v", action="count", default=0,
                   help="table: every run with its reasons and step table (-vv: also log each violation to stderr)")
    judge_arguments(p)  # --judge, --judgements: the first candidate's runs judged as the policy samples them


def _err(msg: str) -> None:
    print(f"score: {msg}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    if args.k < 1 or (args.k_max is not None and args.k_max < 1):
        _err("--k and --k-max must be at least 1")
        return 2
    if not 0.0 <= args.threshold <= 1.0:
        _err("--threshold must be between 0 and 1")
        return 2
    if not args.max_steps_factor >= 0 or args.max_steps_factor == float("inf"):
        _err("--max-steps-factor must be 0 (no ceiling) or a positive number")
        return 2
    # a bad file raises (CasesError, PolicyError, MappingError): exit 2, one line a problem (cli_errors)
    policy = load_policy(args.policy) if args.policy else Policy()
    # the policy's per-argument normalisers apply wherever a case names none
    by_tool = {name: dict(tool.arguments) for name, tool in policy.tools.items() if tool.arguments}
    cases = load_cases(args.cases, by_tool, order=args.match, steps_factor=args.max_steps_factor)
    mapping = load_mapping(args.mapping) if args.mapping else None
    if not args.policy and not args.quiet:
        _err("no --policy: writes inferred from tool names, as replay does (create_*, issue_*, ...: their "
             "duplicates are warnings; docs/rules.md); --policy declares them")
    from .demo import _configure_logging  # same logging as demo and replay: stderr, quiet unless -v

    _configure_logging(args.verbose > 1)
    groups = [list(args.traces)] + ([list(args.compare)] if args.compare else [])
    for p in (Path(x) for g in groups for x in g):
        if not p.is_file():
            _err(f"{p}: {'no such file' if not p.exists() else 'not a file'}")
            return 2
    labels = _labels(args, groups)
    if labels is None:
        return 2
    stores: list[RunStore] = []
    judging = None
    if args.judge:
        from ..judging.offline import OfflineJudging

        judging = OfflineJudging(policy, args.judge)
    try:
        docs: list[dict[str, Any]] = []
        for paths in groups:
            stores.append(RunStore(args.show_arguments))
            got = score_files(paths, cases, policy, mapping, args, stores[-1], None if docs else judging)
            if isinstance(got, int):
                return got
            if judging is not None and not docs:
                got["judge"] = judging.write(args.judgements, "json", sys.stdout)
            docs.append(got)
        if args.output:
            try:
                with open(args.output, "w", encoding="utf-8") as out:
                    _write(args, labels, docs, out)
            except OSError as exc:
                _err(f"{args.output}: cannot write: {exc.strerror or exc}")
                return 2
            if not args.quiet:
                _err(f"report written to {args.output}; {_verdict(docs[0])}")
        else:
            _write(args, labels, docs, sys.stdout)
            if args.format != "table" and not args.quiet:  # the page went to stdout: the verdict to a person
                _err(_verdict(docs[0]))
    finally:
        for store in stores:
            store.close()
        if judging is not None:
            judging.sink.close(0)
    return 1 if docs[0]["summary"]["gate"]["failed"] else 0


def _verdict(doc: dict[str, Any]) -> str:
    gate = doc["summary"]["gate"]
    return f"verdict: {'FAILED (exit 1)' if gate['failed'] else 'passed (exit 0)'}; {report.gate_line(gate)}"


def _write(args: argparse.Namespace, labels: list[str], docs: list[dict[str, Any]], out: Any) -> None:
    doc = docs[0]
    cmp = None
    if args.compare:
        cmp = compare.comparison(labels, docs, args.k_max or args.k)
        skipped = compare.plot(cmp, args.plot)
        if skipped:
            _err(f"plot skipped: {skipped}")
        else:
            _err(f"plot written to {args.plot}")
        if args.format == "json":
            doc = {**doc, "compare": {**cmp, "plot": None if skipped else str(args.plot),
                                       "summaries": {lab: d["summary"] for lab, d in zip(labels, docs)}}}
    formats.write_report(doc, out, args.format, cmp, list(zip(labels, docs)),
                         detailed=bool(args.verbose or args.all_steps), all_steps=args.all_steps)


def _labels(args: argparse.Namespace, groups: list[list[str]]) -> list[str] | None:
    if args.labels:
        labels = [x.strip() for x in args.labels.split(",")]
        if len(labels) != len(groups) or not all(labels):
            _err(f"--labels needs {len(groups)} names, comma separated")
            return None
        return labels
    names = [Path(g[0]).name + (f" +{len(g) - 1}" if len(g) > 1 else "") for g in groups]
    if len(set(names)) < len(names):
        names = [f"{n} ({i + 1})" for i, n in enumerate(names)]
    return names


def score_files(paths: Sequence[str], cases: list[ResolvedCase], policy: Policy,
                mapping: dict[str, str] | None, args: argparse.Namespace, store: RunStore,
                judging: Any = None) -> dict[str, Any] | int:
    """Replay ``paths``, score each run as it finishes and spool its detail to ``store``; build the report."""
    from ..replay import InputError, RejectedInput, replay
    from .replay import _Progress, no_spans_message  # the same bar and check as replay

    by_id = {c.id: CaseResult(c) for c in cases}
    violations: dict[str, list[Violation]] = {}
    unbound = 0
    unknown: Counter[str] = Counter()
    unbound_runs: list[dict[str, Any]] = []  # listed in every format, up to report.UNBOUND_LISTED
    failed: list[str] = []  # runs whose scoring raised: the command fails (exit 2)

    def found(v: Violation) -> None:
        violations.setdefault(v.trace_id, []).append(v)

    def finished(t: Trajectory) -> None:
        nonlocal unbound
        cid = case_id_of(t, mapping)
        result = by_id.get(cid) if cid is not None else None
        if result is None:
            violations.pop(t.trace_hex, None)
            if cid is None:
                unbound += 1
            else:
                unknown[cid] += 1
            if len(unbound_runs) < report.UNBOUND_LISTED:
                unbound_runs.append({"trace_id": t.trace_hex, "case_id": cid, "agent": t.agent_name,
                                     "tool_calls": t.tool_calls, "outcome": t.outcome})
            return
        # replay keys runs by trace: one run per trace, so its violations can go now
        found_here = violations.pop(t.trace_hex, ())
        try:
            scored = score_run(t, result.case, policy, found_here, keep_arguments=args.show_arguments)
            result.runs.append(store.add(scored))
        except Exception as exc:  # noqa: BLE001 (the engine would count it and carry on: a lost run must not pass)
            failed.append(f"trace {t.trace_hex}: {type(exc).__name__}: {exc}")

    progress = _Progress([Path(p) for p in paths], enabled=not args.quiet and sys.stderr.isatty())
    unchecked = UncheckedTally(checked_tools(policy.tools, policy.outcome.success_when))

    def on_reject(msg: str) -> None:
        if not args.quiet:
            progress.clear()
            _err(f"rejected: {msg}")

    try:
        got = replay(paths, policy, strict=args.strict, on_reject=on_reject, keep=False, log_violations=args.verbose > 1,
                     on_trajectory=[finished, unchecked.finished, *([judging.sink.finished] if judging else [])],
                     on_violation=[found, *([judging.sink.violation] if judging else [])],
                     on_progress=progress.update if progress.enabled else None)
    except RejectedInput as exc:
        progress.clear()
        _err(f"{exc} (--strict: stopping)")
        return 2
    except InputError as exc:
        progress.clear()
        _err(str(exc))
        return 2
    progress.clear()
    if judging is not None:
        judging.finish()
    if failed:
        _err(f"{len(failed)} runs could not be scored (an internal error; please report it): {failed[0]}")
        return 2
    counts = got.counts.as_dict()
    empty = no_spans_message(counts)
    if empty and not args.allow_empty:
        _err(empty)
        return 2
    results = list(by_id.values())
    for r in results:
        r.runs.sort(key=lambda s: (s.trial is None, s.trial if s.trial is not None else 0))
    if args.k_max is not None:
        short = check_trials(results, args.k_max)
        if short:
            _err(f"--k-max {args.k_max}: " + "; ".join(short))
            return 2
    if not args.quiet:
        if unbound:
            _err(f"{unbound} runs carry no case id (set agenteval.case.id on the root span, or use --mapping)")
        for cid, n in unknown.items():
            _err(f"{n} runs name case {cid!r}, which the cases file does not have")
    unread = dict(sorted(got.engine_stats.get("unread", {}).items()))
    fragmented = dict(sorted(got.engine_stats.get("fragmented", {}).items()))
    stitched, unstitched = fragment_counts(got.engine_stats)
    if not args.quiet:  # what no score can see: said, and in the report's summary
        for scope, n in unread.items():
            _err(f"{n} unread spans of instrumentation scope {scope!r}: they look like agent work, read as nothing")
        for scope, n in fragmented.items():
            _err(f"{n} spans of instrumentation scope {scope!r} arrive one per trace: pieces of runs, not runs "
                 "(the instrumentation does not propagate context)")
        for row in unchecked.rows():
            _err(f"{row['calls']} unchecked calls of {row['agent']}/{row['tool']} (no arguments on the spans; "
                 f"{row['framework']} records them with {row['setting']})")
    extra = {"runs": sum(r.n for r in results), "unbound_runs": unbound, "unknown_cases": dict(unknown),
             "unread_spans": unread, "fragmented_spans": fragmented, "unchecked_calls": unchecked.rows(),
             "stitched_fragments": stitched, "unstitched_fragments": unstitched,
             "unbound": {"listed": unbound_runs, "not_listed": unbound + sum(unknown.values()) - len(unbound_runs)},
             "input": counts}
    doc = report.build(results, k=args.k, threshold=args.threshold, k_max=args.k_max,
                       show_arguments=args.show_arguments, extra_summary=extra, allow_empty=args.allow_empty)
    if not args.quiet:
        for empty_case in doc["summary"]["gate"]["cases_without_runs"]:
            _err(f"case {empty_case['id']}: {empty_case['reason']}"
                 + ("" if args.allow_empty else " (fails the gate; --allow-empty to accept)"))
    return doc
