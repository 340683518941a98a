"""Which threads are running the monitor's own code (rules, sinks) right now.

A set of thread idents: adding and discarding are single atomic operations, and the check every
span makes is whether the set is empty (it nearly always is) before asking for this thread's id.
"""

from __future__ import annotations

import threading
from typing import Final

_running: Final[set[int]] = set()
_ident: Final = threading.get_ident


def enter() -> None:
    """This thread starts running the monitor's code: spans it ends now are the monitor's."""
    _running.add(_ident())


def leave() -> None:
    _running.discard(_ident())


def in_monitor() -> bool:
    """Whether this thread is inside a rule or sink right now."""
    return bool(_running) and _ident() in _running


def forget_all() -> None:
    """In a forked child: only the forking thread survives, and it was not inside a rule."""
    _running.clear()
