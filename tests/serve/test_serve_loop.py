"""The serving commands' event loop: uvloop when installed, asyncio's own otherwise."""

from __future__ import annotations

import asyncio
import sys

from scalesched.serve import loop


async def _which() -> str:
    await asyncio.sleep(0)
    return type(asyncio.get_running_loop()).__module__


def test_without_uvloop_the_commands_run_on_asyncios_loop(monkeypatch):
    monkeypatch.setitem(sys.modules, "uvloop", None)  # an import of it now fails
    assert loop.loop_factory() is None and loop.loop_name() == "asyncio"
    assert loop.run(_which()).startswith("asyncio")
    assert loop.new_event_loop().__class__.__module__.startswith("asyncio")


def test_with_uvloop_installed_the_commands_run_on_it():
    try:
        import uvloop  # noqa: F401
    except ImportError:
        assert loop.loop_name() == "asyncio"
        return
    assert loop.loop_name() == "uvloop"
    assert loop.run(_which()).startswith("uvloop")
