"""Imports go one way: no module of the package imports, even lazily or for types only, a module
that imports it back; and every module imports on its own, in a fresh interpreter."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / ".ci"))

from import_graph import cycles, graph, modules  # noqa: E402


def test_no_import_cycles() -> None:
    assert cycles(ROOT / "otel_agenteval") == []


# The house by stage, lowest first: a package may import only packages on an earlier line (or
# itself). Front doors on one line do not import each other. docs/architecture.md says why.
STAGES = [
    ["model"],
    ["policy"],
    ["reading"],
    ["rules"],
    ["engine"],
    ["metrics"],
    ["judging"],  # the sampled judge: a sink of finished runs, like the metrics
    ["guard"],
    ["processor"],
    ["zero_code", "replay", "scoring"],
    ["receiver", "rerun"],  # doors built on replay's readers (and, for rerun, the processor)
    ["cli"],
    ["__init__", "__main__"],
]
RANK = {name: rank for rank, names in enumerate(STAGES) for name in names}


def package_of(module: str) -> str:
    """``otel_agenteval.engine.store`` -> ``engine``; the package's own ``__init__`` -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def against_the_stages(g: dict[str, set[str]]) -> list[str]:
    """The imports between packages that do not point to an earlier stage."""
    return sorted(
        f"{src} imports {dst}"
        for src, targets in g.items()
        for dst in targets
        if package_of(src) != package_of(dst) and RANK[package_of(dst)] >= RANK[package_of(src)]
    )


def test_imports_go_down_the_stages() -> None:
    """Every import between packages points to an earlier stage (lazy and type-only ones too)."""
    g = graph(ROOT / "otel_agenteval")
    packages = {package_of(m) for m in g}
    assert packages <= RANK.keys(), f"place these in STAGES: {sorted(packages - RANK.keys())}"
    assert against_the_stages(g) == [], "\n".join(against_the_stages(g))


def test_only_the_front_doors_sit_at_the_package_root() -> None:
    root = {p.stem for p in (ROOT / "otel_agenteval").glob("*.py")}
    assert root == {"__init__", "__main__", "processor", "zero_code"}


MAX_MODULES = 12  # a package's modules, its __init__ and __main__ aside: past that, a sub-package
MAX_LINES = 300  # a module's


def test_each_package_is_small_and_each_module_short() -> None:
    """What a newcomer can take in: no package of more than 12 modules, no module over 300 lines."""
    crowded, long = [], []
    for folder in sorted({p.parent for p in (ROOT / "otel_agenteval").rglob("*.py")}):
        own = [p for p in folder.glob("*.py") if p.stem not in ("__init__", "__main__")]
        if len(own) > MAX_MODULES:
            crowded.append(f"{folder.relative_to(ROOT)}: {len(own)} modules")
        long += [f"{p.relative_to(ROOT)}: {n} lines" for p in folder.glob("*.py")
                 if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES]
    assert crowded == [] and long == [], "\n".join(crowded + long)


def test_the_stage_test_catches_an_import_against_the_order(tmp_path: Path) -> None:
    """The check above is not vacuous: an engine module importing metrics is found."""
    import shutil

    copy = tmp_path / "otel_agenteval"
    shutil.copytree(ROOT / "otel_agenteval", copy, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    store = copy / "engine" / "store.py"
    store.write_text(store.read_text() + "\nfrom ..metrics import catalogue  # noqa\n")
    assert against_the_stages(graph(copy)) == ["otel_agenteval.engine.store imports otel_agenteval.metrics.catalogue"]


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


def test_only_the_stage_paths_import() -> None:
    """The 0.1 module paths (a release never published) are gone: no alias, no import hook; the
    packages keep their public names."""
    code = r"""
import importlib, sys
import otel_agenteval
from otel_agenteval.guard.hooks.plain import guarded
from otel_agenteval.policy import Policy, ToolPolicy
from otel_agenteval.guard import Guard, default_guard
for old in ("trajectory", "exposition", "hooks.plain", "violation", "no_such_module"):
    try:
        importlib.import_module("otel_agenteval." + old)
    except ModuleNotFoundError:
        continue
    raise SystemExit("otel_agenteval." + old + " still imports")
assert not [f for f in sys.meta_path if type(f).__module__.startswith("otel_agenteval")], sys.meta_path
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]
