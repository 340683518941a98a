"""The real OpenTelemetry Collector in the tests: built by .ci/build-collector.sh (cached outside
the clone by release), its shipped configs from deploy/, pointed at replicas on loopback."""

from __future__ import annotations

import contextlib
import copy
import functools
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / ".ci" / "build-collector.sh"
COMPOSE_CONFIG = ROOT / "deploy" / "collector" / "otelcol-compose.yaml"


@functools.cache
def _build() -> tuple[str | None, str]:
    try:
        out = subprocess.run(["bash", str(BUILD)], capture_output=True, text=True, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, str(exc)
    if out.returncode != 0:
        return None, out.stderr.strip()[-600:]
    return out.stdout.strip().splitlines()[-1], ""


def collector_binary() -> str:
    """The Collector's path (built on first use, minutes; cached); skipped, with why, when it cannot be built."""
    path, why = _build()
    if path is None:
        pytest.skip(f"the OpenTelemetry Collector could not be built by .ci/build-collector.sh: {why}")
    return path


def kubernetes_collector_config() -> str:
    """The Collector config inside deploy/kubernetes/collector.yaml's ConfigMap."""
    for doc in yaml.safe_load_all((ROOT / "deploy" / "kubernetes" / "collector.yaml").read_text()):
        if doc and doc.get("kind") == "ConfigMap":
            return str(doc["data"]["config.yaml"])
    raise AssertionError("no ConfigMap in deploy/kubernetes/collector.yaml")


def loopback_config(shipped: Path, backends: list[str], grpc_port: int, http_port: int, health_port: int,
                    metrics_port: int) -> dict[str, Any]:
    """A shipped config as it is, but for addresses: its receivers, health check and own telemetry on
    loopback ports, and the static resolver's hostnames set to ``backends``. Queues, retries,
    batching, limits and routing stay as shipped."""
    config = yaml.safe_load(shipped.read_text())
    out = copy.deepcopy(config)
    out["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"] = f"127.0.0.1:{grpc_port}"
    out["receivers"]["otlp"]["protocols"]["http"]["endpoint"] = f"127.0.0.1:{http_port}"
    out["extensions"]["health_check"]["endpoint"] = f"127.0.0.1:{health_port}"
    out["exporters"]["load_balancing"]["resolver"] = {"static": {"hostnames": backends}}
    out["service"]["telemetry"] = {"metrics": {"readers": [{"pull": {"exporter": {"prometheus": {
        "host": "127.0.0.1", "port": metrics_port}}}}]}}
    return out


@contextlib.contextmanager
def collector(config: dict[str, Any], workdir: Path, env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    path = workdir / "otelcol.yaml"
    path.write_text(yaml.safe_dump(config))
    log = open(workdir / "otelcol.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([collector_binary(), "--config", str(path)], stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, **env})
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()


def wait_healthy(port: int, proc: subprocess.Popen[bytes], log: Path, timeout: float = 30) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the Collector exited ({proc.returncode}): {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"the Collector did not become healthy: {log.read_text()[-2000:]}")
