"""Imports go one way: no module of the package imports, even lazily or for types only, a module
that imports it back; and every module imports on its own, in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / ".ci"))

from import_graph import cycles, modules  # noqa: E402


def test_no_import_cycles() -> None:
    assert cycles(ROOT / "otel_agenteval") == []


def test_each_module_imports_alone() -> None:
    names = sorted(m for m in modules(ROOT / "otel_agenteval") if not m.endswith("__main__"))

    def alone(name: str) -> tuple[str, int, str]:
        out = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, text=True, timeout=120)
        return name, out.returncode, out.stderr[-600:]

    with ThreadPoolExecutor(max_workers=4) as pool:
        failed = [r for r in pool.map(alone, names) if r[1] != 0]
    assert failed == []
