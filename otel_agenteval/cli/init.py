"""``otel-agenteval init --from TRACES -o agenteval.yaml``: a starter policy from recorded runs.

Reads the traces with replay's readers (every format ``replay`` reads) through the same
engine, then writes :mod:`.starter_policy`'s commented YAML. An existing policy is merged:
its values are kept, what the traces add is added, and the file before is kept as ``FILE.bak``;
``--force`` starts over. Exit codes: 0 ok, 2 usage or input error (one line naming the file).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

HELP = "Write a commented starter policy from recorded traces (tools, inferred writes, agents, budgets)."


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = ("Re-running on more traces merges into the existing file (its values win; the previous file "
                "is kept as FILE.bak). Exit codes: 0 ok, 2 usage or input error.")
    p.add_argument("--from", dest="traces", nargs="+", required=True, metavar="TRACES",
                   help="recorded traces, any format replay reads (.gz ok)")
    p.add_argument("-o", "--output", default="agenteval.yaml", metavar="FILE",
                   help="policy file to write (default agenteval.yaml; - for standard output)")
    p.add_argument("--force", action="store_true", help="overwrite FILE from these traces alone, dropping its edits")


def _fail(message: str) -> int:
    print(f"otel-agenteval init: {message}", file=sys.stderr)
    return 2


def _existing(path: Path) -> dict[str, Any]:
    """The policy already at ``path`` as data (validated: a broken one is not merged into)."""
    import yaml

    from ..policy.policy import Policy

    text = path.read_text(encoding="utf-8")
    Policy.from_yaml(text, str(path))
    data = yaml.safe_load(text)
    return data if isinstance(data, dict) else {}


def _agreements(traces: list[str], existing: dict[str, Any], seen: Any) -> None:
    """Read each write the runs made against their conversation (a second pass, with every write
    requiring a confirmation whose key values are inferred by type), into ``seen.agreements``:
    the calls the user said yes to a proposal for, and the key arguments those proposals showed."""
    from ..policy.policy import Policy
    from ..policy.starter import AgreementSeen
    from ..reading.dialogue.values import key_values, looks_like_handle
    from ..replay import replay

    base = Policy.from_dict(existing, "policy") if existing else Policy()
    have = existing.get("tools") or {}
    writes = [t for t in seen.tools if t not in have and base.is_write(t)]
    if not writes or "-" in traces:
        return
    probe = dict(existing)
    probe["tools"] = {**have, **{t: {"write": True, "requires_confirmation": True} for t in writes}}
    probe.pop("custom_rules", None)
    missing: dict[str, dict[str, Any]] = {}
    steps: list[Any] = []

    def found(v: Any) -> None:
        if v.rule == "write_without_confirmation" and v.span_id is not None:
            missing[v.span_id] = dict(v.details)

    def done(t: Any) -> None:
        steps.extend(s for s in t.steps if s.tool in probe["tools"] and s.tool in writes)

    replay(traces, Policy.from_dict(probe, "probe"), on_reject=lambda m: None, keep=False,
           on_trajectory=[done], on_violation=[found])
    for s in steps:
        why = missing.get(format(s.span_id, "016x"), {})
        if why.get("reason") == "no_messages":
            continue
        a = seen.agreements.setdefault(s.tool, AgreementSeen())
        a.calls += 1
        shown = {p for p, v in key_values(s.arguments, None) if not looks_like_handle(v)} - set(why.get("not_shown", ()))
        if why.get("reason") is None or (shown and why.get("reason") == "not_shown"):  # a yes to a proposal of it
            a.agreed += 1
            for path in shown:
                a.shown[path] = a.shown.get(path, 0) + 1


def run(args: argparse.Namespace) -> int:
    from ..policy.policy import Policy, PolicyError
    from ..policy.starter import Observed, render
    from ..replay import replay
    from ..replay.readers import InputError, RejectedInput
    from .replay import no_spans_message

    out = Path(args.output)
    to_stdout = args.output == "-"
    existing: dict[str, Any] = {}
    if not to_stdout and out.exists() and not args.force:
        try:
            existing = _existing(out)
        except PolicyError as exc:
            first = exc.errors[0] if exc.errors else "invalid"
            return _fail(f"{out}: not merged into, it is not a valid policy ({first}); fix it or use --force")
        except (OSError, UnicodeDecodeError) as exc:
            return _fail(f"{out}: cannot read: {getattr(exc, 'strerror', None) or exc}")
    for t in args.traces:
        if t != "-" and not Path(t).is_file():
            return _fail(f"{t}: {'no such file' if not Path(t).exists() else 'not a file'}")
    policy = Policy.from_dict(existing, str(out)) if existing else Policy()  # its prices price the runs
    seen = Observed()
    rejected: list[str] = []
    try:
        result = replay(args.traces, policy, on_reject=rejected.append, keep=False, log_violations=False,
                        on_trajectory=[seen])
    except (InputError, RejectedInput) as exc:
        return _fail(str(exc))
    empty = no_spans_message(result.counts.as_dict())
    if empty:
        return _fail(f"{', '.join(args.traces)}: {empty.split(' (--allow-empty')[0]}")
    if not seen.runs:
        return _fail(f"{', '.join(args.traces)}: spans read, but no agent run in them (no tool or model spans)")
    if not rejected:
        _agreements(args.traces, existing, seen)
    text, added = render(seen, existing, ", ".join(os.path.basename(t) for t in args.traces))
    try:
        Policy.from_yaml(text, str(out))  # what check-policy will say
    except PolicyError as exc:  # a bug here, not the user's: say what and stop before writing
        return _fail(f"{out}: the starter policy would not validate: {exc}")
    if to_stdout:
        sys.stdout.write(text)
        return 0
    if existing and not added:
        print(f"{out}: nothing new in {result.counts.spans} spans ({seen.runs} runs); left as it is")
        return 0
    try:
        if existing:
            out.replace(out.with_name(out.name + ".bak"))
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        return _fail(f"{out}: cannot write: {exc.strerror or exc}")
    what = "merged into" if existing else "wrote"
    print(f"{what} {out} from {seen.runs} runs ({len(seen.tools)} tools, {len(seen.agents)} agents)"
          + (f"; previous file kept as {out.name}.bak" if existing else ""))
    if existing:
        for line in added:
            print(f"  added {line}")
    if rejected:
        print(f"  {len(rejected)} records rejected (replay {' '.join(args.traces)} shows them)", file=sys.stderr)
    print(f"next: otel-agenteval check-policy {out}")
    return 0
