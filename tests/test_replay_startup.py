"""Commands other than ``serve`` do not load the servers: the CLI builds every subcommand's parser,
and the receiver's listeners (uvicorn, grpcio, protobuf's service stubs) cost ~15 MB and a
slower GC in ``replay``/``score`` if imported (issue 11's replay regression)."""

from __future__ import annotations

import json
import subprocess
import sys

SERVERS = ("grpc", "uvicorn", "otel_agenteval.receiver.server", "opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc")


def test_the_cli_loads_no_server_until_serve_runs() -> None:
    code = ("import json, sys; from otel_agenteval.cli.main import build_parser; build_parser();"
            f"print(json.dumps([m for m in {SERVERS!r} if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_the_receiver_is_still_imported_by_name() -> None:
    from otel_agenteval.receiver import Receiver
    from otel_agenteval.receiver.server import Receiver as Direct

    assert Receiver is Direct
