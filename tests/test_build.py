"""The build under test is the one meant (`make test` runs the suite on the compiled build, then on
plain Python), and a compiled build is never older than the source it was compiled from."""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from otel_agenteval.cli.build import COMPILED_MODULES, NATIVE_FLAGS, build_name, compiled_modules


def test_the_build_is_the_one_expected() -> None:
    expected = os.environ.get("OTEL_AGENTEVAL_EXPECT_BUILD")
    if expected is None:
        pytest.skip("OTEL_AGENTEVAL_EXPECT_BUILD not set (make test sets it)")
    assert build_name() == expected, f"modules compiled: {compiled_modules()}"


def test_a_build_is_all_or_nothing() -> None:
    assert build_name() in ("compiled (mypyc)", "plain Python"), f"modules compiled: {compiled_modules()}"


@pytest.mark.parametrize("name", COMPILED_MODULES)
def test_compiled_module_is_not_older_than_its_source(name: str) -> None:
    module = importlib.import_module(f"otel_agenteval.{name}")
    path = Path(module.__file__ or "")
    if path.suffix == ".py":
        pytest.skip("plain Python build")
    source = path.parent / (name.rsplit(".", 1)[-1] + ".py")
    assert path.stat().st_mtime >= source.stat().st_mtime, (
        f"{path.name} was compiled before {source} last changed: run `make build` (or `make test`)")


def test_version_names_the_build() -> None:
    out = subprocess.run([sys.executable, "-m", "otel_agenteval", "--version"], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == f"otel-agenteval 0.1.0 ({build_name()})"


def test_the_compiled_modules_export_their_init_functions_only() -> None:
    """setup.py compiles with NATIVE_FLAGS: every native function but a module's init is the
    module's own, so the hot path's functions call one another directly, not through the PLT."""
    assert "-fvisibility=hidden" in NATIVE_FLAGS
    group = importlib.util.find_spec("otel_agenteval__mypyc")
    if group is None or group.origin is None:
        pytest.skip("plain Python build")
    if not sys.platform.startswith("linux") or shutil.which("nm") is None:
        pytest.skip("reads the ELF dynamic symbol table with nm")
    wire = importlib.util.find_spec("otel_agenteval.replay.formats._wire_c")
    for path in [group.origin, *([wire.origin] if wire is not None and wire.origin else [])]:
        out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True, timeout=60, check=True)
        exported = [line.split()[-1] for line in out.stdout.splitlines() if line.strip()]
        assert exported and all(name.startswith("PyInit_") for name in exported), (
            f"{Path(path).name} exports {len(exported)} symbols ({exported[:5]} ...): built without {NATIVE_FLAGS}?")
