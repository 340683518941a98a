"""What the same work costs spread over many native functions (``overhead.py --footprint``).

The processor's arm runs 1.02-1.03x the floor's instructions in 1.13-1.20x its time (issue 44).
These two arms ask whether the difference is the code a run passes through: both are the floor plus
``CALLS_A_SPAN`` calls at each span's end into functions compiled with mypyc (:mod:`_compiled_floor`)
that are the same code but for their constants. ``footprint_hot`` calls one of them every time;
``footprint_spread`` a different group at each of a run's 14 spans, ``CALLS_A_SPAN`` x 14 distinct
functions a run (~1.2 KB of machine code each), about what the processor's path passes through
(211 compiled functions, ~240 KB a run). Same instructions, different footprint: spread / hot is
what the footprint alone costs on this machine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from _compiled_floor import load
from _floor import Floor
from _workloads import SPANS_PER_RUN

CALLS_A_SPAN = 15
FUNCTIONS = CALLS_A_SPAN * SPANS_PER_RUN
MODULE = "_footprint_functions"


def source(functions: int = FUNCTIONS) -> str:
    """``functions`` functions of one shape (dict reads, a string test, arithmetic, a tuple), each
    its own constants so each is its own machine code, and ``FUNCTIONS``, the list of them."""
    out = ["from __future__ import annotations", "", "from typing import Any", ""]
    for i in range(functions):
        out += [f"def f{i}(d: dict[str, Any], n: int) -> int:",
                f"    if d.get('k{i}') is not None:",
                f"        n += {i + 1}",
                "    b = d.get('gen_ai.tool.name')",
                f"    if isinstance(b, str) and b == 'x{i}':",
                f"        n += {i + 3}",
                f"    if n * {i + 7} + {i + 5} > {1_000_000 + i}:",
                "        n -= 1",
                f"    if d.get('gen_ai.operation.name') == 'op{i}':",
                "        n += 2",
                f"    t = (n, {i})",
                f"    if t[1] == {i + 1}:",
                "        n += t[0]",
                "    return n", "", ""]
    out.append("FUNCTIONS = [" + ", ".join(f"f{i}" for i in range(functions)) + "]")
    return "\n".join(out) + "\n"


def functions() -> list[Callable[[dict[str, Any], int], int]]:
    """The compiled functions, built on first use (~20 s) into the cache outside the clone."""
    module = load(source(), MODULE, "bench-footprint", "--footprint")
    found: list[Callable[[dict[str, Any], int], int]] = module.FUNCTIONS
    return found


class FootprintFloor(Floor):
    """The floor, and at each span's end ``CALLS_A_SPAN`` calls into the compiled functions: one
    function each time (``spread=False``), or at the k-th span of a run the k-th group of distinct
    ones (``spread=True``)."""

    def __init__(self, compiled: list[Callable[[dict[str, Any], int], int]], spread: bool) -> None:
        super().__init__()
        self.groups = [compiled[k * CALLS_A_SPAN:(k + 1) * CALLS_A_SPAN] if spread else [compiled[0]] * CALLS_A_SPAN
                       for k in range(SPANS_PER_RUN)]
        self.ended = 0
        self.total = 0  # the functions' results, kept so no call is for nothing

    def on_end(self, span: Any) -> None:
        super().on_end(span)
        attrs = span._attributes._dict
        n = 0
        for f in self.groups[self.ended % SPANS_PER_RUN]:
            n = f(attrs, n)
        self.ended += 1
        self.total += n
