"""The tool-result cache of one run (``--tool-cache on``): a repeated tool call whose
original has already produced its result returns that result instead of running.

A tool task marked ``repeat_of`` (:mod:`scalesched.workload.repeats`) is an identical call
to an earlier tool task of its workflow. When it lands on its server:

* the original has finished: a **hit**. The call takes no core and waits on nothing outside
  the cluster; it finishes ``LOOKUP_S`` seconds later (reading the result from the
  workflow's cache, held by the runtime, which no server's queue delays). The seconds it
  would have taken, its CPU work at the server's core speed plus its external latency,
  less the lookup, are counted as saved.
* the original is still running (it is not an ancestor of the repeat, and a scheduler
  started the repeat first): a **miss**; the call runs normally. Waiting for the original
  instead could only help when the original is about to finish, and would hold the
  repeat's server slot on a prediction; running is the simple, never-stuck choice.

The cache is per workflow and lives as long as the workflow: results of other workflows
are never reused (their inputs differ), and nothing is evicted.
"""

from __future__ import annotations

from array import array

import numpy as np

from scalesched.kernel.metrics import packed

LOOKUP_S = 0.001
"""Seconds a cache hit takes (a key lookup and a copy of the result in memory)."""


class ToolCache:
    """The hits of one run: per hit, its job and the tool-seconds it saved."""

    def __init__(self) -> None:
        self._jobs = array("q")
        self._saved = array("d")

    def hit(self, ji: int, saved_s: float) -> None:
        self._jobs.append(ji)
        self._saved.append(max(0.0, saved_s))

    def extend(self, jobs: list[int], saved_s: list[float]) -> None:
        """Hits a compiled run kept (``EventRun.tool_cache_hits``), already clipped at 0."""
        self._jobs.extend(jobs)
        self._saved.extend(saved_s)

    def record(self) -> tuple[np.ndarray, np.ndarray]:
        """(job index per hit, seconds saved per hit) for ``RunRecord.tool_cache``."""
        return packed(self._jobs, np.int64), packed(self._saved, np.float64)
