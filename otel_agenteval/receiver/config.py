"""``serve`` settings: one dataclass, checked when built; every error names its flag."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

LOOPS = ("auto", "uvloop", "asyncio")  # --loop: auto is uvloop when installed
RESERVED_FDS = 100  # descriptors kept for grpcio, log files, the policy, the WAL


class ConfigError(ValueError):
    """A setting that cannot work; the message names the flag."""


@dataclass
class ServeConfig:
    addr: str = "127.0.0.1"
    grpc_port: int = 4317  # 0: any free port; -1: no gRPC listener
    http_port: int = 4318  # 0: any free port; -1: no OTLP/HTTP listener
    metrics_port: int = 9464
    grace_s: float = 5.0  # after a trace's root arrived, wait this long for late children
    idle_s: float = 60.0  # a trace with no new span for this long is played without its root
    fragment_linger_s: float = 10.0  # pieces of runs, a trace each: grouped once their scope sent none this long
    queue_spans: int = 100_000  # ingest queue bound, in spans
    high_water: float = 0.8  # /readyz fails while the queue is fuller than this share
    max_held_spans: int = 200_000  # spans held while their traces complete
    max_body_bytes: int = 16 << 20  # request body (and its gunzipped size)
    max_spans_per_request: int = 50_000
    body_timeout_s: float = 30.0  # a request body must arrive within this long
    retry_after_s: int = 1  # hinted to clients that are throttled
    token: str | None = None  # bearer token; None: no auth
    metrics_token: str | None = None  # bearer token for /metrics; None: the same as ``token``
    tls_cert: str | None = None
    tls_key: str | None = None
    insecure: bool = False  # allow a non-loopback address without a token
    grpc_workers: int = 1  # a handler's work holds the GIL: more threads only take turns at it
    log_violations: bool = True
    loop: str = "auto"  # the HTTP listeners' event loop: auto (uvloop when installed), uvloop, asyncio
    wal_dir: str | None = None  # write-ahead log: requests synced there before they are acknowledged
    wal_sync_s: float = 0.02  # group sync: at most one fsync per interval; an acknowledgement waits for its group
    wal_max_bytes: int = 1 << 30  # the log's bound; past it requests are refused (429 / RESOURCE_EXHAUSTED)
    wal_segment_bytes: int = 16 << 20  # a new segment file past this size
    max_connections: int = 0  # open connections per listener; 0: a share of the descriptor limit
    http_idle_s: float = 30.0  # a connection with no request in progress is closed after this long
    http_read_s: float = 10.0  # a request's headers must arrive within this long
    engine_stuck_s: float = 10.0  # /readyz fails while the engine has been on one batch this long (a slow rule)
    memory_limit_mib: int = 0  # bodies + queued + held spans, in MiB; 0: half the cgroup limit, else 1/4 of RAM

    def validate(self) -> ServeConfig:
        def bad(flag: str, why: str) -> ConfigError:
            return ConfigError(f"invalid {flag}: {why}")

        for flag, port in (("--grpc-port", self.grpc_port), ("--http-port", self.http_port),
                           ("--metrics-port", self.metrics_port)):
            if not -1 <= port <= 65535:
                raise bad(flag, f"{port} (0..65535; 0 picks a free port, -1 turns the listener off)")
        if self.metrics_port < 0:
            raise bad("--metrics-port", "the metrics and health listener cannot be turned off")
        if self.grpc_port < 0 and self.http_port < 0:
            raise bad("--grpc-port/--http-port", "at least one OTLP listener is needed")
        if self.grace_s < 0:
            raise bad("--grace", f"{self.grace_s} (seconds, >= 0)")
        if self.idle_s <= 0 or self.idle_s < self.grace_s:
            raise bad("--idle-timeout", f"{self.idle_s} (seconds, > 0 and >= --grace {self.grace_s})")
        if self.fragment_linger_s < 0:
            raise bad("--fragment-linger", f"{self.fragment_linger_s} (seconds, >= 0)")
        if self.queue_spans < 1:
            raise bad("--queue-spans", f"{self.queue_spans} (>= 1)")
        if not 0 < self.high_water <= 1:
            raise bad("--high-water", f"{self.high_water} (a share of --queue-spans, 0 < x <= 1)")
        if self.max_held_spans < 1:
            raise bad("--max-held-spans", f"{self.max_held_spans} (>= 1)")
        if self.max_body_bytes < 1024:
            raise bad("--max-body-bytes", f"{self.max_body_bytes} (>= 1024)")
        if not 1 <= self.max_spans_per_request <= self.queue_spans:
            raise bad("--max-spans-per-request", f"{self.max_spans_per_request} (1..--queue-spans {self.queue_spans})")
        if self.body_timeout_s <= 0:
            raise bad("--body-timeout", f"{self.body_timeout_s} (seconds, > 0)")
        if self.retry_after_s < 0:
            raise bad("--retry-after", f"{self.retry_after_s} (seconds, >= 0)")
        if self.max_connections < 0:
            raise bad("--max-connections", f"{self.max_connections} (>= 1, or 0 for a share of the descriptor limit)")
        for flag, seconds in (("--http-idle-timeout", self.http_idle_s), ("--http-read-timeout", self.http_read_s)):
            if not 0 < seconds < float("inf"):
                raise bad(flag, f"{seconds} (seconds, > 0)")
        if self.memory_limit_mib < 0:
            raise bad("--memory-limit-mib", f"{self.memory_limit_mib} (MiB, >= 1, or 0 for the default)")
        if self.memory_limit_bytes < 4 * self.max_body_bytes:
            raise bad("--memory-limit-mib", f"{self.memory_limit_bytes >> 20} MiB is less than 4 x --max-body-bytes "
                      f"({self.max_body_bytes}): a body is reserved at twice its size, and the largest must fit")
        if not 0 < self.engine_stuck_s < float("inf"):
            raise bad("engine_stuck_s", f"{self.engine_stuck_s} (seconds, > 0)")
        if self.grpc_workers < 1:
            raise bad("--grpc-workers", f"{self.grpc_workers} (>= 1)")
        if self.loop not in LOOPS:
            raise bad("--loop", f"{self.loop!r} (one of {', '.join(LOOPS)})")
        if not 0 <= self.wal_sync_s <= 1:
            raise bad("--wal-sync", f"{self.wal_sync_s} (seconds, 0..1; 0 syncs each group at once)")
        if self.wal_dir is not None and not self.wal_dir.strip():
            raise bad("--wal-dir", "empty: give the log's directory (or leave the flag out for no log)")
        if self.wal_dir is not None and self.wal_max_bytes < 2 * self.max_body_bytes:
            raise bad("--wal-max-bytes", f"{self.wal_max_bytes} (>= twice --max-body-bytes, {2 * self.max_body_bytes})")
        if self.wal_dir is not None and Path(self.wal_dir).exists() and not Path(self.wal_dir).is_dir():
            raise bad("--wal-dir", f"{self.wal_dir}: not a directory")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise bad("--tls-cert/--tls-key", "give both or neither")
        for flag, path in (("--tls-cert", self.tls_cert), ("--tls-key", self.tls_key)):
            if path is not None and not Path(path).is_file():
                raise bad(flag, f"{path}: no such file")
        if self.token is not None and not self.token:
            raise bad("--token-file/--token-env", "the token is empty")
        if self.metrics_token is not None and not self.metrics_token:
            raise bad("--metrics-token-file/--metrics-token-env", "the token is empty")
        if not is_loopback(self.addr) and self.token is None and not self.insecure:
            raise ConfigError(f"refusing to listen on {self.addr} (not loopback) without a token: give --token-file "
                              "or --token-env, or --insecure to accept unauthenticated spans")
        return self

    @property
    def connection_limit(self) -> int:
        if self.max_connections:
            return self.max_connections
        return default_max_connections(1 + (self.grpc_port >= 0) + (self.http_port >= 0))  # metrics, gRPC, HTTP

    @property
    def memory_limit_bytes(self) -> int:
        if self.memory_limit_mib:
            return self.memory_limit_mib << 20
        from .memory import default_limit_mib

        return max(default_limit_mib() << 20, 4 * self.max_body_bytes)  # the largest body fits

    @property
    def scrape_token(self) -> str | None:
        """The token /metrics needs: ``--metrics-token-*``, else the OTLP token, else none."""
        return self.metrics_token if self.metrics_token is not None else self.token

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None


def is_loopback(addr: str) -> bool:
    if addr == "localhost":
        return True
    try:
        return ipaddress.ip_address(addr).is_loopback
    except ValueError:
        return False


def read_token(token_file: str | None, token_env: str | None, flag: str = "--token") -> str | None:
    """The bearer token from a file (stripped) or an environment variable; None when neither is given."""
    if token_file is not None and token_env is not None:
        raise ConfigError(f"invalid {flag}-file/{flag}-env: give one, not both")
    if token_file is not None:
        try:
            return Path(token_file).read_text().strip()
        except OSError as exc:
            raise ConfigError(f"invalid {flag}-file: {token_file}: {exc.strerror or exc}") from None
    if token_env is not None:
        value = os.environ.get(token_env)
        if value is None:
            raise ConfigError(f"invalid {flag}-env: environment variable {token_env} is not set")
        return value.strip()
    return None


def default_max_connections(listeners: int = 3) -> int:
    """Per listener: a share of the descriptor limit, split between the ``listeners`` that are on
    (metrics, OTLP/HTTP, OTLP/gRPC), and some to spare. (The larger the share, the fewer
    connections an idle flood past it churns through: with gRPC off, 462 rather than 308 at 1024.)"""
    import resource  # POSIX only: imported when no --max-connections is given

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft <= 0:
        soft = 65536
    return max(16, min(4096, (soft - RESERVED_FDS) // max(1, listeners)))
