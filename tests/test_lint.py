"""The package is linted (ruff) and type-checked (mypy), as the house style asks."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


@pytest.mark.parametrize("tool, args", [("ruff", ["check", "otel_agenteval"]), ("mypy", [])])
def test_package_is_clean(tool, args):
    exe = shutil.which(tool, path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip(f"{tool} not installed (pip install -e '.[test]')")
    out = subprocess.run([exe, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
