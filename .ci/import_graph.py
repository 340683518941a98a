"""The package's import graph, read from the source (every import: top level, inside functions,
under ``TYPE_CHECKING``), and its cycles. ``python .ci/import_graph.py`` exits 1 on a cycle
(``make lint``); ``tests/test_imports.py`` asserts there is none.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def modules(package: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under ``package``."""
    out: dict[str, Path] = {}
    base = package.parent
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(base).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _targets(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    is_package = path.name == "__init__.py"
    here = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = here.split(".")
                origin = ".".join(parts[: len(parts) - node.level + 1])
                origin = f"{origin}.{node.module}" if node.module else origin
            else:
                origin = node.module or ""
            for alias in node.names:
                sub = f"{origin}.{alias.name}"
                if sub in known:
                    found.add(sub)
                elif origin in known:
                    found.add(origin)
    root = name.split(".")[0]
    found.discard(root)  # the package's own __init__ only re-exports: it is nobody's dependency
    found.discard(name)
    return found


def graph(package: Path) -> dict[str, set[str]]:
    known = modules(package)
    return {name: _targets(name, path, known) for name, path in known.items()}


def cycles(package: Path) -> list[list[str]]:
    """Each cycle once, as a list of modules starting at its smallest name."""
    g = graph(package)
    found: set[tuple[str, ...]] = set()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    counter = [0]

    def strongconnect(v: str) -> None:  # Tarjan: strongly connected components are the cycles
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.add(tuple(sorted(comp)))

    for v in sorted(g):
        if v not in index:
            strongconnect(v)
    return [list(c) for c in sorted(found)]


if __name__ == "__main__":
    pkg = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "otel_agenteval")
    bad = cycles(pkg)
    for c in bad:
        print("import cycle: " + " <-> ".join(c), file=sys.stderr)
    sys.exit(1 if bad else 0)
