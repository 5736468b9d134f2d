"""``Simulation.fork(sampler=..., rng=...)``: a fork on a sampled future.

A sampler that answers the truth must give the very continuation of a plain fork; a real
sampler (the shipped predictor, ``PredictedFutures``) a different one, the same for the
same seed; the original never sees any of it; redrawn arrivals keep the run's rate.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import pytest
from test_fork import _metrics

from scalesched.cluster import get_cluster
from scalesched.cluster.tables import ClusterTables
from scalesched.decision.cycle import drive
from scalesched.decision.features import Decision
from scalesched.policies import get_policy
from scalesched.predict.futures import PredictedFutures
from scalesched.sim.engine import Simulation
from scalesched.sim.futures import task_level
from scalesched.sim.scenario import Scenario, build_jobs, stream_jobs
from scalesched.workload.instance import TaskInstance

RATE = 2.6


class TruthSampler:
    """Answers the realised values: a fork with it must continue as a plain fork does."""

    def __init__(self, arrivals: np.ndarray) -> None:
        self.true = np.asarray(arrivals, dtype=float)

    def redraw_task(self, task: TaskInstance, pattern: str, level: float) -> TaskInstance:
        assert 0.0 < level < 1.0
        return task

    def arrivals(
        self, seen: np.ndarray, now: float, n: int, rng: np.random.Generator
    ) -> np.ndarray:
        assert np.array_equal(seen, self.true[: seen.size]) and n == self.true.size - seen.size
        return self.true[seen.size :]


def _sim(*, stream: bool, workflows: int = 60, seed: int = 11) -> Simulation:
    spec = get_cluster("hetero-16")
    tables = ClusterTables(spec)
    scenario = Scenario(workload="agentic-mix", workflows=workflows, rate=RATE, seed=seed)
    jobs = (stream_jobs if stream else build_jobs)(tables, scenario)
    return Simulation(spec, jobs, tables=tables)


def _true_arrivals(sim: Simulation) -> np.ndarray:
    return np.array([sim.arrival_time(i) for i in range(sim.n_jobs)])


def _mid_run(stream: bool) -> tuple[Simulation, Any, Decision]:
    sim = _sim(stream=stream)
    policy = get_policy("eft")
    policy.reset(4)
    pending = drive(sim, policy, until=lambda: sim.now >= 10.0)
    assert pending is not None and sim.in_system > 0 and not sim.done
    return sim, policy, pending


def _finish(sim: Simulation, policy: Any, pending: Decision) -> dict[str, Any]:
    policy = copy.deepcopy(policy)
    sim.apply(policy.select(pending))
    drive(sim, policy)
    assert sim.done
    return _metrics(sim)


@pytest.mark.parametrize("stream", [False, True], ids=["up-front", "streamed"])
def test_a_truthful_sampler_continues_bit_identically(stream: bool) -> None:
    sim, policy, pending = _mid_run(stream)
    plain = _finish(sim.fork(), policy, pending)
    truthful = sim.fork(sampler=TruthSampler(_true_arrivals(sim)), rng=np.random.default_rng(3))
    assert _finish(truthful, policy, pending) == plain
    assert truthful._futures is not None and truthful._futures.drawn  # the path was taken


@pytest.mark.parametrize("stream", [False, True], ids=["up-front", "streamed"])
def test_a_sampled_future_differs_is_reproducible_and_leaves_the_original_alone(
    stream: bool,
) -> None:
    whole = _sim(stream=stream)
    policy = get_policy("eft")
    policy.reset(4)
    drive(whole, policy)
    expected = _metrics(whole)

    sim, policy, pending = _mid_run(stream)
    arrivals, heap = _true_arrivals(sim), list(sim._heap)
    tasks = dict(enumerate(sim.tasks.of)) if isinstance(sim.tasks.of, list) else dict(sim.tasks.of)
    sampler = PredictedFutures()
    runs = [
        _finish(sim.fork(sampler=sampler, rng=np.random.default_rng(seed)), policy, pending)
        for seed in (7, 7, 8)
    ]
    assert runs[0] == runs[1]  # seed-reproducible
    assert runs[0] != runs[2]  # and the seed matters
    assert runs[0]["avg_response_time_s"] != expected["avg_response_time_s"]

    # The original: same arrivals, heap and task objects, and the same future to the end.
    assert np.array_equal(_true_arrivals(sim), arrivals) and sim._heap == heap
    now = dict(enumerate(sim.tasks.of)) if isinstance(sim.tasks.of, list) else sim.tasks.of
    assert all(now[g] is t for g, t in tasks.items())
    assert sim._task is not None and sim._futures is None
    assert _finish(sim, policy, pending) == expected


def test_only_tasks_not_started_are_redrawn() -> None:
    sim, policy, pending = _mid_run(False)
    started = [g for g in range(sim.n_tasks) if not math.isnan(sim.started_at[g])]
    waiting = [g for g in range(sim.n_tasks) if math.isnan(sim.started_at[g])]
    assert started and waiting
    fork = sim.fork(sampler=PredictedFutures(), rng=np.random.default_rng(1))
    assert all(fork._task(g) is sim.tasks.of[g] for g in started)
    redrawn = [fork._task(g) for g in waiting]
    llm = [(new, sim.tasks.of[g]) for new, g in zip(redrawn, waiting, strict=True)]
    llm = [(new, old) for new, old in llm if old.kind == "llm"]
    assert sum(new.output_tokens != old.output_tokens for new, old in llm) > 0.8 * len(llm)
    for new, old in llm:  # what a scheduler sees is left as it was
        assert new.output_tokens_est == old.output_tokens_est
        assert new.difficulty_hint == old.difficulty_hint and new.id == old.id
    # Common random numbers: another fork from the same generator state draws the same.
    again = sim.fork(sampler=PredictedFutures(), rng=np.random.default_rng(1))
    assert [again._task(g) for g in reversed(waiting)] == redrawn[::-1]


def test_a_shared_fork_has_the_same_future_and_changes_nothing() -> None:
    """``fork(shared=True)`` (what the compiled core takes over on a sampled future): the
    same arrival times, heap and drawn truths as a full fork from the same generator,
    read in any order, and the original left as it was."""
    sim, _, _ = _mid_run(False)
    arrivals, heap, jobs = _true_arrivals(sim), list(sim._heap), sim.jobs
    full = sim.fork(sampler=PredictedFutures(), rng=np.random.default_rng(5))
    view = sim.fork(sampler=PredictedFutures(), rng=np.random.default_rng(5), shared=True)
    assert np.array_equal(_true_arrivals(view), _true_arrivals(full))
    assert view._heap == full._heap and view.tasks.jobs is view.jobs
    assert view._futures is not None and full._futures is not None
    ids = range(sim.n_tasks)
    truths = [view._futures.truths(g) for g in reversed(ids)][::-1]
    for g, got in zip(ids, truths, strict=True):
        task = full._task(g)
        assert got == (None if task is sim.tasks.of[g] else view._futures.truths_of(task))
        assert view._task(g) == task  # a task built from the truths drawn first
    assert np.array_equal(_true_arrivals(sim), arrivals) and sim._heap == heap
    assert sim.jobs is jobs and sim.tasks.jobs is jobs and sim._futures is None


def test_a_fork_of_a_sampled_fork_keeps_its_draws() -> None:
    sim, _, _ = _mid_run(False)
    fork = sim.fork(sampler=PredictedFutures(), rng=np.random.default_rng(2))
    g = next(g for g in range(sim.n_tasks) if math.isnan(sim.started_at[g]))
    drawn = fork._task(g)
    nested = fork.fork()
    assert nested._futures is not None and fork._futures is not None
    assert nested._task(g) == drawn and nested._futures is not fork._futures
    assert nested._futures.sampler is fork._futures.sampler


def test_redrawn_arrivals_keep_the_rate() -> None:
    sim = _sim(stream=True, workflows=400, seed=5)
    policy = get_policy("eft")
    drive(sim, policy, until=lambda: sim.now >= 40.0)
    first = next(i for i in range(sim.n_jobs) if sim.arrival_time(i) > sim.now)
    assert first >= 60  # enough seen to estimate the rate from
    for sampler in (PredictedFutures(), PredictedFutures(rate_wps=RATE)):
        fork = sim.fork(sampler=sampler, rng=np.random.default_rng(0))
        times = np.array([fork.arrival_time(i) for i in range(first, sim.n_jobs)])
        assert times[0] > sim.now and np.all(np.diff(times) >= 0)
        assert not np.array_equal(times, _true_arrivals(sim)[first:])
        rate = (times.size - 1) / (times[-1] - times[0])
        assert abs(rate / RATE - 1) < 0.25, rate
        assert [fork.arrival_time(i) for i in range(first)] == [
            sim.arrival_time(i) for i in range(first)
        ]


def test_task_levels_are_uniform_and_keyed() -> None:
    levels = np.array([task_level(123, g) for g in range(20000)])
    assert levels.min() > 0 and levels.max() < 1
    assert abs(levels.mean() - 0.5) < 0.01 and abs(np.median(levels) - 0.5) < 0.01
    assert task_level(123, 5) == task_level(123, 5) != task_level(124, 5)


def test_a_sampler_needs_a_generator() -> None:
    sim, _, _ = _mid_run(False)
    with pytest.raises(ValueError, match="rng"):
        sim.fork(sampler=PredictedFutures())


@pytest.mark.parametrize("stream", [False, True], ids=["up-front", "streamed"])
def test_the_forks_jobs_arrive_at_the_redrawn_times(stream: bool) -> None:
    sim, policy, pending = _mid_run(stream)
    first = next(i for i in range(sim.n_jobs) if sim.arrival_time(i) > sim.now)
    fork = sim.fork(sampler=PredictedFutures(), rng=np.random.default_rng(4))
    fork.apply(copy.deepcopy(policy).select(pending))
    drive(fork, copy.deepcopy(policy), until=lambda: fork.now >= fork.arrival_time(first + 3))
    for ji in range(first, first + 3):  # arrived in the fork: the job says when
        assert fork.jobs[ji].arrival == fork.arrival_time(ji) != sim.arrival_time(ji)
    if not stream:
        assert fork.jobs[first - 1] is sim.jobs[first - 1]
        assert fork.jobs[-1].arrival == fork.arrival_time(sim.n_jobs - 1)
