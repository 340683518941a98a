"""The event loop the HTTP listeners run on: uvloop when it is installed, else the standard library's.

uvloop (libuv, in C) runs the transports that the standard library runs in Python: reading a
2 MB OTLP body in 256 KB chunks, pausing and resuming the socket around each, was ~5.5% of
``serve``'s CPU samples on asyncio and is 2.2% on uvloop. Both loops serve the same ASGI apps;
``--loop asyncio`` picks the standard one.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Callable, Coroutine
from typing import Any

from ..config import ConfigError

LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def has_uvloop() -> bool:
    try:
        return importlib.util.find_spec("uvloop") is not None
    except (ImportError, ValueError):
        return False


def chosen(name: str) -> str:
    """A validated ``--loop``: ``auto`` -> ``uvloop`` when installed, else ``asyncio``; ``uvloop``
    not installed: :class:`ConfigError`."""
    if name == "auto":
        return "uvloop" if has_uvloop() else "asyncio"
    if name == "uvloop" and not has_uvloop():
        raise ConfigError("invalid --loop: uvloop is not installed (pip install 'otel-agenteval[serve]', "
                          "or --loop asyncio)")
    return name


def factory(name: str) -> LoopFactory:
    """A function making a new loop of the kind :func:`chosen` returned (``uvloop`` or ``asyncio``)."""
    if name == "uvloop":
        import uvloop

        return uvloop.new_event_loop  # type: ignore[no-any-return]
    return asyncio.new_event_loop


def run(main: Coroutine[Any, Any, None], new_loop: LoopFactory) -> None:
    """``asyncio.run(main)`` on a loop from ``new_loop``, in the calling thread (not the main one)."""
    runner = getattr(asyncio, "Runner", None)  # Python 3.11+
    if runner is not None:
        with runner(loop_factory=new_loop) as r:
            r.run(main)
        return
    loop = new_loop()
    try:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(main)
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        asyncio.set_event_loop(None)
        loop.close()
