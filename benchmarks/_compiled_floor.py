"""Benchmark modules compiled with mypyc, built once into a cache outside the clone and kept while
their source, Python and mypy stay the same (``$OTEL_AGENTEVAL_CACHE``, default
``~/.cache/otel-agenteval``).

``overhead.py --compiled-floor``: the same source as :mod:`_floor` (``bench-floor/``). It answers
whether the floor is only cheap because it is bytecode: the processor's per-span modules are native
code, and native code is not always the cheaper in a host whose own work evicts it between spans
(benchmarks/README.md, issue 44). ``overhead.py --footprint`` builds its native functions here too
(:mod:`_footprint`, ``bench-footprint/``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

from otel_agenteval.cli.build import NATIVE_FLAGS

SOURCE = Path(__file__).resolve().parent / "_floor.py"
MODULE = "_floor_compiled"  # the source copied under this name: its own module, beside the plain one
# the flags setup.py compiles the package with: other packages' types are Any
MYPYC_FLAGS = ("--ignore-missing-imports", "--no-site-packages", "--follow-imports=silent", "--config-file=")


def cache_dir(source: str, kind: str = "bench-floor", flag: str = "--compiled-floor") -> Path:
    """Where this source's build goes: keyed by the source, Python's version, mypy's and the C flags."""
    try:
        from mypy.version import __version__ as mypy_version
    except ImportError:
        raise SystemExit(f"{flag}: mypyc is not installed here (pip install mypy)") from None
    key = hashlib.sha256("\0".join([source, sys.version, mypy_version, *NATIVE_FLAGS]).encode()).hexdigest()[:16]
    root = Path(os.environ.get("OTEL_AGENTEVAL_CACHE") or Path.home() / ".cache" / "otel-agenteval")
    return root / kind / key


def built_module(where: Path, module: str = MODULE) -> Path | None:
    """The extension module built in ``where`` earlier, if any."""
    found = sorted(where.glob(f"{module}.*.so")) + sorted(where.glob(f"{module}.*.pyd"))
    return found[0] if found else None


def build(where: Path, source: str, module: str = MODULE, flag: str = "--compiled-floor") -> Path:
    """Compile ``source`` as ``module`` in ``where`` (15-40 s on two cores); the extension module's path."""
    where.mkdir(parents=True, exist_ok=True)
    (where / f"{module}.py").write_text(source, encoding="utf-8")
    print(f"{flag}: compiling {module} with mypyc into {where}", file=sys.stderr, flush=True)
    # the C flags the package is compiled with (CFLAGS set replaces Python's own, so both are given)
    cflags = " ".join([sysconfig.get_config_var("CFLAGS") or "", *NATIVE_FLAGS])
    done = subprocess.run([sys.executable, "-m", "mypyc", *MYPYC_FLAGS, f"{module}.py"], cwd=where,
                          capture_output=True, text=True, check=False, env={**os.environ, "CFLAGS": cflags})
    built = built_module(where, module)
    shutil.rmtree(where / "build", ignore_errors=True)  # the generated C and objects: only the module is kept
    if done.returncode != 0 or built is None:
        raise SystemExit(f"{flag}: mypyc failed (exit {done.returncode}):\n{(done.stdout + done.stderr)[-2000:]}")
    return built


def load(source: str, module: str, kind: str, flag: str) -> Any:
    """``source`` compiled as ``module``, built on first use."""
    where = cache_dir(source, kind, flag)
    path = built_module(where, module) or build(where, source, module, flag)
    spec = importlib.util.spec_from_file_location(module, path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"{flag}: cannot load {path}")
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


def compiled_floor() -> Any:
    """The compiled floor (``Floor``, ``DeferredFloor``), built on first use."""
    return load(SOURCE.read_text(encoding="utf-8"), MODULE, "bench-floor", "--compiled-floor")
