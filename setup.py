"""Build: the modules every span and every replayed record pass through are compiled with mypyc.

mypyc compiles the typed Python source as it is; the compiled build runs about 40% fewer
machine instructions per span. Without a C compiler, or with ``OTEL_AGENTEVAL_PURE_PYTHON=1``,
the package installs as plain Python and behaves the same (CI tests both).
Everything else (metadata, package data) is in pyproject.toml.
"""

from __future__ import annotations

import glob
import os
import runpy
import sys
import time

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# Third-party packages are typed as Any in compiled code, whether or not the build environment
# has them, so the compiled modules assume nothing about another package's version. Modules
# that are not compiled are read for their types only (their errors are the linters' business).
MYPY_FLAGS = ["--ignore-missing-imports", "--no-site-packages", "--follow-imports=silent", "--config-file=",
              "--python-version=3.10"]


SUFFIX_GLOB = ".pyd" if sys.platform == "win32" else ".so"  # compiled extension modules (stale_extensions)


def log(message: str) -> None:
    print(f"otel-agenteval build: {message}", file=sys.stderr, flush=True)


# the OTLP protobuf wire reader in C (otel_agenteval/replay/formats/native.py says why)
WIRE_C = Extension("otel_agenteval.replay.formats._wire_c",
                   [os.path.join("otel_agenteval", "replay", "formats", name) for name in ("_wire_c.c", "_wire_format.c")],
                   depends=[os.path.join("otel_agenteval", "replay", "formats", "_wire_format.h")])


BUILD = runpy.run_path(os.path.join("otel_agenteval", "cli", "build.py"))  # which modules, which flags


def compiled_paths() -> list[str]:
    return [os.path.join("otel_agenteval", *name.split(".")) + ".py" for name in BUILD["COMPILED_MODULES"]]


def stale_extensions() -> list[str]:
    """Compiled modules left in the tree by an earlier in-place build (``build_ext --inplace``).

    Python imports ``extract.cpython-311-x86_64-linux-gnu.so`` before ``extract.py``, so a plain
    Python build over such a tree (an editable install, above all) would load the old compiled
    module, which then fails to find its group module ``otel_agenteval__mypyc``.
    """
    found = glob.glob("otel_agenteval__mypyc*" + SUFFIX_GLOB)
    for path in [*compiled_paths(), WIRE_C.sources[0]]:
        stem = os.path.splitext(path)[0]
        found.extend(glob.glob(stem + ".*" + SUFFIX_GLOB))
        found.extend(glob.glob(stem + SUFFIX_GLOB))
    return sorted(set(found))


def plain_python(reason: str) -> list:
    """The plain Python build: say why, and remove a previous compiled build's modules from the tree."""
    log(f"{reason}: plain Python build")
    for path in stale_extensions():
        try:
            os.remove(path)
            log(f"removed {path} (left by a compiled build; it would shadow the .py source)")
        except OSError as exc:
            log(f"could not remove {path} ({exc.strerror}): delete it, or the stale compiled module loads")
    return []


METADATA_COMMANDS = {"egg_info", "dist_info", "sdist"}  # pip's metadata steps: nothing is compiled for them


def metadata_only() -> bool:
    """Whether this run of setup.py only writes metadata or an sdist (mypyc would run for nothing)."""
    commands = [arg for arg in sys.argv[1:] if not arg.startswith("-")]
    return bool(commands) and commands[0] in METADATA_COMMANDS


def compiled_extensions() -> list:
    if metadata_only():
        return []
    if os.environ.get("OTEL_AGENTEVAL_PURE_PYTHON", "") not in ("", "0"):
        return plain_python("OTEL_AGENTEVAL_PURE_PYTHON is set")
    try:
        from mypyc.build import mypycify
    except ImportError:
        return plain_python("mypyc is not installed")
    paths = compiled_paths()
    log(f"compiling {len(paths)} modules with mypyc, then C: a few minutes on two cores "
        "(OTEL_AGENTEVAL_PURE_PYTHON=1 installs plain Python in seconds, and behaves the same)")
    started = time.monotonic()
    try:
        extensions = mypycify([*MYPY_FLAGS, *paths], opt_level="3", group_name="otel_agenteval")
        log(f"mypyc: type-checked and translated to C in {time.monotonic() - started:.0f} s; compiling the C next")
        return [*extensions, WIRE_C]
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - mypyc reports type errors by exiting
        return plain_python(f"mypyc could not compile ({exc!r})")


class OptionalBuildExt(build_ext):
    """A failed compile (no C compiler, say) leaves the plain Python build, which works the same."""

    def build_extensions(self) -> None:
        if self.compiler.compiler_type == "unix":  # GCC or clang; MSVC exports nothing unasked already
            for extension in self.extensions:
                extension.extra_compile_args = [*extension.extra_compile_args, *BUILD["NATIVE_FLAGS"]]
        super().build_extensions()

    def run(self) -> None:
        started = time.monotonic()
        try:
            super().run()
            if self.extensions:
                log(f"compiled {len(self.extensions)} extension modules in {time.monotonic() - started:.0f} s")
        except Exception as exc:  # noqa: BLE001 - any compiler failure: fall back, and say so
            self.extensions = plain_python(f"compiling failed ({exc})")


setup(ext_modules=compiled_extensions(), cmdclass={"build_ext": OptionalBuildExt})
