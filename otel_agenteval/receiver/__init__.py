"""The collector-side front door: ``otel-agenteval serve`` receives OTLP and feeds the one engine.

::

    from otel_agenteval.receiver import Receiver, ServeConfig

    with Receiver(ServeConfig(grpc_port=0, http_port=0, metrics_port=0), policy) as r:
        r.ports.http  # OTLP/HTTP, POST /v1/traces
        r.ports.grpc  # OTLP/gRPC, TraceService/Export
        r.ports.metrics  # /metrics, /healthz, /readyz

Modules: :mod:`.config` (settings), :mod:`.compression` (gzip/deflate bodies, inflated with a
bound), :mod:`.decoding` (request bodies through replay's decoder), :mod:`.memory` and
:mod:`.malloc` (one memory budget in bytes), :mod:`.pipeline` (bounded ingest queue, the engine fed
by one thread at a time), :mod:`.wal` and :mod:`.durability` (the write-ahead log, ``--wal-dir``),
:mod:`.listeners` (the OTLP/HTTP and OTLP/gRPC listeners, the ops endpoints, connection limits,
the event loop), :mod:`.server` (start/stop in order); the ``serve`` command is ``cli/serve.py``.
Trace completion (grace period after the root, idle timeout) is
:class:`otel_agenteval.replay.live.LiveFeeder`.

A front door: imports ``replay``, ``metrics`` and the stages below; imported by ``cli``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .config import ConfigError, ServeConfig

if TYPE_CHECKING:
    from .server import Receiver

__all__ = ["ConfigError", "Receiver", "ServeConfig"]


def __getattr__(name: str) -> Any:
    # imported when first asked for: the CLI imports this package for every command, and the
    # servers (uvicorn, grpcio, protobuf: ~160 modules, ~15 MB) are for ``serve`` alone
    if name == "Receiver":
        from .server import Receiver

        return Receiver
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
