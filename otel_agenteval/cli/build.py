"""Which build is running: the hot path compiled with mypyc (see setup.py), or plain Python."""

from __future__ import annotations

import importlib

# the modules setup.py compiles (it reads this list)
COMPILED_MODULES = (  # by stage, as the package is laid out
    "model.arguments",
    "model.normalise",
    "model.recovery",
    "model.steps",
    "model.trajectory",
    "reading.confirmations",
    "reading.extract",
    "reading.labels",
    "reading.provenance.identifiers",
    "reading.provenance.tokens",
    "reading.semconv",
    "reading.span_values",
    "reading.spans",
    "reading.tool_steps",
    "rules.taint_flow",
    "engine.assemble",
    "engine.dispatch",
    "engine.engine",
    "engine.events",
    "engine.finalise",
    "engine.routing",
    "engine.self_stats",
    "engine.sinks",
    "engine.store",
    "engine.threadstate",
    "metrics.blindspots",
    "metrics.prometheus",
    "metrics.series",
    "guard.decision",
    "guard.guard",
    "guard.holds",
    "guard.plan",
    "replay.counts",
    "replay.feed",
    "replay.formats.protobuf",
    "replay.formats.wire",
    "replay.formats.wire_format",
    "replay.live",
    "replay.readers",
    "replay.tree",
    "scoring.bind",
    "scoring.match",
    "scoring.reliability",
    "scoring.report.document",
    "scoring.run_score",
    "scoring.score",
    "scoring.store",
    "scoring.transcript",
)

# What setup.py adds to Python's own C flags on GCC and clang: the group module exports its init
# function only, so its functions call one another directly, not through the PLT (processor /
# floor 0.03 lower, benchmarks/README.md).
NATIVE_FLAGS = ("-fvisibility=hidden",)


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
