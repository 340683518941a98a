"""Running a framework's driver in a process of its own, in that framework's environment.

Frameworks that pin OpenTelemetry or each other apart live in their own virtual environments,
made and run by ``.ci/frameworks.sh`` (``make test-frameworks``; ``make test`` runs it), which sets
``OTEL_AGENTEVAL_FRAMEWORK_ENV`` to the environment's name. There a missing framework is an
error; elsewhere (the main environment) the test skips. Each driver (``drivers/*.py``) runs the
scenario once, in a fresh process: frameworks read their settings from the environment at
import and take the global tracer provider, which can be set once per process.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
DRIVERS = HERE / "drivers"
ENV = os.environ.get("OTEL_AGENTEVAL_FRAMEWORK_ENV", "")


def require(env: str, *modules: str) -> None:
    """Skip unless the modules import here; in ``env``'s own environment, fail instead."""
    missing = [m for m in modules if not _importable(m)]
    if not missing:
        return
    if env == ENV or (env == "main" and not ENV):  # "main": the project's own .venv (the test extra)
        pytest.fail(f"{', '.join(missing)} missing in the {env} environment (.ci/frameworks.sh installs it)")
    pytest.skip(f"{', '.join(missing)} not installed: runs in its own environment (make test-frameworks)")


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def run_driver(driver: str, mode: str, tmp_path: Path, capture_as: str | None = None) -> tuple[Any, Path]:
    """Run ``drivers/<driver>`` in ``mode``; return the live figures it wrote and its spans file."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "ADK_", "ENABLE_SENSITIVE"))}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    out = subprocess.run([sys.executable, str(DRIVERS / driver), mode, str(tmp_path)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=240, check=False)
    assert out.returncode == 0, f"{driver} {mode} failed:\n{out.stdout}\n{out.stderr}"
    spans = tmp_path / "spans.json"
    keep = os.environ.get("OTEL_AGENTEVAL_CAPTURE_DIR")
    if keep and capture_as:  # refresh the captured shapes that test_captured_shapes.py reads
        shutil.copy(spans, Path(keep) / capture_as)
    return json.loads((tmp_path / "live.json").read_text()), spans
