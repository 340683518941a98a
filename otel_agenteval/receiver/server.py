"""One ``serve`` process: the pipeline and its three listeners, started and stopped in order.

Stop (SIGTERM): readiness goes false first, then the listeners stop accepting (in-flight requests
finish), the ingest queue is drained into the engine, held traces are played and open
trajectories finalised as ``incomplete``; then the metrics listener closes.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from prometheus_client import CollectorRegistry

from ..policy.policy import Policy
from .config import ServeConfig
from .durability import Durability, DurableRegistry
from .listeners import eventloop
from .listeners.connections import guarded, limits_for
from .listeners.ops import OpsApp
from .listeners.otlp_grpc import start_grpc
from .listeners.otlp_http import OtlpHttpApp
from .pipeline import Pipeline


@dataclass
class Ports:
    grpc: int | None = None
    http: int | None = None
    metrics: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def _bind(addr: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((addr, port))
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot listen on {addr}:{port}: {exc.strerror or exc}") from None
    sock.listen(1024)
    sock.setblocking(False)
    return sock


def _http_protocol() -> type:
    """The protocol class uvicorn's ``http="auto"`` would take: httptools when installed, else h11."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        return HttpToolsProtocol
    except ImportError:
        from uvicorn.protocols.http.h11_impl import H11Protocol

        return H11Protocol


def _run_servers(group: list[tuple[uvicorn.Server, socket.socket]], done: dict[int, threading.Event],
                 started: threading.Event, new_loop: eventloop.LoopFactory) -> None:
    """Serve ``group`` on a new event loop in this thread until each server stops; ``started``
    is set once all of them listen (or one has failed)."""

    async def serve_all() -> None:
        tasks = []
        for server, sock in group:
            event = done[id(server)] = threading.Event()
            task = asyncio.ensure_future(server.serve(sockets=[sock]))
            task.add_done_callback(_setter(event))
            tasks.append(task)
        while not all(server.started for server, _ in group):
            if any(t.done() for t in tasks):
                break
            await asyncio.sleep(0.01)
        started.set()
        await asyncio.gather(*tasks, return_exceptions=True)

    eventloop.run(serve_all(), new_loop)


def _setter(event: threading.Event) -> Any:
    def done(_task: Any) -> None:
        event.set()
    return done


class Receiver:
    """``Receiver(config, policy).start()``; :meth:`stop` drains and finalises (idempotent)."""

    def __init__(self, config: ServeConfig, policy: Policy | None = None, *,
                 registry: CollectorRegistry | None = None, **pipeline_kwargs: Any) -> None:
        self.config = config.validate()
        self.loop = eventloop.chosen(config.loop)  # the HTTP listeners': "uvloop" or "asyncio"
        self.policy = policy if policy is not None else Policy()
        self.registry = registry if registry is not None else CollectorRegistry()
        self.pipeline = Pipeline(self.policy, self.registry, queue_spans=config.queue_spans, grace_s=config.grace_s,
                                 idle_s=config.idle_s, max_held_spans=config.max_held_spans,
                                 fragment_linger_s=config.fragment_linger_s,
                                 log_violations=config.log_violations, memory_limit=config.memory_limit_bytes,
                                 **pipeline_kwargs)
        self.durability: Durability | None = None
        if config.wal_dir is not None:  # raises ConfigError when another process has the directory
            self.durability = self.pipeline.wal = Durability(self.pipeline, config, self.registry)
        self.ports = Ports()
        self._grpc: Any = None
        self._otlp_server: uvicorn.Server | None = None
        self._otlp_app: OtlpHttpApp | None = None
        self._ops_server: uvicorn.Server | None = None
        self._loop_threads: list[threading.Thread] = []
        self._listening = False
        self._stopping = False
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._done: dict[int, threading.Event] = {}  # id(uvicorn server) -> set when it has stopped

    # --- readiness ------------------------------------------------------------------------------
    def problems(self) -> list[str]:
        """Why this replica is not ready ([] when it is)."""
        out = []
        if self._stopping:
            out.append("shutting down")
        if not self._listening:
            out.append("listeners not up")
        q = self.pipeline.queue
        if q.spans > self.config.high_water * q.capacity:
            out.append(f"ingest queue above its high-water mark ({q.spans} of {q.capacity} spans)")
        since = self.pipeline.feeding_since
        busy = time.monotonic() - since if since else 0.0
        if busy > self.config.engine_stuck_s:
            out.append(f"engine stuck: {busy:.0f}s on one batch (a slow rule or policy regex?)")
        wal = self.durability.log if self.durability is not None else None
        if wal is not None and wal.refusing_since:
            out.append(f"write-ahead log refusing writes for {time.monotonic() - wal.refusing_since:.0f}s: "
                       f"its disk said {wal.refusal!r}")
        m = self.pipeline.memory
        if m.used > self.config.high_water * m.limit:
            out.append(f"memory budget above its high-water mark ({m.used >> 20} of {m.limit >> 20} MiB)")
        return out

    @property
    def ready(self) -> bool:
        return not self.problems()

    # --- start ----------------------------------------------------------------------------------
    def start(self) -> Receiver:
        cfg = self.config
        sockets: list[tuple[uvicorn.Server, socket.socket]] = []
        if self.durability is not None:  # before any listener: the open runs it held, held again
            self.durability.recover()
        scraped = self.registry if self.durability is None else DurableRegistry(self.registry, self.durability)
        try:
            ops_sock = _bind(cfg.addr, cfg.metrics_port)
            self.ports.metrics = ops_sock.getsockname()[1]
            ops = OpsApp(scraped, self.problems, cfg.scrape_token,
                         self.pipeline.counters.requests.labels("metrics", "unauthorized"))
            self._ops_server = self._uvicorn(ops, "ops")
            sockets.append((self._ops_server, ops_sock))
            if cfg.http_port >= 0:
                http_sock = _bind(cfg.addr, cfg.http_port)
                self.ports.http = http_sock.getsockname()[1]
                self._otlp_app = OtlpHttpApp(self.pipeline, cfg)
                self._otlp_server = self._uvicorn(self._otlp_app, "otlp_http")
                sockets.append((self._otlp_server, http_sock))
            self.pipeline.start()
            if cfg.grpc_port >= 0:
                try:
                    self._grpc, self.ports.grpc = start_grpc(self.pipeline, cfg, cfg.grpc_port)
                except RuntimeError as exc:
                    raise OSError(f"cannot listen for OTLP/gRPC on {cfg.addr}:{cfg.grpc_port}: {exc}") from None
        except BaseException:
            for _, s in sockets:
                s.close()
            self.pipeline.stop(5)
            raise
        done = self._done
        new_loop = eventloop.factory(self.loop)
        # the ops listener on a loop (and thread) of its own: decoding and feeding on the OTLP
        # listener's loop never delays /healthz or a scrape (they wait for the GIL at most)
        for name, group in (("agenteval-ops", sockets[:1]), ("agenteval-http", sockets[1:])):
            if not group:
                continue
            started = threading.Event()
            thread = threading.Thread(target=_run_servers, args=(group, done, started, new_loop), name=name,
                                      daemon=True)
            thread.start()
            self._loop_threads.append(thread)
            started.wait(10)
        self._listening = all(server.started for server, _ in sockets)
        if not self._listening:
            self.stop()
            raise OSError("the HTTP listeners did not start")
        return self

    def _uvicorn(self, app: Any, listener: str) -> uvicorn.Server:
        cfg = self.config
        limits = limits_for(listener, self.pipeline.counters.connections_closed, cfg.connection_limit,
                            cfg.http_idle_s, cfg.http_read_s)
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", server_header=False,
                                http=guarded(_http_protocol(), limits),
                                timeout_keep_alive=max(1, int(cfg.http_idle_s)), timeout_graceful_shutdown=10,
                                ssl_certfile=cfg.tls_cert, ssl_keyfile=cfg.tls_key)
        return uvicorn.Server(config)  # run off the main thread: it installs no signal handlers

    # --- stop -----------------------------------------------------------------------------------
    def stop(self, drain_timeout: float = 30.0, delay_s: float = 0.0) -> None:
        """Not ready; after ``delay_s`` (still accepting, while load balancers catch up) stop
        accepting; drain the queue; finalise held and open runs; close /metrics."""
        with self._lock:
            if self._stopping:
                self._stopped.wait(drain_timeout + delay_s + 15)
                return
            self._stopping = True
        try:
            if delay_s > 0:
                time.sleep(delay_s)
            if self._grpc is not None:
                self._grpc.stop(grace=5).wait(10)
            if self._otlp_server is not None:
                self._otlp_server.should_exit = True  # stops accepting; in-flight requests finish
                event = self._done.get(id(self._otlp_server))
                if event is not None:
                    event.wait(15)
            if self._otlp_app is not None:
                self._otlp_app.close()
            self.pipeline.stop(drain_timeout)
            if self._ops_server is not None:
                self._ops_server.should_exit = True
            for thread in self._loop_threads:
                thread.join(15)
            self._listening = False
        finally:
            self._stopped.set()

    def wait(self) -> None:
        self._stopped.wait()

    def __enter__(self) -> Receiver:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
