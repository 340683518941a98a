"""Installing the package into an environment that already has google-adk keeps ADK's SDK pin.

As a user would: a fresh environment with google-adk alone, then the package installed on its own
(a second install, not resolved together). google-adk 2.13 pins ``opentelemetry-sdk<=1.44``; the
package depends on what it imports with wide ranges, so nothing is upgraded past that pin. The
control shows why it matters: ``opentelemetry-exporter-otlp`` (the package's old dependency) would
upgrade the SDK. Runs in the ``google-adk`` environment (``.ci/frameworks.sh`` passes the wheel and uv;
their downloads come from its cache).
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from fw_envs import ENV, HERE

ADK = next(line.strip() for line in (HERE / "envs" / "google-adk.txt").read_text().splitlines()
           if line.startswith("google-adk=="))


def _tools() -> tuple[str, str]:
    wheel, uv = os.environ.get("OTEL_AGENTEVAL_WHEEL", ""), os.environ.get("OTEL_AGENTEVAL_UV", "")
    if not (wheel and uv):
        if ENV == "google-adk":
            pytest.fail("OTEL_AGENTEVAL_WHEEL / OTEL_AGENTEVAL_UV not set: run through .ci/frameworks.sh")
        pytest.skip("needs the package's wheel and uv: runs in the google-adk environment (make test-frameworks)")
    return wheel, uv


def _uv(uv: str, *args: str) -> str:
    out = subprocess.run([uv, *args], capture_output=True, text=True, timeout=600, check=False)
    assert out.returncode == 0, f"uv {' '.join(args)}:\n{out.stdout}\n{out.stderr}"
    return out.stdout + out.stderr


def _version(python: Path, dist: str) -> str:
    return subprocess.run([str(python), "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"],
                          capture_output=True, text=True, timeout=60, check=True).stdout.strip()


def test_installing_beside_google_adk_keeps_its_sdk_pin(tmp_path: Path) -> None:
    wheel, uv = _tools()
    env = tmp_path / "adk-app"
    _uv(uv, "venv", "-q", "--python", sys.executable, str(env))
    python = env / "bin" / "python"
    _uv(uv, "pip", "install", "-q", "--python", str(python), ADK)
    sdk = _version(python, "opentelemetry-sdk")
    assert sdk == version("opentelemetry-sdk")  # what ADK's resolution gave here too

    _uv(uv, "pip", "install", "-q", "--python", str(python), wheel)
    assert _version(python, "opentelemetry-sdk") == sdk
    assert _version(python, "otel-agenteval") == "0.1.0"
    _uv(uv, "pip", "check", "--python", str(python))  # every installed package's requirements hold

    # the control: the exporter the package used to depend on would have moved the SDK
    plan = _uv(uv, "pip", "install", "--dry-run", "--python", str(python), "opentelemetry-exporter-otlp")
    assert f"- opentelemetry-sdk=={sdk}" in plan, plan
