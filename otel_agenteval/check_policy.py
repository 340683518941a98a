"""``otel-agenteval check-policy FILE``: validate a policy and print every error with its path."""

from __future__ import annotations

import argparse
import json
import sys

from .policy import Policy, PolicyError

HELP = "Validate policy files; print every error with its path in the file (exit 2 on errors)."


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE", help="policy YAML files")
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format")


def check(path: str) -> list[str]:
    """The errors of one policy file, ``[]`` if it is valid (custom rules are imported too)."""
    try:
        policy = Policy.from_file(path)
    except PolicyError as exc:
        return exc.errors
    from .engine import load_custom_rules

    try:
        load_custom_rules(policy)
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
