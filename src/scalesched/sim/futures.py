"""Sampled futures: a fork of a running simulation whose unrevealed truths are redrawn.

``Simulation.fork()`` continues with the *true* future of the run (the realised arrivals,
output lengths and tool latencies), which makes a lookahead over forks clairvoyant.
``Simulation.fork(sampler=..., rng=...)`` redraws in the copy what a scheduler could not
know at the fork's instant, from a ``FutureSampler`` (what the scheduler believes: the
predictors of ``scalesched.predict`` implement one) and a seeded generator:

* the output length of every LLM call that has not started (not yet admitted to an
  engine's batch), and the external latency of every tool call that has not started
  (no core taken yet, no cache hit), in jobs in flight and in jobs still to come;
* the arrival times of the jobs that have not arrived (``FutureSampler.arrivals``).

Kept true, on purpose or for now (docs/simulator.md, "Sampled futures"):

* calls already started: an admitted call has its KV reserved for prompt + output (the
  engine's simplification), so its length is fixed at admission; a running tool keeps its
  latency. A running call's remaining tokens are thus known to the fork: a residual
  clairvoyance over at most one batch per engine.
* the DAG structure (branch outcomes, fan-out widths, loop counts) of jobs in flight and of
  future jobs: which tasks exist is fixed when a workflow is realised and the run's task
  ids depend on it. Only their sizes are redrawn.

Redraws are lazy and order-free: a task's draw is made the first time the fork reads it,
at a uniform level that is a hash of the fork's key (one draw from ``rng``) and the task's
id. Forks made from generators in the same state therefore draw the same value for the same
task whatever order their events read them in (common random numbers across candidate
placements), and only the tasks a fork actually reaches cost a draw. The original is never
touched: its tasks, jobs, arrival times and event heap are left as they were.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from scalesched.sim.events import ARRIVE
from scalesched.workload.instance import Job, TaskInstance

_MASK = (1 << 64) - 1

Truths = tuple[int, int, float]
"""A task's hidden truths: (output_tokens, replay_tokens, ext_latency)."""


def with_truths(task: TaskInstance, truths: Truths) -> TaskInstance:
    """``task`` with the hidden truths ``truths`` (``FutureSampler.redraw_truths``)."""
    out, replay, ext = truths
    return dataclasses.replace(task, output_tokens=out, replay_tokens=replay, ext_latency=ext)


class NoFutureYet(ValueError):
    """A sampler cannot draw a future at this instant (``FutureSampler.arrivals`` with no
    time yet elapsed to estimate a rate from): a lookahead then answers without one."""


class FutureSampler(Protocol):
    """What a scheduler believes about what it cannot see: draws of hidden truths."""

    def redraw_task(self, task: TaskInstance, pattern: str, level: float) -> TaskInstance:
        """``task`` (not started) with its hidden truths (``output_tokens``,
        ``ext_latency``, ``replay_tokens``) drawn at uniform ``level`` in (0, 1); the
        fields a scheduler sees must be left as they are. (A sampler may also offer
        ``redraw_truths(task, pattern, level)``, the same draw as a ``Truths`` tuple:
        ``with_truths(task, truths)`` must equal ``redraw_task``'s task. The compiled core's
        take-over then skips building the tasks.)"""
        ...

    def arrivals(
        self, seen: np.ndarray, now: float, n: int, rng: np.random.Generator
    ) -> np.ndarray:
        """``n`` non-decreasing arrival times, all after ``now``, for the jobs that have not
        arrived, given the arrival times ``seen`` so far (in order); ``NoFutureYet`` where
        nothing seen yet says enough to draw them."""
        ...


def task_level(key: int, gid: int) -> float:
    """A uniform level in (0, 1) for task ``gid`` under fork key ``key`` (splitmix64 of the
    pair): the same pair gives the same level in every fork."""
    z = (key + 0x9E3779B97F4A7C15 * (gid + 1)) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    z ^= z >> 31
    return ((z >> 11) + 0.5) / float(1 << 53)


class RedrawnTasks:
    """The fork's task lookup (``Simulation._task``): a task that had not started when the
    fork was made is redrawn on first read, and keeps that draw; the rest are the truth."""

    def __init__(self, sim: Any, sampler: FutureSampler, key: int) -> None:
        self.sim = sim
        self.sampler = sampler
        self.key = key
        self.drawn: dict[int, TaskInstance] = {}
        """Redrawn tasks by origin id (hedged copies share their task's draw)."""
        self._truths: dict[int, Truths] = {}
        """Redrawn truths by origin id, drawn by ``truths`` and not built into a task yet."""
        self._kept: set[int] = set()
        """Origin ids ``truths`` found started before the fork (their truths kept)."""

    def task(self, gid: int) -> TaskInstance:
        sim = self.sim
        origin = sim.origin[gid]
        hit = self.drawn.get(origin)
        if hit is not None:
            return hit
        true = sim.tasks.of[gid]
        truths = self._truths.pop(origin, None)
        if truths is not None:  # drawn by ``truths``: the same task redraw_task builds
            drawn = with_truths(true, truths)
        elif self._started(origin):
            return true  # started before the fork: its truth is already in use
        else:
            drawn = self.sampler.redraw_task(true, self._pattern(origin), self._level(origin))
        self.drawn[origin] = drawn
        return drawn

    def truths(self, gid: int) -> Truths | None:
        """The hidden truths of task ``gid`` in this fork, (output_tokens, replay_tokens,
        ext_latency), without building the task; None where the fork keeps its truth.
        The compiled core's take-over reads these: the same draws as ``task`` (each task
        is drawn once whichever is read first), a third of its cost."""
        origin = self.sim.origin[gid]
        hit = self.drawn.get(origin)
        if hit is not None:
            return hit.output_tokens, hit.replay_tokens, hit.ext_latency
        got = self._truths.get(origin)
        if got is not None:
            return got
        if origin in self._kept or self._started(origin):
            self._kept.add(origin)  # started before the fork: so it stays
            return None
        redraw = getattr(self.sampler, "redraw_truths", None)
        if redraw is None:  # a sampler that only redraws whole tasks
            return self.truths_of(self.task(gid))
        true = self.sim.tasks.of[gid]
        got = self._truths[origin] = redraw(true, self._pattern(origin), self._level(origin))
        return got

    @staticmethod
    def truths_of(task: TaskInstance) -> Truths:
        return task.output_tokens, task.replay_tokens, task.ext_latency

    def _pattern(self, origin: int) -> str:
        sim = self.sim
        return str(sim.jobs[sim.tasks.job_of[origin]].workflow.pattern)

    def _level(self, origin: int) -> float:
        return task_level(self.key, origin)

    def _started(self, origin: int) -> bool:
        """Whether the task, or a hedged copy of it, had started when it was first read:
        a start in the fork reads the task first, so a start seen here predates the fork."""
        started = self.sim.started_at
        copies = self.sim._copies.get(origin)
        if copies is None:  # no hedged copy: the task's own start
            return not math.isnan(started[origin])
        return any(not math.isnan(started[x]) for x in copies)


class RedrawnStream:
    """A streamed run's jobs with the arrival times of the fork (the workflows unchanged)."""

    def __init__(self, base: Any, arrivals: np.ndarray) -> None:
        self.base = base
        self.arrivals = arrivals

    def __len__(self) -> int:
        return int(self.arrivals.size)

    def job(self, i: int) -> Job:
        return dataclasses.replace(self.base.job(i), arrival=float(self.arrivals[i]))


class RedrawnJobs(Sequence[Job]):
    """A run's job list with the fork's arrival times from job ``first`` on, each job
    rebuilt only when read (a fork reaches few of the jobs still to come)."""

    def __init__(self, base: Sequence[Job], times: np.ndarray, first: int) -> None:
        self.base, self.times, self.first = base, times, first
        self._made: dict[int, Job] = {}

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        i = i + len(self) if i < 0 else i
        if i < self.first:
            return self.base[i]
        job = self._made.get(i)
        if job is None:
            job = dataclasses.replace(self.base[i], arrival=float(self.times[i]))
            self._made[i] = job
        return job


def after_fork(clone: Any, sampler: FutureSampler | None, rng: np.random.Generator | None) -> Any:
    """``Simulation.fork``'s last step: a fork of a redrawn fork keeps reading its redrawn
    tasks; with a ``sampler`` (and a seeded ``rng``) the clone is redrawn now."""
    if clone._futures is not None:
        clone._task = clone._futures.task
    if sampler is not None:
        if rng is None:
            raise ValueError("fork(sampler=...) needs a seeded rng")
        redraw(clone, sampler, rng)
    return clone


def redraw(sim: Any, sampler: FutureSampler, rng: np.random.Generator) -> None:
    """Make the freshly forked ``sim`` continue on sampled futures (see the module
    docstring). Called by ``Simulation.fork``; ``sim`` shares nothing it changes here."""
    key = int(rng.integers(0, 2**63))
    sim._futures = RedrawnTasks(sim, sampler, key)
    sim._task = sim._futures.task
    _redraw_arrivals(sim, sampler, rng)


def _next_arrival(heap: Sequence[tuple[float, int, int, int, int]]) -> int | None:
    """Position in the heap of the pending arrival event (one at most), or None."""
    for pos, entry in enumerate(heap):
        if entry[2] == ARRIVE:
            return pos
    return None


def _redraw_arrivals(sim: Any, sampler: FutureSampler, rng: np.random.Generator) -> None:
    """Replace the arrival times of the jobs not yet arrived, and the pending arrival."""
    pos = _next_arrival(sim._heap)
    if pos is None:
        return  # every job has arrived
    first = sim._heap[pos][3]
    seen = np.array(sim._arrivals[:first], dtype=float)
    n = sim.n_jobs - first
    new = np.asarray(sampler.arrivals(seen, float(sim.now), n, rng), dtype=float)
    if new.shape != (n,) or not np.all(np.isfinite(new)) or np.any(np.diff(new) < 0):
        raise ValueError(f"FutureSampler.arrivals: need {n} finite non-decreasing times")
    if n and not new[0] >= sim.now:
        raise ValueError("FutureSampler.arrivals: the first time is before the fork's clock")
    times = np.concatenate([seen, new])
    sim._arrivals = times
    sim._heap[pos] = sim._heap[-1]
    sim._heap.pop()
    heapq.heapify(sim._heap)
    sim._push_arrival(first)
    if sim.stream is not None:
        sim.stream = RedrawnStream(sim.stream, times)
        return
    jobs = RedrawnJobs(sim.jobs, times, first)  # the original's list stays as it was
    sim.jobs = jobs
    sim.tasks.jobs = jobs
