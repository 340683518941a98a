"""``otel-agenteval check-policy FILE``: validate a policy and print every error with its path."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..policy.config_file import load_yaml, read_text, with_lines
from ..policy.policy import Policy, PolicyError

HELP = "Validate policy files; print every error with its path in the file (exit 2 on errors)."


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE", help="policy YAML files")
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format")


def load_policy(path: str | Path) -> Policy:
    """The policy in ``path``, its ``custom_rules`` imported: every command loads it this way, so a
    rule that cannot be imported is a :class:`PolicyError` naming the file and line, at start."""
    policy = Policy.from_file(path)
    if not policy.custom_rules:
        return policy
    from ..engine.dispatch import load_custom_rules

    try:
        load_custom_rules(policy)
    except PolicyError as exc:
        text, source = read_text(path, PolicyError)
        _, node = load_yaml(text, source, PolicyError)
        raise with_lines(PolicyError(source, exc.errors), node) from None
    return policy


def check(path: str) -> list[str]:
    """The errors of one policy file, ``[]`` if it is valid (custom rules are imported too)."""
    try:
        load_policy(path)
    except PolicyError as exc:
        return exc.errors
    return []


def run(args: argparse.Namespace) -> int:
    results = {path: check(path) for path in args.files}
    if args.format == "json":
        print(json.dumps({"files": [{"file": p, "valid": not e, "errors": e} for p, e in results.items()]},
                         indent=2))
    else:
        for path, errors in results.items():
            if errors:
                for e in errors:
                    print(f"{path}: {e}", file=sys.stderr)
            else:
                print(f"{path}: ok")
    return 2 if any(results.values()) else 0
