"""``otel-agenteval``: one entry point, one module per subcommand.

Each subcommand module defines ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int`` (0 or 1). Bad usage or input is raised, and turned into its exit code and
one line each here: the rule is in :mod:`.cli_errors` (0 ok, 1 findings, 2 usage or input
error, 3 internal error; tracebacks only with ``--debug``).
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from .errors import OK, USAGE, exit_code

COMMANDS: dict[str, str] = {
    "demo": "otel_agenteval.cli.demo",
    "replay": "otel_agenteval.cli.replay",
    "score": "otel_agenteval.cli.score",
    "check-policy": "otel_agenteval.cli.check_policy",
    "init": "otel_agenteval.cli.init",
    "serve": "otel_agenteval.cli.serve",
    "agreement": "otel_agenteval.judging.agreement_command",  # the judge's command lives with the judge
}


class _Version(argparse.Action):
    """``otel-agenteval 0.1.0 (compiled (mypyc))``: which build runs is looked up only when asked."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        from .. import __version__
        from .build import build_name

        print(f"{parser.prog} {__version__} ({build_name()})")
        parser.exit()


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line (``otel-agenteval serve: argument --grace: ...``), exit 2."""

    def error(self, message: str) -> NoReturn:
        message = re.sub(r"^argument ([^:/\s]+)(?:/\S+)?: ", r"invalid \1: ", message)  # as serve's own checks say it
        print(f"{self.prog}: {message} (--help for usage)", file=sys.stderr)
        self.exit(USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="otel-agenteval",
        description="Trajectory checks and metrics for AI agents, on OpenTelemetry traces.",
        epilog="Exit status (every command): 0 ok, 1 a finding (a critical violation, a failing gate), "
               "2 usage or input error (one line naming the file, line and field), 3 internal error.",
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and the build, and exit")
    parser.add_argument("--debug", action="store_true", help="show Python tracebacks (errors are one line otherwise)")
    debug = _Parser(add_help=False)
    debug.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="show Python tracebacks (errors are one line otherwise)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, module_name in COMMANDS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                continue  # not built yet
            raise
        p = sub.add_parser(name, help=module.HELP, description=module.HELP, parents=[debug])
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help(sys.stderr)
        return USAGE
    try:
        return int(args._run(args) or OK)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return OK
    except Exception as exc:  # noqa: BLE001 (the one place a command's error becomes its exit code)
        return exit_code(args.command, exc, debug=args.debug)


if __name__ == "__main__":
    sys.exit(main())
