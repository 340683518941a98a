"""The objects an arm makes, counted from a callgrind output file: calls into CPython's allocators.

Callgrind writes each call as a ``cfn=`` line (the function called, its name given once and then
named by ``(id)``, a table shared with ``fn=``) followed by ``calls=N ...``. Counting the calls into
``_PyObject_Malloc`` (every object allocation through pymalloc, larger ones passed on from there) and
``_PyObject_GC_Link`` (every object the collector tracks) says how many objects a run makes, which
neither the instruction count nor the time does.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

ALLOCATORS = {"objects": "_PyObject_Malloc", "tracked by the collector": "_PyObject_GC_Link"}
_NAMED = re.compile(r"\((\d+)\)(?: (.*))?")


def calls_into(path: Path, functions: set[str]) -> Counter[str]:
    """How many calls the collected part of a callgrind run made into each of ``functions``."""
    names: dict[str, str] = {}
    calls: Counter[str] = Counter()
    called: str | None = None
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith(("fn=", "cfn=")):
                key, _, rest = line.rstrip("\n").partition("=")
                m = _NAMED.fullmatch(rest)
                if m is None:
                    name: str | None = rest  # written without compression (--compress-strings=no)
                else:
                    if m.group(2):
                        names[m.group(1)] = m.group(2)
                    name = names.get(m.group(1))
                if key == "cfn":
                    called = name
            elif line.startswith("calls=") and called in functions:
                calls[called] += int(line[6:].split(maxsplit=1)[0])
                called = None
    return calls


def objects_made(path: Path, runs: int) -> dict[str, float]:
    """Objects a run, by allocator (see ``ALLOCATORS``); an allocator callgrind did not see (a
    stripped interpreter, another version's names) is left out."""
    calls = calls_into(path, set(ALLOCATORS.values()))
    return {what: calls[fn] / runs for what, fn in ALLOCATORS.items() if calls[fn]}
