"""``otel-agenteval serve`` as a process: SIGTERM drains and finalises; auth; TLS; bad settings."""

from __future__ import annotations

import json
import signal
import ssl
import subprocess
import sys
import time
import urllib.request

import grpc
import pytest
import trustme
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from prometheus_client import CollectorRegistry
from serve_support import get, post, samples, scrape, serve_process, settled, total, value, wait_until
from test_serve_input import PB, _body, _spans

from otel_agenteval.receiver import ConfigError, Receiver, ServeConfig


def _open_trace_body():
    """A run whose root (an HTTP server span) never ends: its agent span's parent is not exported."""
    spans = list(_spans(1))
    return _body([s for s in spans if s.parent is not None])  # the agent root dropped: tools only


def test_sigterm_goes_unready_drains_and_finalises_open_runs_as_incomplete():
    with serve_process("--grace", "30", "--idle-timeout", "60", "--shutdown-delay", "1.5",
                       "--no-log-violations") as (proc, info):
        url = f"http://127.0.0.1:{info['http_port']}/v1/traces"
        ready = f"http://127.0.0.1:{info['metrics_port']}/readyz"
        assert get(ready)[0] == 200
        assert post(url, _body(_spans(2)), PB)[0] == 200  # two complete runs, held for their grace period
        assert post(url, _open_trace_body(), PB)[0] == 200  # tool spans whose run never ends
        wait_until(lambda: value(scrape(info["metrics_port"]), "agenteval_receiver_held_traces") == 3, what="held")
        proc.send_signal(signal.SIGTERM)
        wait_until(lambda: get(ready)[0] == 503, timeout=5, what="not ready")
        assert json.loads(get(ready)[1])["problems"] == ["shutting down"]
        assert post(url, _body(_spans(1)), PB)[0] == 200  # still accepting during --shutdown-delay
        assert proc.wait(30) == 0
        err = proc.stderr.read()
    stopped = json.loads([line for line in err.splitlines() if '"stopped"' in line][-1])
    assert stopped["drained"] is True
    assert stopped["traces"] == {"root_end": 0, "idle_timeout": 0, "capacity": 0, "memory": 0, "shutdown": 4}
    assert stopped["trajectories"] == {"unknown": 3, "incomplete": 1}


def test_loop_is_uvloop_when_installed_and_asyncio_on_request(monkeypatch):
    with serve_process("--no-log-violations") as (_, info):
        assert info["loop"] == "uvloop"
        assert info["gzip"] == "libdeflate+zlib-ng"  # both come with the serve extra (and the test extra)
    with serve_process("--loop", "asyncio", "--no-log-violations") as (_, info):
        assert info["loop"] == "asyncio"
        assert post(f"http://127.0.0.1:{info['http_port']}/v1/traces", _body(_spans(1)), PB)[0] == 200
    out = subprocess.run([sys.executable, "-m", "otel_agenteval", "serve", "--loop", "libuv"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--loop" in out.stderr
    with pytest.raises(ConfigError, match="invalid --loop"):
        ServeConfig(loop="libuv").validate()
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as where it is not installed: auto falls back
    from otel_agenteval.receiver.listeners import eventloop

    assert eventloop.chosen("auto") == "asyncio"
    with pytest.raises(ConfigError, match="uvloop is not installed"):
        Receiver(ServeConfig(grpc_port=-1, http_port=0, metrics_port=0, loop="uvloop"), registry=CollectorRegistry())


def test_refuses_a_public_address_without_token_or_insecure():
    with pytest.raises(ConfigError, match="--token-file"):
        ServeConfig(addr="0.0.0.0").validate()
    ServeConfig(addr="0.0.0.0", insecure=True).validate()
    ServeConfig(addr="0.0.0.0", token="t").validate()
    out = subprocess.run([sys.executable, "-m", "otel_agenteval", "serve", "--addr", "0.0.0.0"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "refusing to listen on 0.0.0.0" in out.stderr
    out = subprocess.run([sys.executable, "-m", "otel_agenteval", "serve", "--grace", "-1"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "invalid --grace" in out.stderr


@pytest.mark.parametrize("how", ["file", "env"])
def test_bearer_token_is_required_on_both_receivers(tmp_path, how):
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token\n")
    args = ("--token-file", str(token_file)) if how == "file" else ("--token-env", "AGENTEVAL_TEST_TOKEN")
    with serve_process(*args, "--grace", "0.1", "--no-log-violations",
                       env={"AGENTEVAL_TEST_TOKEN": "s3cret-token"}) as (proc, info):
        assert info["auth"] is True
        url = f"http://127.0.0.1:{info['http_port']}/v1/traces"
        status, headers, _ = post(url, _body(_spans(1)), PB)
        assert status == 401 and headers["www-authenticate"] == "Bearer"
        assert post(url, _body(_spans(1)), {**PB, "Authorization": "Bearer wrong"})[0] == 401
        good = {"authorization": "Bearer s3cret-token"}
        assert HttpExporter(endpoint=url, headers=good).export(_spans(1)).name == "SUCCESS"
        grpc_url = f"127.0.0.1:{info['grpc_port']}"
        assert GrpcExporter(endpoint=grpc_url, insecure=True, headers=good).export(_spans(1)).name == "SUCCESS"
        assert GrpcExporter(endpoint=grpc_url, insecure=True, timeout=5).export(_spans(1)).name == "FAILURE"
        assert info["metrics_auth"] is True  # /metrics needs the token too; the probes do not
        assert get(f"http://127.0.0.1:{info['metrics_port']}/metrics")[0] == 401
        assert get(f"http://127.0.0.1:{info['metrics_port']}/healthz")[0] == 200
        wait_until(settled(info["metrics_port"], 2, good), what="the authorised spans played")
        s = scrape(info["metrics_port"], good)
        assert value(s, "agenteval_receiver_requests_total", protocol="metrics", result="unauthorized") == 1
        assert value(s, "agenteval_receiver_requests_total", protocol="http", result="unauthorized") == 2
        assert value(s, "agenteval_receiver_requests_total", protocol="grpc", result="unauthorized") >= 1
        assert total(s, "agenteval_trajectories_total") == 2


def test_tls_on_every_listener(tmp_path, monkeypatch):
    for var in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):  # requests lets these override the exporter's CA
        monkeypatch.delenv(var, raising=False)
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert_pem, key_pem, ca_pem = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "ca.pem"
    cert.private_key_pem.write_to_path(str(key_pem))
    cert.cert_chain_pems[0].write_to_path(str(cert_pem))
    ca.cert_pem.write_to_path(str(ca_pem))
    cfg = ServeConfig(grpc_port=0, http_port=0, metrics_port=0, grace_s=0.1, log_violations=False,
                      tls_cert=str(cert_pem), tls_key=str(key_pem))
    with Receiver(cfg, registry=CollectorRegistry()) as r:
        http = HttpExporter(endpoint=f"https://127.0.0.1:{r.ports.http}/v1/traces", certificate_file=str(ca_pem))
        assert http.export(_spans(1)).name == "SUCCESS"
        creds = grpc.ssl_channel_credentials(ca_pem.read_bytes())
        g = GrpcExporter(endpoint=f"127.0.0.1:{r.ports.grpc}", credentials=creds)
        assert g.export(_spans(1)).name == "SUCCESS"
        context = ssl.create_default_context(cafile=str(ca_pem))
        deadline = time.monotonic() + 20
        while True:
            with urllib.request.urlopen(f"https://127.0.0.1:{r.ports.metrics}/metrics", context=context) as resp:
                text = resp.read().decode()
            if total(samples(text), "agenteval_trajectories_total") == 2:
                break
            assert time.monotonic() < deadline, text[-2000:]
            time.sleep(0.1)


_MAPPED_BLOCKS = """
import ctypes, sys
from otel_agenteval.receiver.malloc import tune_for_large_bodies
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                               "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
said = tune_for_large_bodies() if sys.argv[1] == "tune" else "-"
before = libc.mallinfo2().hblks
body = bytearray(4 << 20)  # a 4 MiB request body
print(libc.mallinfo2().hblks - before, said)
import threading
thread = threading.Thread(target=lambda: bytearray(1 << 20))  # a listener's thread: an arena of its own?
thread.start()
thread.join()
libc.malloc_stats()  # "Arena N:" a line each, on stderr
"""


@pytest.mark.skipif(sys.platform != "linux" or __import__("platform").libc_ver()[0] != "glibc", reason="glibc only")
def test_serve_keeps_request_bodies_on_the_heap_unless_the_environment_sets_malloc():
    def run(mode: str, **env: str) -> list[str]:
        out = subprocess.run([sys.executable, "-c", _MAPPED_BLOCKS, mode], capture_output=True, text=True,
                             check=True, env={k: v for k, v in __import__("os").environ.items()
                                              if not k.startswith("MALLOC_")} | env)
        return [*out.stdout.strip().split(" ", 1), str(out.stderr.count("Arena "))]

    assert run("plain") == ["1", "-", "2"]  # glibc's default: a fresh mmap per large body, an arena per thread
    # from the heap, no page faults for the next one; one arena, so malloc_trim reaches every thread's frees
    assert run("tune") == ["0", "tuned", "1"]
    assert run("tune", MALLOC_TRIM_THRESHOLD_="1048576")[1] == "set by the environment"
    assert run("tune", MALLOC_ARENA_MAX="4")[1] == "set by the environment"
    with serve_process() as (_, info):
        assert info["malloc"] == "tuned"
