"""``otel-agenteval serve`` throughput: spans/s over OTLP/HTTP protobuf and OTLP/gRPC, end to end.

The client (this process) records the processor benchmark's workload (``--workload``, default the
spans of a real pydantic-ai run, 14 per run) once through the SDK, encodes it as the SDK's OTLP
exporters do (``--batch`` spans per request, 512 like ``BatchSpanProcessor``), and before each
round re-keys the trace ids so every round is new traces. The server is ``otel-agenteval serve``
in its own process (``--grace 0.2``: a trace plays 0.2 s after its root arrives). A round is timed
from the first request to the moment the server's ``agenteval_spans_total`` counts every span
sent (or as late), so the figure is received, decoded, queued, assembled, checked and counted. Reported per
round: wall spans/s, spans per second of the server's CPU time (user+sys, all its threads: the
"per core" figure), and the server's peak RSS; with the median and spread over ``--rounds``.

Baseline, measured in the same run: the same request bodies decoded and fed to a fresh engine
in this process with no network (``decode + engine``); the served figure is given as a ratio.
``--against DIR`` runs a second ``serve`` from another checkout's build beside this one, the two
taking rounds in turn (who goes first alternates), and reports the ratio round by round: the
A/B for a change, on a machine too noisy to compare separate runs. ``--readers c,python,upb`` does
the same for protobuf's readers in this build: one ``serve`` per reader
(``OTEL_AGENTEVAL_WIRE_READER``), rounds rotated, each reported against the first.

    .venv/bin/python benchmarks/serve_throughput.py [--rounds 5] [--spans 60000] [--against DIR]
        [--readers c,python,upb] [--json]
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _workloads import make_workload  # noqa: E402
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

CONVERSATION = "gen_ai.conversation.id"
EXPORT_PATH = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
POLICY_FILE = Path(tempfile.gettempdir()) / f"agenteval-serve-bench-{os.getpid()}.yaml"
# the processor benchmark's policy (_workloads.POLICY), as the file serve reads
POLICY = """\
tools: {create_claim: {write: true}}
agents: {"*": {budget: {max_steps: 40, max_llm_calls: 20, max_tokens: 200000, max_cost_usd: 5.0, max_duration_s: 600}}}
pricing: {gpt-4o: {input_per_mtok: 2.5, output_per_mtok: 10.0}}
outcome: {success_when: [create_claim]}
"""


def record(workload_name: str, runs: int) -> list[Any]:
    workload = make_workload(workload_name)
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "bench-support"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("bench")
    for item in workload.prepare(range(runs)):
        workload.emit(tracer, item)
    provider.shutdown()
    return list(memory.get_finished_spans())


def requests_of(spans: list[Any], batch: int) -> list[ExportTraceServiceRequest]:
    return [encode_spans(spans[i:i + batch]) for i in range(0, len(spans), batch)]


def rekeyed(template: list[ExportTraceServiceRequest], copies: int, round_no: int) -> list[bytes]:
    """``copies`` of the requests, each copy new runs: new trace ids (first 4 bytes: round and
    copy) and new conversation ids, as the processor benchmark makes every run new (a reused
    conversation would grow without end and see every copy's writes as repeats)."""
    out = []
    for c in range(copies):
        prefix = ((round_no << 16) | c).to_bytes(4, "big")
        suffix = f"-{round_no}.{c}"
        for req in template:
            r = ExportTraceServiceRequest()
            r.CopyFrom(req)
            for rs in r.resource_spans:
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        s.trace_id = prefix + s.trace_id[4:]
                        for kv in s.attributes:
                            if kv.key == CONVERSATION:
                                kv.value.string_value += suffix
            out.append(r.SerializeToString())
    return out


def spans_counted(metrics_port: int) -> tuple[float, float]:
    """(spans the engine saw, spans late: after their trace was played) on the server."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    lines = text.splitlines()
    seen = sum(float(x.rsplit(" ", 1)[1]) for x in lines if x.startswith("agenteval_spans_total{"))
    late = sum(float(x.rsplit(" ", 1)[1]) for x in lines if x.startswith("agenteval_late_spans_total "))
    return seen, late


def proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


class Sending:
    """A round's request bodies, handed to the client threads one at a time, and how many
    requests the server throttled (asked to retry later)."""

    def __init__(self, bodies: list[bytes]) -> None:
        self._bodies = iter(bodies)
        self._lock = threading.Lock()
        self.throttled = 0

    def next_body(self) -> bytes | None:
        with self._lock:
            return next(self._bodies, None)

    def throttle(self, pause_s: float) -> None:
        with self._lock:
            self.throttled += 1
        time.sleep(pause_s)

    def run(self, worker: Any, threads: int) -> int:
        """``worker`` on ``threads`` threads until every body is sent; the requests throttled."""
        ts = [threading.Thread(target=worker) for _ in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return self.throttled


def send_http(port: int, bodies: list[bytes], threads: int, compression: str = "none") -> int:
    headers = {"Content-Type": "application/x-protobuf"}
    if compression == "gzip":  # the bodies are compressed already (untimed)
        headers["Content-Encoding"] = "gzip"
    sending = Sending(bodies)

    def worker() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        while (body := sending.next_body()) is not None:
            while True:
                conn.request("POST", "/v1/traces", body, headers)
                resp = conn.getresponse()
                resp.read()
                if resp.status == 200:
                    break
                if resp.status in (429, 503):
                    sending.throttle(float(resp.getheader("retry-after") or 1) / 10)
                    continue
                raise SystemExit(f"server answered {resp.status}")
        conn.close()

    return sending.run(worker, threads)


def send_grpc(port: int, bodies: list[bytes], threads: int, compression: str = "none") -> int:
    import grpc

    channel = grpc.insecure_channel(f"127.0.0.1:{port}", compression=grpc.Compression.Gzip
                                    if compression == "gzip" else grpc.Compression.NoCompression)
    export = channel.unary_unary(EXPORT_PATH, request_serializer=None, response_deserializer=None)
    sending = Sending(bodies)

    def worker() -> None:
        while (body := sending.next_body()) is not None:
            while True:
                try:
                    export(body, timeout=60)
                    break
                except grpc.RpcError as exc:
                    if exc.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                        raise
                    sending.throttle(0.1)

    throttled = sending.run(worker, threads)
    channel.close()
    return throttled



def send_grpc_gzipped(port: int, bodies: list[bytes], threads: int) -> int:
    """gRPC requests whose messages were gzipped before the round, as an OTel Collector sends them
    (it compresses on its own cores). grpcio cannot send a message compressed ahead of time: its
    channel compresses each message in this process, which then sends slower than ``serve`` reads,
    and a server that waits between requests spends more CPU on each. So this is a minimal gRPC
    client on HTTP/2 (h2): one unary call at a time per connection, flow control respected."""
    import socket

    from h2.config import H2Configuration
    from h2.connection import H2Connection
    from h2.events import DataReceived, ResponseReceived, StreamEnded, TrailersReceived

    sending = Sending(bodies)

    def call(sock: socket.socket, conn: H2Connection, body: bytes) -> str:
        sid = conn.get_next_available_stream_id()
        conn.send_headers(sid, [(":method", "POST"), (":scheme", "http"), (":path", EXPORT_PATH),
                                (":authority", f"127.0.0.1:{port}"), ("content-type", "application/grpc"),
                                ("te", "trailers"), ("grpc-encoding", "gzip"), ("grpc-accept-encoding", "gzip")])
        message = b"\x01" + len(body).to_bytes(4, "big") + body  # compressed flag, length, message
        sent, status = 0, None
        while status is None:
            window = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
            if sent < len(message) and window > 0:
                chunk = message[sent:sent + window]
                sent += len(chunk)
                conn.send_data(sid, chunk, end_stream=sent == len(message))
                sock.sendall(conn.data_to_send())
                continue
            data = sock.recv(1 << 16)
            if not data:
                raise SystemExit("server closed the connection")
            for event in conn.receive_data(data):
                if isinstance(event, DataReceived):
                    conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                elif isinstance(event, (ResponseReceived, TrailersReceived)):
                    status = dict(event.headers).get(b"grpc-status", status)
                elif isinstance(event, StreamEnded) and status is None:
                    raise SystemExit("stream ended without a grpc-status")
            sock.sendall(conn.data_to_send())
        return status.decode()

    def worker() -> None:
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = H2Connection(H2Configuration(client_side=True))
        conn.initiate_connection()
        sock.sendall(conn.data_to_send())
        while (body := sending.next_body()) is not None:
            while (status := call(sock, conn, body)) != "0":
                if status != "8":  # RESOURCE_EXHAUSTED: retry after a pause
                    raise SystemExit(f"server answered grpc-status {status}")
                sending.throttle(0.1)
        sock.close()

    return sending.run(worker, threads)


def baseline(bodies: list[bytes]) -> float:
    """decode + engine in this process, no network: spans/s (CPU time of this thread)."""
    from prometheus_client import CollectorRegistry

    from otel_agenteval import Policy
    from otel_agenteval.engine.engine import Engine
    from otel_agenteval.metrics.prometheus import Metrics
    from otel_agenteval.receiver.decoding import from_protobuf
    from otel_agenteval.replay.live import LiveFeeder

    policy = Policy.from_yaml(POLICY, "<bench>")
    metrics = Metrics(CollectorRegistry(), policy.tools, policy.limits.max_tool_labels)
    engine = Engine(policy, on_violation=(metrics.violation,), on_finish=(metrics.finished,), log_violations=False,
                    one_caller=True)  # as serve's consumer thread
    feeder = LiveFeeder(engine, 1_000_000, grace_s=0.0, idle_s=60.0)
    n = 0
    t0 = time.thread_time()
    for body in bodies:
        spans = from_protobuf(body).spans
        n += len(spans)
        feeder.hold(spans)
        feeder.tick()
    feeder.close_held()
    return n / (time.thread_time() - t0)


def start_server(grace: float, pythonpath: str | None,
                 reader: str | None = None) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    """``serve`` in its own process; ``pythonpath``: run another checkout's build (``--against``);
    ``reader``: protobuf's reader (``--readers``)."""
    cmd = [sys.executable, "-m", "otel_agenteval", "serve", "--policy", str(POLICY_FILE), "--grpc-port", "0",
           "--http-port", "0", "--metrics-port", "0", "--grace", str(grace), "--queue-spans", "200000",
           "--max-held-spans", "1000000", "--no-log-violations"]
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    if reader is not None:
        env["OTEL_AGENTEVAL_WIRE_READER"] = reader
    # -m puts the working directory first on sys.path: the other checkout's, so its build runs
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env, cwd=pythonpath)
    assert server.stdout is not None
    return server, json.loads(server.stdout.readline())


def one_round(server: subprocess.Popen[str], info: dict[str, Any], protocol: str, bodies: list[bytes],
              threads: int, spans: int, counted: int, compression: str = "none",
              grpc_client: str = "h2") -> dict[str, Any]:
    """Send ``bodies`` (``spans`` spans); done when the server has counted ``counted`` spans in all
    (or as late)."""
    cpu0 = proc_cpu(server.pid)
    t0 = time.perf_counter()
    if protocol == "http":
        throttled = send_http(info["http_port"], bodies, threads, compression)
    elif compression == "gzip" and grpc_client == "h2":
        throttled = send_grpc_gzipped(info["grpc_port"], bodies, threads)
    else:
        throttled = send_grpc(info["grpc_port"], bodies, threads, compression)
    while sum(spans_counted(info["metrics_port"])) < counted:
        time.sleep(0.1)  # a scrape costs the server ~3 ms of CPU: not too often
    wall = time.perf_counter() - t0
    cpu = proc_cpu(server.pid) - cpu0
    late = spans_counted(info["metrics_port"])[1]
    return {"spans_per_s": spans / wall, "spans_per_cpu_s": spans / cpu, "late_total": late,
            "server_cpu_share": cpu / wall, "throttled_requests": throttled}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--spans", type=int, default=60_000, help="spans per round (rounded to whole copies)")
    ap.add_argument("--runs", type=int, default=500, help="distinct runs recorded (then re-keyed)")
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--threads", type=int, default=2, help="client connections")
    ap.add_argument("--workload", default="pydantic-ai", choices=["pydantic-ai", "tool-heavy", "lean"])
    ap.add_argument("--protocol", default="http,grpc")
    ap.add_argument("--grace", type=float, default=0.2,
                    help="serve --grace: client threads can deliver a trace's batches out of order")
    ap.add_argument("--against", metavar="DIR",
                    help="another checkout with its build (make build there): its serve runs beside this one, "
                         "the two alternating round by round; reported: this / that spans per server CPU second")
    ap.add_argument("--readers", metavar="LIST",
                    help="protobuf readers of this build, one serve each, rounds rotated (c, python, upb: "
                         "OTEL_AGENTEVAL_WIRE_READER); reported: each against the first, per server CPU second")
    ap.add_argument("--compression", default="none", choices=["none", "gzip"],
                    help="how the client compresses requests: gzip is the OTel Collector's otlp exporter default "
                         "(and so the loadbalancing exporter's)")
    ap.add_argument("--grpc-client", default="h2", choices=["h2", "grpcio"],
                    help="with --compression gzip over gRPC: h2 sends messages gzipped before the round (as a "
                         "Collector sends them, compressed on its own cores); grpcio compresses each in its "
                         "channel, in this process, and sends slower than serve reads")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    spans = record(args.workload, args.runs)
    template = requests_of(spans, args.batch)
    copies = max(1, round(args.spans / len(spans)))
    per_round = copies * len(spans)
    POLICY_FILE.write_text(POLICY)
    sample = rekeyed(template, copies, 0xFFFF)
    base = [baseline(sample) for _ in range(max(1, min(args.rounds, 3)))]
    del sample
    results: dict[str, Any] = {"workload": args.workload, "spans_per_round": per_round, "batch": args.batch,
                               "request_bytes_mean": None, "baseline_decode_engine_spans_per_s": base}
    readers = args.readers.split(",") if args.readers else [None]
    for protocol in args.protocol.split(","):
        servers = [start_server(args.grace, None, reader) for reader in readers]
        if args.against:
            servers.append(start_server(args.grace, args.against))
        try:
            rows: list[list[dict[str, Any]]] = [[] for _ in servers]
            for r in range(args.rounds):
                turn = r % len(servers)  # who goes first rotates; every other round the order reverses
                order = list(range(len(servers)))[turn:] + list(range(len(servers)))[:turn]
                for k, which in enumerate(order if r % 2 == 0 else order[::-1]):
                    server, info = servers[which]
                    bodies = rekeyed(template, copies, len(servers) * r + k)
                    if args.compression == "gzip" and (protocol == "http" or args.grpc_client == "h2"):
                        bodies = [gzip.compress(b, compresslevel=6) for b in bodies]  # Go's default level
                    results["request_bytes_mean"] = sum(map(len, bodies)) / len(bodies)
                    rows[which].append(one_round(server, info, protocol, bodies, args.threads, per_round,
                                                 per_round * (r + 1), args.compression, args.grpc_client))
                    del bodies
            results[protocol] = {"reader": readers[0], "rounds": rows[0],
                                 "peak_rss_mb": peak_rss(servers[0][0].pid) / 2**20}
            if args.against:
                results[protocol]["against"] = {"tree": args.against, "rounds": rows[-1],
                                                "ratios": [a["spans_per_cpu_s"] / b["spans_per_cpu_s"]
                                                           for a, b in zip(rows[0], rows[-1])]}
            if len(readers) > 1:
                results[protocol]["readers"] = {
                    reader: {"rounds": got, "peak_rss_mb": peak_rss(servers[k][0].pid) / 2**20,
                             "ratios": [a["spans_per_cpu_s"] / b["spans_per_cpu_s"] for a, b in zip(rows[0], got)]}
                    for k, (reader, got) in enumerate(zip(readers, rows)) if k > 0}
        finally:
            for server, _ in servers:
                server.terminate()
                server.wait(60)
    POLICY_FILE.unlink(missing_ok=True)
    med_base = statistics.median(base)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"workload {args.workload}: {per_round} spans a round, {args.batch} spans a request "
          f"(~{results['request_bytes_mean'] / 1024:.0f} KiB, compression {args.compression}), {args.rounds} rounds")
    print(f"baseline decode + engine, in process: {med_base:,.0f} spans/s of CPU "
          f"(runs {', '.join(f'{b:,.0f}' for b in base)})")
    for protocol in args.protocol.split(","):
        rows = results[protocol]["rounds"]
        wall = [r["spans_per_s"] for r in rows]
        cpu = [r["spans_per_cpu_s"] for r in rows]
        print(f"{protocol:5s} {'reader ' + readers[0] + ': ' if readers[0] else ''}wall {statistics.median(wall):,.0f} spans/s ({min(wall):,.0f}-{max(wall):,.0f}); "
              f"per server CPU second {statistics.median(cpu):,.0f} ({min(cpu):,.0f}-{max(cpu):,.0f}), "
              f"{statistics.median(cpu) / med_base:.2f}x the baseline; peak RSS "
              f"{results[protocol]['peak_rss_mb']:.0f} MB; throttled requests "
              f"{sum(r['throttled_requests'] for r in rows)}; late spans {rows[-1]['late_total']:.0f}")
        for reader, got in results[protocol].get("readers", {}).items():
            ratios, theirs = got["ratios"], [r["spans_per_cpu_s"] for r in got["rounds"]]
            wall = [r["spans_per_s"] for r in got["rounds"]]
            print(f"      reader {reader}: wall {statistics.median(wall):,.0f} ({min(wall):,.0f}-{max(wall):,.0f}); "
                  f"per server CPU second {statistics.median(theirs):,.0f} ({min(theirs):,.0f}-{max(theirs):,.0f}), "
                  f"peak RSS {got['peak_rss_mb']:.0f} MB; {readers[0]} / {reader}, paired by round: "
                  f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})")
        against = results[protocol].get("against")
        if against:
            ratios, theirs = against["ratios"], [r["spans_per_cpu_s"] for r in against["rounds"]]
            print(f"      against {against['tree']}: {statistics.median(theirs):,.0f} spans per server CPU second "
                  f"({min(theirs):,.0f}-{max(theirs):,.0f}); this / that, paired by round: "
                  f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
