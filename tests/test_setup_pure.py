"""A plain Python build over a tree that held a compiled one: the stale extension modules go.

``build_ext --inplace`` leaves ``otel_agenteval/<module>.<tag>.so`` and
``otel_agenteval__mypyc.<tag>.so`` beside the sources; Python imports the ``.so`` before the
``.py``, so ``OTEL_AGENTEVAL_PURE_PYTHON=1 pip install -e .`` over such a tree used to fail with
``ModuleNotFoundError: No module named 'otel_agenteval__mypyc'``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from otel_agenteval.cli.build import COMPILED_MODULES

ROOT = Path(__file__).resolve().parent.parent
TAG = sysconfig.get_config_var("EXT_SUFFIX") or ".so"


def test_pure_build_removes_a_compiled_builds_modules(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "otel_agenteval", tree / "otel_agenteval",
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"))
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    # what an in-place compiled build leaves (content does not matter: any of it would shadow the source)
    stale = [tree / f"otel_agenteval__mypyc{TAG}"]
    stale += [tree / "otel_agenteval" / (name.replace(".", "/") + TAG) for name in COMPILED_MODULES]
    for path in stale:
        path.write_bytes(b"\x7fELF stale")
    env = {**os.environ, "OTEL_AGENTEVAL_PURE_PYTHON": "1"}
    out = subprocess.run([sys.executable, "setup.py", "--version"], cwd=tree, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0.1.0"
    assert [p for p in stale if p.exists()] == []
    assert out.stderr.count("(left by a compiled build; it would shadow the .py source)") == len(stale)
    # the plain package now imports from the sources
    check = subprocess.run([sys.executable, "-c", "import otel_agenteval.reading.extract as m; print(m.__file__)"],
                           cwd=tmp_path, env={**env, "PYTHONPATH": str(tree)}, capture_output=True, text=True,
                           timeout=120)
    assert check.returncode == 0, check.stderr
    assert check.stdout.strip() == str(tree / "otel_agenteval" / "extract.py")


def test_pure_build_leaves_other_extension_modules(tmp_path: Path) -> None:
    """Only the compiled modules of ``_build.py`` (and their group module) are removed."""
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "otel_agenteval", tree / "otel_agenteval",
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"))
    shutil.copy(ROOT / "setup.py", tree / "setup.py")
    keep = tree / "otel_agenteval" / ("unrelated" + TAG)  # not a compiled module of ours
    keep.write_bytes(b"x")
    env = {**os.environ, "OTEL_AGENTEVAL_PURE_PYTHON": "1"}
    out = subprocess.run([sys.executable, "setup.py", "--version"], cwd=tree, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert keep.exists()
