"""Which build is running: the hot path compiled with mypyc (see setup.py), or plain Python."""

from __future__ import annotations

import importlib

# the modules setup.py compiles (it reads this list)
COMPILED_MODULES = (
    "engine",
    "routing",
    "store",
    "dispatch",
    "assemble",
    "finalise",
    "events",
    "sinks",
    "self_stats",
    "labels",
    "_threadstate",
    "extract",
    "spans",
    "span_values",
    "tool_steps",
    "trajectory",
    "steps",
    "arguments",
    "metrics",
    "blindspots",
    "_series",
    "confirmations",
    "guard",
    "guard_holds",
    "recovery",
    "_semconv",
    "replay.feed",
    "replay.live",
    "replay.readers",
    "replay.counts",
    "replay.protobuf",
    "replay.wire",
    "replay.wire_format",
    "scoring.score",
    "scoring.run_score",
    "scoring.match",
    "scoring.store",
    "scoring.report",
    "scoring.normalise",
    "scoring.bind",
    "scoring.transcript",
    "scoring.reliability",
)


def compiled_modules() -> list[str]:
    """The modules of :data:`COMPILED_MODULES` that were loaded from a compiled extension."""
    out = []
    for name in COMPILED_MODULES:
        path = getattr(importlib.import_module(f"otel_agenteval.{name}"), "__file__", "") or ""
        if not path.endswith(".py"):
            out.append(name)
    return out


def build_name() -> str:
    """``"compiled (mypyc)"``, ``"plain Python"``, or ``"partly compiled"`` for a broken build."""
    n = len(compiled_modules())
    if n == len(COMPILED_MODULES):
        return "compiled (mypyc)"
    return "plain Python" if n == 0 else "partly compiled"
