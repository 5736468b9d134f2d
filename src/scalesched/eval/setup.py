"""Deprecated alias of :mod:`scalesched.runs.setup` (moved after 0.1.0, removed in 0.3.0):
import ``Scenario``, ``prepare`` and ``run`` from ``scalesched.runs.setup``."""

from __future__ import annotations

import warnings

from scalesched.runs.setup import (
    RunSetup,
    Scenario,
    build_jobs,
    prepare,
    run,
    scenario_capacity,
    stream_jobs,
    streams_by_default,
)

warnings.warn(
    "scalesched.eval.setup moved to scalesched.runs.setup; the old name goes in 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = [
    "RunSetup",
    "Scenario",
    "build_jobs",
    "prepare",
    "run",
    "scenario_capacity",
    "stream_jobs",
    "streams_by_default",
]
