"""One exit-code rule for every command, in one place.

- 0: ok;
- 1: a finding: a critical violation, a failing gate (what a CI job fails on);
- 2: usage or input error: one line each, naming the file, line and field (or the flag);
- 3: an internal error (a bug: please report it); its traceback only with ``--debug``.

Commands return 0 or 1, or raise: :class:`UsageError`, or one of the input errors the loaders
already raise (a policy or cases file, a trace file, a mapping, a serve setting). ``cli.main``
turns every exception into its code and lines with :func:`exit_code`, so no command prints a
traceback or exits 1 for bad input. Settings in seconds are checked when parsed (:func:`seconds`).
"""

from __future__ import annotations

import argparse
import math
import sys
import traceback
from typing import TextIO

OK, FINDINGS, USAGE, INTERNAL = 0, 1, 2, 3


class UsageError(Exception):
    """Bad usage or input: ``lines`` are printed one each (each names its file, line, field or flag)."""

    def __init__(self, *lines: str) -> None:
        self.lines = [line for text in lines for line in str(text).splitlines() if line.strip()] or ["usage error"]
        super().__init__("\n".join(self.lines))


def _input_errors() -> tuple[type[BaseException], ...]:
    """The errors the loaders raise for bad input (imported when an error happens, not before)."""
    from ..policy.config_file import ConfigError
    from ..receiver.config import ConfigError as SettingError
    from ..replay.counts import InputError
    from ..scoring.bind import MappingError

    return UsageError, ConfigError, SettingError, InputError, MappingError


def error_lines(exc: BaseException) -> list[str]:
    """An input error as lines a person can act on: a config file's errors each on one line
    with the file's name, not a heading and an indented list."""
    from ..policy.config_file import ConfigError

    if isinstance(exc, UsageError):
        return exc.lines
    if isinstance(exc, ConfigError):
        return [f"{exc.source}: {exc.what}: {e}" for e in exc.errors] or [f"{exc.source}: {exc.what}"]
    return [line for line in str(exc).splitlines() if line.strip()] or [type(exc).__name__]


def exit_code(command: str, exc: BaseException, debug: bool = False, stream: TextIO | None = None) -> int:
    """Print ``exc`` for a person (``otel-agenteval COMMAND: ...``) and return its exit code."""
    out = stream if stream is not None else sys.stderr
    prefix = f"otel-agenteval {command}: " if command else "otel-agenteval: "
    if isinstance(exc, _input_errors()):
        if debug:
            traceback.print_exception(exc, file=out)
        for line in error_lines(exc):
            print(prefix + line, file=out)
        return USAGE
    if isinstance(exc, RecursionError):  # input nested past what any reader takes: still input
        if debug:
            traceback.print_exception(exc, file=out)
        print(prefix + "input nested too deeply to read", file=out)
        return USAGE
    if debug:
        traceback.print_exception(exc, file=out)
    where = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    at = f" at {where[0].filename.rsplit('/', 1)[-1]}:{where[0].lineno}" if where else ""
    print(f"{prefix}internal error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}{at} "
          "(a bug; please report it; --debug shows the traceback)", file=out)
    return INTERNAL


def fail(command: str, *lines: str) -> int:
    """Print usage or input error lines for ``command`` and return 2 (for commands that return codes)."""
    return exit_code(command, UsageError(*lines))


def seconds(text: str) -> float:
    """argparse type: a duration in seconds, finite and >= 0 (``nan``, ``inf``, ``-1`` are refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: seconds must be a finite number >= 0")
    return value


def port(text: str) -> int:
    """argparse type: a TCP port, 0..65535 (0 picks a free one)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text}: a port is 0..65535 (0 picks a free one)")
    return value


def positive_seconds(text: str) -> float:
    """argparse type: like :func:`seconds`, and > 0."""
    value = seconds(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"{text!r}: seconds must be > 0")
    return value


def non_negative(text: str) -> float:
    """argparse type: a finite number >= 0 (a rate, a count of seconds)."""
    value = finite(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be >= 0")
    return value


def finite(text: str) -> float:
    """argparse type: a finite number (``nan`` and ``inf`` are refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r}: must be a finite number")
    return value
