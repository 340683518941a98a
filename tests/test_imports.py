"""Imports go one way: no module of the package imports, even lazily or for types only, a module
that imports it back; and every module imports on its own, in a fresh interpreter."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / ".ci"))

from import_graph import cycles, modules  # noqa: E402


def test_no_import_cycles() -> None:
    assert cycles(ROOT / "otel_agenteval") == []


# Third-party packages are imported once in a parent process; each module of ours is then
# imported alone in a child forked from it (a fresh interpreter per module, without the cost).
ALONE = r"""
import os, sys, traceback
import opentelemetry.sdk.trace, prometheus_client, pydantic, structlog, yaml, orjson  # noqa: F401
failed = []
for name in sys.argv[1:]:
    pid = os.fork()
    if pid == 0:
        try:
            __import__(name)
        except BaseException:
            traceback.print_exc()
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        failed.append(name)
print(" ".join(failed))
"""


# Hooks for frameworks that live in their own environments (.ci/frameworks.sh): imported there, by
# their end-to-end tests; here only where the framework happens to be installed.
OWN_ENVIRONMENT = {"otel_agenteval.guard.hooks.strands": "strands", "otel_agenteval.guard.hooks.google_adk": "google.adk"}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def test_each_module_imports_alone() -> None:
    names = sorted(m for m in modules(ROOT / "otel_agenteval") if not m.endswith("__main__")
                   and (m not in OWN_ENVIRONMENT or _installed(OWN_ENVIRONMENT[m])))
    out = subprocess.run([sys.executable, "-c", ALONE, *names], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == [], out.stderr[-4000:]


def test_the_module_diagram_in_the_docs_is_the_codes() -> None:
    """docs/architecture.md's module diagram is drawn from the imports (.ci/module_diagram.py)."""
    from module_diagram import DOC, block, in_doc

    assert in_doc(DOC.read_text()) == block(), "run: python .ci/module_diagram.py --write"
