"""``otel-agenteval``: one entry point, one module per subcommand.

Each subcommand module defines ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int`` (the exit code). Exit codes: 0 ok, 1 findings (critical violations,
failed regression cases), 2 usage or input errors.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any

COMMANDS: dict[str, str] = {
    "demo": "otel_agenteval.demo",
    "replay": "otel_agenteval.replay.command",
    "score": "otel_agenteval.scoring.command",
    "check-policy": "otel_agenteval.check_policy",
    "init": "otel_agenteval.init_command",
    "serve": "otel_agenteval.receiver.command",
}


class _Version(argparse.Action):
    """``otel-agenteval 0.1.0 (compiled (mypyc))``: which build runs is looked up only when asked."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        from . import __version__
        from ._build import build_name

        print(f"{parser.prog} {__version__} ({build_name()})")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="otel-agenteval",
        description="Trajectory checks and metrics for AI agents, on OpenTelemetry traces.",
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and the build, and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                continue  # not built yet
            raise
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
