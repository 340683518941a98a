"""``otel-agenteval replay``: recorded traces through the engine; violations and a summary."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from ..metrics.blindspots import UncheckedTally, checked_tools
from ..model.summary import RunSummary
from ..model.violation import Violation
from ..policy.policy import Policy
from ..replay import replay
from ..replay.readers import InputError, RejectedInput
from .check_policy import load_policy

HELP = ("Replay recorded traces (OTLP JSON lines or documents, OTLP protobuf, SDK to_json; .gz ok) "
        "through the checks; print violations and a summary.")

EPILOG = """\
Formats are recognised by content. Files are streamed line by line (constant memory), except a
pretty-printed JSON list and a single protobuf message, which are read whole. Bad lines are
reported on stderr with file and line, counted and skipped (--strict: stop, exit 2).
Exit status: 0 ok, 1 a critical violation was found, 2 usage or input error, or no span could be
read from the input (empty, or every line rejected; --allow-empty: exit 0 then)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = EPILOG
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("traces", nargs="+", metavar="TRACES", help="trace files to replay, in order (- for standard input)")
    p.add_argument("--policy", help="policy YAML (default: none, writes inferred from tool names)")
    p.add_argument("--format", choices=("table", "json"), default="table", help="output format (default table)")
    p.add_argument("--strict", action="store_true", help="stop at the first bad line or span (exit 2)")
    p.add_argument("--allow-empty", action="store_true",
                   help="no span read from the input is not an error (default: exit 2, so a job pointed at the wrong file fails)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar, no rejected-line messages")
    p.add_argument("--verbose", "-v", action="store_true", help="also log each violation to stderr as found")
    from ..judging.offline import add_arguments as judge_arguments

    judge_arguments(p)


def run(args: argparse.Namespace) -> int:
    policy = load_policy(args.policy) if args.policy else Policy()  # a bad one raises: exit 2 (cli_errors)
    paths = [Path(t) for t in args.traces]
    for p in paths:
        if str(p) != "-" and not p.is_file():
            why = "no such file" if not p.exists() else "not a file"
            print(f"replay: {p}: {why}", file=sys.stderr)
            return 2
    from .demo import _configure_logging  # same logging as the demo: stderr, quiet unless -v

    _configure_logging(args.verbose)
    judging = None
    if args.judge:  # the policy's judge section, applied to the recorded runs (docs/judge.md)
        from ..judging.offline import OfflineJudging

        judging = OfflineJudging(policy, args.judge)
    summary = RunSummary(outcome_rule=bool(policy.outcome.success_when), priced=bool(policy.pricing))
    table = args.format == "table"
    shown: list[Violation] = []

    def found(v: Violation) -> None:
        summary.add_violation(v)
        if table:
            print(_violation_line(v))
        else:
            shown.append(v)

    progress = _Progress(paths, enabled=not args.quiet and sys.stderr.isatty())
    unchecked = UncheckedTally(checked_tools(policy.tools, policy.outcome.success_when))

    def on_reject(msg: str) -> None:
        if not args.quiet:
            progress.clear()
            print(f"replay: rejected: {msg}", file=sys.stderr)

    try:
        result = replay(paths, policy, strict=args.strict, on_reject=on_reject, keep=False, log_violations=args.verbose,
                        on_trajectory=[summary.add_trajectory, unchecked.finished, *([judging.sink.finished] if judging else [])],
                        on_violation=[found, *([judging.sink.violation] if judging else [])],
                        on_progress=progress.update if progress.enabled else None)
    except RejectedInput as exc:
        progress.clear()
        print(f"replay: {exc} (--strict: stopping)", file=sys.stderr)
        return 2
    except InputError as exc:
        progress.clear()
        print(f"replay: {exc}", file=sys.stderr)
        return 2
    finally:
        progress.clear()
        if judging is not None:
            judging.finish()
    counts = result.counts.as_dict()
    empty = no_spans_message(counts)
    if empty and not args.allow_empty:
        print(f"replay: {empty}", file=sys.stderr)
        return 2
    stats = result.engine_stats
    extra = {"trajectories": summary.runs, "late_spans": stats.get("late", 0),
             "evicted": sum(stats.get("evicted", {}).values()) - stats.get("evicted", {}).get("shutdown", 0),
             "unfinished": stats.get("evicted", {}).get("shutdown", 0)}
    unread = dict(sorted(stats.get("unread", {}).items()))  # scope -> spans that look like agent work, not read
    fragmented = dict(sorted(stats.get("fragmented", {}).items()))  # scope -> pieces of runs, a trace each
    stitched, unstitched = fragment_counts(stats)
    if table:
        if summary.violations:
            print()
        print(summary.render_table())
        print(_input_line(counts, extra))
        if unread:
            print("unread spans (look like agent work, read as nothing; by instrumentation scope): "
                  + ", ".join(f"{scope} {n}" for scope, n in unread.items()))
        if fragmented:
            print("fragmented spans (pieces of agent runs, each a trace of its own: the instrumentation does not "
                  "propagate context, no run can be assembled; by instrumentation scope): "
                  + ", ".join(f"{scope} {n}" for scope, n in fragmented.items()))
        if stitched:
            print("stitched fragments (pieces of runs, a trace each, put back together by their time windows; by "
                  "instrumentation scope): " + ", ".join(f"{scope} {n}" for scope, n in stitched.items()))
        if unstitched:
            print("unstitched fragments (pieces of runs left apart; by instrumentation scope and reason): "
                  + ", ".join(f"{scope} {reason} {n}" for scope, by in unstitched.items() for reason, n in by.items()))
        for row in unchecked.rows():
            print(f"unchecked calls: {row['agent']}/{row['tool']} {row['calls']} (no arguments on the spans; "
                  f"{row['framework']} records them with {row['setting']})")
        if judging is not None:
            judging.write(args.judgements, "table", sys.stdout)
    else:
        doc: dict[str, Any] = {"violations": [v.model_dump(mode="json") for v in shown],
                               "summary": summary.to_dict(), "input": {**counts, **extra},
                               "unread_spans": unread, "fragmented_spans": fragmented,
                               "stitched_fragments": stitched, "unstitched_fragments": unstitched,
                               "unchecked_calls": unchecked.rows()}
        if judging is not None:
            doc["judge"] = judging.write(args.judgements, "json", sys.stdout)
        print(json.dumps(doc, indent=2))
    return 1 if summary.critical else 0


def fragment_counts(stats: dict[str, Any]) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """Pieces of runs (a trace each) put back together, by scope; and left apart, by scope and reason."""
    unstitched: dict[str, dict[str, int]] = {}
    for (scope, reason), n in sorted(stats.get("fragments_unstitched", {}).items()):
        unstitched.setdefault(scope, {})[reason] = n
    return dict(sorted(stats.get("fragments_stitched", {}).items())), unstitched


def no_spans_message(counts: dict[str, int]) -> str | None:
    """Why nothing was read, when no span was: the job is pointed at the wrong input (``None`` otherwise)."""
    if counts["spans"]:
        return None
    def n(count: int, what: str) -> str:
        return f"{count} {what}{'s' if count != 1 else ''}"

    return (f"no span could be read from the input ({n(counts['files'], 'file')}, {n(counts['lines'], 'line')}, "
            f"{counts['rejected']} rejected): "
            "an empty file, the wrong file, or not OTLP (--allow-empty to accept)")


def _violation_line(v: Violation) -> str:
    tool = f" tool={v.tool}" if v.tool else ""
    span = f" span={v.span_id}" if v.span_id else ""
    return f"{v.severity.upper():8} {v.rule}  agent={v.agent}{tool} trace={v.trace_id}{span}  {v.message}"


def _input_line(c: dict[str, int], extra: dict[str, int]) -> str:
    def n(count: int, one: str, many: str) -> str:
        return f"{count} {one if count == 1 else many}"

    parts = [n(c["files"], "file", "files"), n(c["lines"], "line", "lines"), n(c["spans"], "span", "spans"),
             n(extra["trajectories"], "trajectory", "trajectories"), f"{c['rejected']} rejected",
             n(extra["late_spans"], "late span", "late spans")]
    if extra["evicted"]:
        parts.append(f"{extra['evicted']} evicted early")
    if extra["unfinished"]:
        parts.append(f"{extra['unfinished']} unfinished at end of input")
    return "input: " + ", ".join(parts)


class _Progress:
    """A one-line bar on stderr (only on a TTY): bytes read of all files, spans so far."""

    def __init__(self, paths: list[Path], enabled: bool) -> None:
        self.enabled = enabled
        self.sizes = {p: p.stat().st_size for p in paths if str(p) != "-"} if enabled else {}
        self.before = {}
        acc = 0
        for p, size in self.sizes.items():
            self.before[p] = acc
            acc += size
        self.total = max(1, acc)
        self.last = 0.0
        self.shown = False

    def update(self, path: Path, pos: int) -> None:
        now = time.monotonic()
        if now - self.last < 0.2:
            return
        self.last = now
        frac = min(1.0, (self.before.get(path, 0) + pos) / self.total)
        bar = "#" * int(frac * 30)
        sys.stderr.write(f"\rreplay [{bar:<30}] {frac:4.0%}  {path.name}")
        sys.stderr.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
            self.shown = False
