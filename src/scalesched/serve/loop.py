"""The event loop the serving processes run on: uvloop when it is installed.

The gateway's added latency is mostly the second HTTP hop's event-loop and transport work
(docs/serve.md, "Measured"); uvloop, a libuv event loop with the same asyncio interface,
does that work in C. It is optional (in the ``serve`` extra where it builds): without it
every command runs on asyncio's own loop, with the same behaviour, only slower.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop constructor, or None (asyncio's default loop) when not installed."""
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def new_event_loop() -> asyncio.AbstractEventLoop:
    factory = loop_factory()
    return factory() if factory is not None else asyncio.new_event_loop()


def run(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on :func:`new_event_loop`'s kind of loop."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(coro)


def loop_name() -> str:
    """Which loop the commands use (for reports)."""
    return "uvloop" if loop_factory() is not None else "asyncio"
