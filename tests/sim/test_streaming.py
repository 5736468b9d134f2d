"""Streamed runs (jobs realised at arrival, retired when done) give the up-front numbers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from scalesched.decision.actions import Action, Defer, Hedge
from scalesched.decision.features import Decision
from scalesched.decision.scheduler import BaseScheduler
from scalesched.policies import get_policy
from scalesched.runs.setup import (
    STREAM_FROM,
    RunSetup,
    Scenario,
    prepare,
    run,
    streams_by_default,
)
from scalesched.sim.engine import Simulation
from scalesched.sim.scenario import JobStream

CLUSTER = "hetero-16"


class HedgeAndDefer(BaseScheduler):
    """Exercises copies and the deferred queue: every third task is hedged on its two
    fastest servers, every fifth deferred once, the rest go to the fastest."""

    name = "hedge-and-defer"

    def reset(self, seed: int) -> None:
        self.calls = 0

    def select(self, decision: Decision) -> int | Action:
        self.calls += 1
        finish = np.where(decision.mask, decision.exec_s, np.inf)
        order = np.argsort(finish, kind="stable")
        if self.calls % 5 == 0 and decision.can_defer:
            return Defer()
        if self.calls % 3 == 0 and np.isfinite(finish[order[1]]):
            return Hedge((int(order[0]), int(order[1])))
        return int(order[0])


def setups(scenario: Scenario) -> tuple[RunSetup, RunSetup]:
    streamed = prepare(CLUSTER, scenario, stream=True)
    up_front = prepare(CLUSTER, scenario, stream=False)
    assert isinstance(streamed.jobs, JobStream) and isinstance(up_front.jobs, list)
    return streamed, up_front


def same_metrics(a: dict[str, float | int | str], b: dict[str, float | int | str]) -> None:
    a, b = dict(a), dict(b)
    a.pop("sim_wall_time_s"), b.pop("sim_wall_time_s")
    assert a == b


@pytest.mark.parametrize("policy", ["eft", "least_loaded", "kv_aware", "random", "hedge-defer"])
@pytest.mark.parametrize("seed", [0, 7])
def test_streamed_runs_give_the_up_front_metrics(policy: str, seed: int) -> None:
    scenario = Scenario(workflows=90, rate=2.0, seed=seed)
    streamed, up_front = setups(scenario)

    def scheduler() -> BaseScheduler:
        return HedgeAndDefer() if policy == "hedge-defer" else get_policy(policy)  # type: ignore[return-value]

    a = run(streamed, scheduler())
    b = run(up_front, scheduler())
    same_metrics(a.metrics, b.metrics)
    assert int(a.metrics["measured_workflows"]) > 40
    np.testing.assert_array_equal(a.response_times, b.response_times)
    if policy == "hedge-defer":
        assert int(a.metrics["hedged_tasks"]) > 0 and int(a.metrics["deferrals"]) > 0


def test_bursty_shaped_and_replayed_arrivals_stream_identically(tmp_path: Path) -> None:
    times = tmp_path / "times.txt"
    times.write_text("\n".join(str(0.25 * (i // 3)) for i in range(60)))  # ties
    for arrivals in ("bursty", "azure-code", f"replay:{times}"):
        streamed, up_front = setups(Scenario(workflows=60, rate=3.0, arrivals=arrivals, seed=3))
        same_metrics(run(streamed, "eft").metrics, run(up_front, "eft").metrics)


def test_a_stream_realises_the_jobs_of_build_jobs_in_any_order() -> None:
    streamed, up_front = setups(Scenario(workflows=12, rate=1.0, seed=5))
    assert len(streamed.jobs) == 12
    for i in (11, 0, 5, -1):
        a, b = streamed.jobs[i], up_front.jobs[i]
        assert (a.workflow_id, a.arrival, a.workflow.name) == (
            b.workflow_id,
            b.arrival,
            b.workflow.name,
        )
        assert a.workflow.tasks == b.workflow.tasks and a.workflow.parents == b.workflow.parents
    assert [j.workflow_id for j in streamed.jobs[2:5]] == [2, 3, 4]
    with pytest.raises(IndexError):
        streamed.jobs[12]


def test_a_streamed_run_keeps_only_the_workflows_in_flight() -> None:
    setup = prepare(CLUSTER, Scenario(workflows=150, rate=2.0, seed=1), stream=True)
    peak = [0]

    class Watched(Simulation):
        def arrive(self, ji: int, now: float) -> None:
            super().arrive(ji, now)
            peak[0] = max(peak[0], len(self._in_flight))

    sim = Watched(setup.cluster, setup.jobs, tables=setup.tables)
    scheduler = HedgeAndDefer()
    scheduler.reset(0)
    decision = sim.next_decision()
    while decision is not None:
        sim.apply(scheduler.select(decision))
        decision = sim.next_decision()
    assert sim.done and sim.workflows_completed == 150
    assert 0 < peak[0] < 75  # far fewer than the run's workflows held at once
    # Everything per job and per id is gone, but the cancelled ids stale events may name.
    assert not sim._in_flight and not sim.tasks.offset and not sim.tasks.job_of
    assert not sim.server and not sim.started_at and not sim._est and not sim.origin
    assert isinstance(sim._cancelled, dict) and sim._cancelled
    assert all(sim._cancelled.values())
    assert np.isfinite(sim.response_times).all()


def test_long_runs_stream_by_default() -> None:
    assert isinstance(prepare(CLUSTER, Scenario(workflows=20, rate=1.0)).jobs, list)
    long = prepare(CLUSTER, Scenario(workflows=STREAM_FROM, rate=50.0))
    assert isinstance(long.jobs, JobStream) and len(long.jobs) == STREAM_FROM
    assert not streams_by_default(Scenario(workflows=STREAM_FROM - 1))


def test_a_requested_trace_is_written_as_the_run_goes(tmp_path: Path) -> None:
    scenario = Scenario(workflows=40, rate=2.0, seed=2)
    streamed, up_front = setups(scenario)
    path = tmp_path / "trace.jsonl"
    a = run(streamed, HedgeAndDefer(), trace_path=path)
    b = run(up_front, HedgeAndDefer(), record_trace=True)
    assert a.trace == [] and len(b.trace) == int(b.metrics["tasks_completed"])
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    names = b.server_names
    expect = [
        {
            **{f: getattr(r, f) for f in ("workflow", "task", "ready", "end")},
            "server": names[r.server],
        }
        for r in b.trace
    ]
    assert [
        {k: row[k] for k in ("workflow", "task", "ready", "end", "server")} for row in rows
    ] == (expect)
    assert all(not math.isnan(row["start"]) for row in rows)


def test_a_trace_that_cannot_be_written_is_a_one_line_error(tmp_path: Path) -> None:
    from scalesched.errors import InputError

    setup = prepare(CLUSTER, Scenario(workflows=5, rate=1.0), stream=True)
    with pytest.raises(InputError, match="--trace.*cannot write"):
        run(setup, "eft", trace_path=tmp_path)  # a folder
