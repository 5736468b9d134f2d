"""Every number the command line takes, checked at the door: one table of ranges by option
name, applied to every command and sub-command when the CLI starts.

Why one table rather than ``min=``/``max=`` on each option: click's float ranges let NaN
through (every comparison with NaN is false) and infinity through any open side, and an
option added later without bounds would take anything. Here every float option of any
command refuses NaN and +-inf whether or not it is listed, and an option whose name is in
:data:`RANGES` (``--rate``, ``--seed``, ``--samples``, ...) gets that range wherever it
appears, so a new command with a ``--seed`` is checked without a line of its own. A test
walks the command tree and fails on a number option missing from the table.

A value out of range is an ``InputError`` naming the option: one line, exit code 2.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MAX_SEED = 2**63 - 1
"""Largest seed (numpy's generators take any non-negative integer; files store int64)."""
MAX_WORKFLOWS = 1_000_000
"""Most workflows of one run (the simulator's own limit, ``sim.scenario.MAX_WORKFLOWS``)."""
MAX_SAMPLES = 100_000
"""Most sample workflows a planner profile draws (1000 is the default; more is minutes)."""
MAX_SECONDS = 86_400.0
"""Longest time limit or timeout (a day): past it a wait is a mistake."""
MAX_RATE = 1e6
"""Highest arrival rate, workflows per second: far past any cluster's capacity."""
MAX_BANDWIDTH_GBS = 1e5
"""Highest bandwidth or memory figure, GB/s or GB."""


@dataclass(frozen=True)
class Range:
    """Closed range ``[lo, hi]`` (``lo_open``: ``(lo, hi]``); None: unbounded on that side
    (still finite for floats)."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False

    def problem(self, value: float) -> str | None:
        """Why ``value`` is out of range, or None."""
        finite = not isinstance(value, float) or math.isfinite(value)
        below = self.lo is not None and (value <= self.lo if self.lo_open else value < self.lo)
        above = self.hi is not None and value > self.hi
        if finite and not below and not above:
            return None
        if self.lo == 0 and self.lo_open:
            most = "" if self.hi is None else f" at most {_show(self.hi)}"
            return f"must be a positive finite number{most}, got {value}"
        if self.lo is None and self.hi is None:
            return f"must be a finite number, got {value}"
        return f"must be in {self.describe()}, got {value}"

    def describe(self) -> str:
        lo = "-inf" if self.lo is None else _show(self.lo)
        hi = "inf" if self.hi is None else _show(self.hi)
        left = "(" if self.lo is None or self.lo_open else "["
        return f"{left}{lo}, {hi}{')' if self.hi is None else ']'}"


def _show(bound: float) -> str:
    """A bound as typed: integers in full, floats short."""
    return str(bound) if isinstance(bound, int) else f"{bound:g}"


def _positive(hi: float | None = None) -> Range:
    return Range(0, hi, lo_open=True)


def _count(lo: int = 0, hi: float | None = None) -> Range:
    return Range(lo, hi)


RANGES: dict[str, Range] = {
    # arrivals and sizes of a run
    "--rate": _positive(MAX_RATE),
    "--load": _positive(100.0),
    "--workflows": _count(1, MAX_WORKFLOWS),
    "--max-workflows": _count(1, MAX_WORKFLOWS),
    "--precision": Range(0, 1, lo_open=True),
    "--seed": _count(0, MAX_SEED),
    "--warmup": _count(0, MAX_WORKFLOWS),
    "--cooldown": _count(0, MAX_WORKFLOWS),
    "--tool-repeat": Range(0, 1),
    "--fail-rate": Range(0, 1),
    "--samples": _count(1, MAX_SAMPLES),
    "--steps": _count(1, 10**12),
    "--jobs": _count(1, 1024),
    "--window": _count(1, MAX_WORKFLOWS),
    # objectives
    "--slo": Range(1, 1e6),
    "--slo-p95": _positive(MAX_SECONDS * 365),
    # time limits and the runtime
    "--time-limit": _positive(MAX_SECONDS),
    "--bound-time-limit": _positive(MAX_SECONDS),
    "--bound-sample": _count(0, MAX_WORKFLOWS),
    "--connect-timeout": _positive(MAX_SECONDS),
    "--time-scale": _positive(100.0),
    "--max-retries": _count(0, 100),
    # serving: the gateway, emulated engines and the load generator
    "--port": _count(0, 65535),
    "--fleet-port": _count(1, 65535),
    "--max-pending": _count(1, 1_000_000),
    "--scrape-s": _positive(3600.0),
    "--timeout-s": _positive(MAX_SECONDS),
    "--object-store-mb": _count(75, 1 << 24),  # Ray's smallest object store, MiB
    # memory planner hardware and shape
    "--batch": _count(1, 1 << 20),
    "--seq": _count(1, 1 << 24),
    "--cpu-mem-gb": _positive(MAX_BANDWIDTH_GBS),
    "--pcie-gbs": _positive(MAX_BANDWIDTH_GBS),
    "--nvme-read-gbs": _positive(MAX_BANDWIDTH_GBS),
    "--nvme-write-gbs": _positive(MAX_BANDWIDTH_GBS),
}
"""The range of every number option, by name, wherever it appears."""

FINITE = Range()
"""What an unlisted float option gets: any finite number."""


def range_for(option: str, value: Any) -> Range | None:
    """The range ``value`` of ``option`` must be in (None: nothing to check)."""
    if option in RANGES:
        return RANGES[option]
    return FINITE if isinstance(value, float) else None


def check_number(option: str, value: Any) -> str | None:
    """Why ``value`` is not acceptable for ``option``, or None (non-numbers pass)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    bounds = range_for(option, value)
    return bounds.problem(value) if bounds is not None else None


def install_number_checks(command: Any) -> None:
    """Wrap the value processing of every option of ``command`` and its sub-commands so
    each number is checked as it is parsed (idempotent)."""
    for param in getattr(command, "params", []):
        if getattr(param, "_numbers_checked", False) or not getattr(param, "opts", None):
            continue
        param.process_value = _checked(param, param.process_value)
        param._numbers_checked = True
    for sub in getattr(command, "commands", {}).values():
        install_number_checks(sub)


def _checked(param: Any, process: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    from scalesched.errors import InputError

    option = max(param.opts, key=len)

    def process_value(ctx: Any, value: Any) -> Any:
        value = process(ctx, value)
        for item in value if isinstance(value, list | tuple) else (value,):
            why = check_number(option, item)
            if why is not None:
                raise InputError(option, str(param.name), why)
        return value

    return process_value
