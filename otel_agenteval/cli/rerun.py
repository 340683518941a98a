"""``otel-agenteval rerun``: a candidate agent on recorded conversations, observations served back."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..policy.policy import Policy
from .check_policy import load_policy
from .errors import UsageError, seconds

HELP = "Rerun a candidate agent on recorded conversations (tool results served from the recording); report divergence."

EPILOG = """\
The agent is MODULE:CALLABLE, called as agent(turn, tools) for each recorded user turn in order:
turn.text is the user's message, tools.call(name, arguments) answers from the recording (the same
tool with the same normalised arguments, in order), or raises the recorded error. No tool runs.
The first call the recording cannot answer is the divergence: --on-divergence stop (default) ends
the conversation there; stub answers it and later ones from the --stubs module's functions
(tool_name(**arguments), or default(tool, arguments)), marked as stubbed.
Exit status: 0 ok, 1 the candidate adds a critical violation, 2 usage or input error."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = EPILOG
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("traces", nargs="+", metavar="TRACES", help="recorded trace files (any format replay reads)")
    p.add_argument("--agent", required=True, metavar="MODULE:CALLABLE", help="the candidate agent")
    p.add_argument("--policy", help="policy YAML: which tools write, which rules run, prices (default: none)")
    p.add_argument("--on-divergence", choices=("stop", "stub"), default="stop",
                   help="at the first call the recording cannot answer: stop (default) or stub")
    p.add_argument("--stubs", metavar="MODULE", help="stub functions for --on-divergence stub")
    p.add_argument("--jobs", "-j", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--timeout", type=seconds, default=60.0, help="seconds per conversation (default 60)")
    p.add_argument("--max-steps", type=int, default=50, help="tool calls per turn before it counts as a loop (default 50)")
    p.add_argument("--traces-out", metavar="FILE", help="write the candidate's spans as OTLP JSON lines (.gz ok)")
    p.add_argument("--format", choices=("table", "json", "html"), default="table", help="report format")
    p.add_argument("--output", "-o", metavar="FILE", help="write the report here instead of standard output")
    p.add_argument("--show-arguments", action="store_true", help="show argument values in the report (default: their names and a hash)")
    p.add_argument("--verbose", "-v", action="count", default=0, help="table: every conversation (-vv: log violations)")


def run(args: argparse.Namespace) -> int:
    from ..rerun import AgentError, rerun
    from ..rerun.report import summarise, write_table
    from .demo import _configure_logging  # same logging as demo, replay and score: quiet unless -vv

    _configure_logging(args.verbose > 1)
    if args.on_divergence == "stub" and not args.stubs:
        raise UsageError("invalid --stubs: --on-divergence stub needs a module of stub functions")
    if args.jobs < 1 or args.max_steps < 1:
        raise UsageError("invalid --jobs/--max-steps: must be >= 1")
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # MODULE as a user runs it, from the project's folder
    policy: Policy | None = load_policy(args.policy) if args.policy else None
    try:
        result = rerun(args.traces, args.agent, policy=policy, on_divergence=args.on_divergence, stubs=args.stubs,
                       jobs=args.jobs, max_steps=args.max_steps, timeout_s=args.timeout, traces_out=args.traces_out,
                       policy_file=args.policy)
    except AgentError as exc:
        raise UsageError(str(exc)) from None
    if result.recorded == 0:
        raise UsageError(f"no agent run could be read from {', '.join(args.traces)}")
    doc = summarise(result, show_arguments=args.show_arguments)
    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout  # noqa: SIM115
    try:
        if args.format == "json":
            json.dump(doc, out, indent=2, default=str)
            out.write("\n")
        elif args.format == "html":
            from ..rerun.html import write_html

            write_html(doc, out, show_arguments=args.show_arguments)
        else:
            write_table(doc, out, verbose=args.verbose > 0, show_arguments=args.show_arguments)
    finally:
        if args.output:
            out.close()
    return 1 if doc["summary"]["critical_added"] else 0
