"""The floor compiled with mypyc (``overhead.py --compiled-floor``): the same source as
:mod:`_floor`, built once into a cache outside the clone and kept while the source, Python and mypy
stay the same (``$OTEL_AGENTEVAL_CACHE``, default ``~/.cache/otel-agenteval``, ``bench-floor/``).

It answers whether the floor is only cheap because it is bytecode: the processor's per-span
modules are native code, and native code is not always the cheaper in a host whose own work
evicts it between spans (benchmarks/README.md, issue 44).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).resolve().parent / "_floor.py"
MODULE = "_floor_compiled"  # the source copied under this name: its own module, beside the plain one
# the flags setup.py compiles the package with: other packages' types are Any
MYPYC_FLAGS = ("--ignore-missing-imports", "--no-site-packages", "--follow-imports=silent", "--config-file=")


def cache_dir() -> Path:
    """Where this source's build goes: keyed by the source, Python's version and mypy's."""
    try:
        from mypy.version import __version__ as mypy_version
    except ImportError:
        raise SystemExit("--compiled-floor: mypyc is not installed here (pip install mypy)") from None
    key = hashlib.sha256(SOURCE.read_bytes() + sys.version.encode() + mypy_version.encode()).hexdigest()[:16]
    root = Path(os.environ.get("OTEL_AGENTEVAL_CACHE") or Path.home() / ".cache" / "otel-agenteval")
    return root / "bench-floor" / key


def built_module(where: Path) -> Path | None:
    """The extension module built in ``where`` earlier, if any."""
    found = sorted(where.glob(f"{MODULE}.*.so")) + sorted(where.glob(f"{MODULE}.*.pyd"))
    return found[0] if found else None


def build(where: Path) -> Path:
    """Compile the floor's source in ``where`` (about 15 s on two cores); the extension module's path."""
    where.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SOURCE, where / f"{MODULE}.py")
    print(f"--compiled-floor: compiling {SOURCE.name} with mypyc into {where}", file=sys.stderr, flush=True)
    done = subprocess.run([sys.executable, "-m", "mypyc", *MYPYC_FLAGS, f"{MODULE}.py"], cwd=where,
                          capture_output=True, text=True, check=False)
    built = built_module(where)
    shutil.rmtree(where / "build", ignore_errors=True)  # the generated C and objects: only the module is kept
    if done.returncode != 0 or built is None:
        raise SystemExit(f"--compiled-floor: mypyc failed (exit {done.returncode}):\n{(done.stdout + done.stderr)[-2000:]}")
    return built


def compiled_floor() -> Any:
    """The compiled module (``Floor``, ``DeferredFloor``), built on first use."""
    where = cache_dir()
    path = built_module(where) or build(where)
    spec = importlib.util.spec_from_file_location(MODULE, path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"--compiled-floor: cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
