"""The build under test is the one meant (`make test` runs the suite on the compiled build, then on
plain Python), and a compiled build is never older than the source it was compiled from."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from otel_agenteval.cli.build import COMPILED_MODULES, build_name, compiled_modules


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
