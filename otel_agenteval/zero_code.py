"""Zero-code attach: ``opentelemetry-instrument python app.py`` with ``OTEL_AGENTEVAL_POLICY`` set.

Loaded as an ``opentelemetry_instrumentor`` entry point, like every contrib instrumentation: the
auto-instrumentation loads *all* instrumentors, after the one distro and the one configurator
(whichever vendor's) have set the global providers, so this composes with any distro, and
``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=agenteval`` turns it off. A distro or configurator entry
point would not compose: only one of each is loaded per process.

Settings (environment):

- ``OTEL_AGENTEVAL_POLICY``: the policy file; unset, nothing is attached (installing the package
  changes no app by itself).
- ``OTEL_AGENTEVAL_METRICS_PORT`` (and ``OTEL_AGENTEVAL_METRICS_ADDR``, default 127.0.0.1):
  serve ``/metrics`` there.
- ``OTEL_AGENTEVAL_OTEL_METRICS=true``: record through the global MeterProvider too (what the
  configurator set from ``OTEL_METRICS_EXPORTER``).
- ``OTEL_AGENTEVAL_BACKGROUND=true``: check on a thread of its own (``background=True``).

Violations become ``gen_ai.evaluation.result`` log records when the policy says
``outputs.evaluation_events: true`` (through the LoggerProvider from ``OTEL_LOGS_EXPORTER``).
A bad setting or policy is one clear line on stderr and nothing attached: never an exception
into the app's start-up.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Collection
from typing import Any

from opentelemetry import trace
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

POLICY = "OTEL_AGENTEVAL_POLICY"
METRICS_PORT = "OTEL_AGENTEVAL_METRICS_PORT"
METRICS_ADDR = "OTEL_AGENTEVAL_METRICS_ADDR"
OTEL_METRICS = "OTEL_AGENTEVAL_OTEL_METRICS"
BACKGROUND = "OTEL_AGENTEVAL_BACKGROUND"
TRUE = ("1", "true", "yes", "on")


class AttachError(Exception):
    """A setting that stops the attach, with the setting's name in the message."""


class AgentEvalInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Adds a :class:`~otel_agenteval.TrajectoryProcessor` to the global TracerProvider."""

    processor: Any = None
    server: Any = None

    def instrumentation_dependencies(self) -> Collection[str]:
        return ()

    def _instrument(self, **kwargs: Any) -> None:
        if not os.environ.get(POLICY):
            return
        try:
            attach(os.environ)
        except AttachError as exc:
            print(f"otel-agenteval: not attached: {exc}", file=sys.stderr, flush=True)

    def _uninstrument(self, **kwargs: Any) -> None:
        detach()


def attach(env: Any) -> None:
    """The processor on the global provider and, if asked, ``/metrics``; raises :class:`AttachError`."""
    from .metrics.exposition import DEFAULT_ADDR, serve
    from .policy.policy import Policy, PolicyError
    from .processor import TrajectoryProcessor

    provider = trace.get_tracer_provider()
    if not hasattr(provider, "add_span_processor"):
        raise AttachError(f"the global TracerProvider is {type(provider).__name__}, not the SDK's "
                          "(is opentelemetry-distro or another configurator installed?)")
    port = _port(env.get(METRICS_PORT))
    try:
        policy = Policy.from_file(env[POLICY])
    except PolicyError as exc:
        raise AttachError(f"{POLICY}: " + "; ".join(line.strip() for line in str(exc).splitlines())) from None
    except OSError as exc:
        raise AttachError(f"{POLICY}={env[POLICY]}: {exc.strerror or exc}") from None
    meter_provider = None
    if env.get(OTEL_METRICS, "").lower() in TRUE:
        from opentelemetry.metrics import get_meter_provider

        meter_provider = get_meter_provider()
    processor = TrajectoryProcessor(policy, meter_provider=meter_provider,
                                    background=env.get(BACKGROUND, "").lower() in TRUE)
    if port is not None:
        try:
            AgentEvalInstrumentor.server = serve(port, env.get(METRICS_ADDR) or DEFAULT_ADDR)
        except OSError as exc:
            processor.shutdown()
            raise AttachError(f"{METRICS_PORT}={port}: {exc.strerror or exc}") from None
    provider.add_span_processor(processor)
    AgentEvalInstrumentor.processor = processor


def detach() -> None:
    if AgentEvalInstrumentor.server is not None:
        AgentEvalInstrumentor.server.close()
        AgentEvalInstrumentor.server = None
    if AgentEvalInstrumentor.processor is not None:
        AgentEvalInstrumentor.processor.shutdown()  # the SDK has no remove_span_processor: it stops checking
        AgentEvalInstrumentor.processor = None


def _port(value: str | None) -> int | None:
    if not value:
        return None
    try:
        port = int(value)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise AttachError(f"invalid {METRICS_PORT}: {value!r} (a port, 0..65535)")
    return port
