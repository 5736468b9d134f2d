"""The decision cycle on the compiled core's event loop (``scalesched.sim.compiled_loop``):
a Python policy answering while the events run in C++, against the Python engine it must
equal (the same trace rows, metrics and books), and the runs it must leave to the Python
loop."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_compiled_core import same_metrics, trace_rows
from test_compiled_run import LABS, _books

from scalesched.cluster.tables import MODEL_NAMES
from scalesched.decision.actions import Defer, Hedge, LoadReplica, Place
from scalesched.decision.scheduler import SchedulingError, answers, places_only
from scalesched.nn.scheduler import BatchedNetworkScheduler
from scalesched.policies import get_policy
from scalesched.policies.p2c import PowerOfTwoScheduler
from scalesched.policies.trained import load_trained
from scalesched.runs.setup import Scenario, prepare, run
from scalesched.sim import compiled_loop, core
from scalesched.sim import run as sim_run
from scalesched.sim.engine import Simulation

pytestmark = pytest.mark.skipif(
    not core.compiled_available(), reason="the compiled core is not built in this install"
)


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


@pytest.fixture
def looped(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each run since went through the compiled loop."""
    went: list[bool] = []
    real = compiled_loop.run_loop

    def spied(*args: Any) -> bool:
        went.append(real(*args))
        return went[-1]

    monkeypatch.setattr(sim_run, "run_loop", spied)
    return went


POLICIES = [  # (p2c, soft_eft and soft_tail run whole in C++: sim.compiled_run)
    "random",
    "round_robin",
    "shortest_queue",
    "cache_aware",
    "scale-dagger",
    "scale-safe",
    "scale-dagger:greedy=true",
    "fcfs_workflow:placement=soft_eft",
    "tao",
    "tail_scaleout",
]

CASES = st.fixed_dictionaries(
    {
        "cluster": st.sampled_from(
            ["hetero-4", "hetero-8", "hetero-16", "homogeneous-6", str(LABS / "edge-l4-cpu.yaml")]
        ),
        "workload": st.sampled_from(
            ["agentic-mix", "tool-heavy", "coordinator", "test-time-scaling", "self-consistency"]
        ),
        "rate": st.floats(0.1, 3.0),
        "workflows": st.integers(1, 30),
        "seed": st.integers(0, 10_000),
        "residency": st.sampled_from(["dynamic", "planned"]),
        "policy": st.sampled_from(POLICIES),
        "warmup": st.sampled_from([0, None]),
        "stream": st.booleans(),
        "tool_cache": st.booleans(),  # with half the tool calls repeating an earlier one
        "kv": st.sampled_from([None, "lru", "ttl", "agent-aware"]),
    }
)


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=CASES)
def test_random_scenarios_run_in_the_loop_and_identically(
    monkeypatch: pytest.MonkeyPatch, looped: list[bool], case: dict[str, Any]
) -> None:
    scenario = Scenario(
        workload=case["workload"],
        workflows=case["workflows"],
        rate=case["rate"],
        seed=case["seed"],
        residency=case["residency"],
        tool_repeat=0.5 if case["tool_cache"] else 0.0,
    )
    setup = prepare(case["cluster"], scenario, stream=case["stream"])
    looped.clear()
    results = {}
    for name in ("python", "compiled"):
        monkeypatch.setenv(core.CORE_ENV, name)
        results[name] = run(
            setup,
            case["policy"],
            record_trace=True,
            warmup=case["warmup"],
            tool_cache=case["tool_cache"],
            kv_policy=case["kv"],
        )
    assert looped == [False, True]
    assert trace_rows(results["python"]) == trace_rows(results["compiled"])
    same_metrics(results["python"].metrics, results["compiled"].metrics)
    assert results["python"].series.tobytes() == results["compiled"].series.tobytes()


@pytest.mark.parametrize(
    ("residency", "workload", "policy"),
    [
        ("dynamic", "agentic-mix", "scale-dagger"),
        ("planned", "agentic-mix", "scale-safe:order=own"),
        ("dynamic", "tool-heavy", "shortest_queue"),
        ("dynamic", "agent-mix", "scale-dagger"),
        ("planned", "test-time-scaling", "scale-safe"),
    ],
)
def test_the_books_left_behind_are_the_python_engines(
    looped: list[bool], residency: str, workload: str, policy: str
) -> None:
    scenario = Scenario(workload=workload, workflows=60, rate=1.5, seed=5, residency=residency)
    setup = prepare("hetero-8", scenario, stream=False)
    looped.clear()
    books = {}
    for name in ("python", "compiled"):
        sim = Simulation(setup.cluster, setup.jobs, tables=setup.tables, warmup=6, core=name)
        sim_run.drive_simulation(sim, get_policy(policy), seed=0)
        books[name] = _books(sim)
        books[name]["routes"] = (sim.routes._engines, sim.routes._where)  # the cache features'
    assert looped == [False, True]
    for key in books["python"]:
        assert books["python"][key] == books["compiled"][key], key
    assert books["compiled"]["routes"][0] or workload != "agent-mix"


def test_a_batch_of_decisions_is_answered_as_the_python_engine_does(looped: list[bool]) -> None:
    """``select_batch`` gets the same instants' decisions, built on the same state."""
    trained = load_trained("scale-dagger")
    net = trained.network  # type: ignore[union-attr]
    setup = prepare("hetero-8", Scenario(workflows=40, rate=2.0, seed=4), stream=False)
    looped.clear()
    traces = []
    for name in ("python", "compiled"):
        sim = Simulation(
            setup.cluster, setup.jobs, tables=setup.tables, core=name, record_trace=True
        )
        sim_run.drive_simulation(sim, BatchedNetworkScheduler(net), seed=3)
        traces.append([(r.workflow, r.task, r.server, float(r.end).hex()) for r in sim.trace])
    assert looped == [False, True]
    assert traces[0] == traces[1] and traces[0]


class _RankedP2c(PowerOfTwoScheduler):
    """p2c answering in Python (its own ``select``: no compiled twin) in the rank ready
    order (the core's HEFT ranks, ``sim/_core/ranks.hpp``)."""

    name = "ranked-p2c"
    ready_order = "rank"
    places_only = True

    def select(self, decision: Any) -> int:
        return super().select(decision)


def test_the_rank_ready_order_is_the_python_engines(looped: list[bool]) -> None:
    scenario = Scenario(workload="coordinator", workflows=40, rate=2.0, seed=3)
    for stream in (False, True):
        setup = prepare("hetero-8", scenario, stream=stream)
        looped.clear()
        traces = []
        for name in ("python", "compiled"):
            sim = Simulation(
                setup.cluster,
                setup.jobs,
                tables=setup.tables,
                core=name,
                record_trace=True,
                ready_order="rank",
            )
            sim_run.drive_simulation(sim, _RankedP2c(), seed=1)
            traces.append([(r.workflow, r.task, r.server, float(r.start).hex()) for r in sim.trace])
        assert looped == [False, True]
        assert traces[0] == traces[1] and traces[0]


class _Recorded(PowerOfTwoScheduler):
    """p2c keeping every request it is shown."""

    name = "recorded"
    places_only = True

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[Any] = []

    def select(self, decision: Any) -> int:
        self.requests.append(decision.task)
        return super().select(decision)


@pytest.mark.parametrize("order", ["fifo", "rank"])
def test_every_request_is_the_python_engines(looped: list[bool], order: str) -> None:
    """Field for field, the rank (the core's, ``sim/_core/ranks.hpp``) included, bit for
    bit: a workload whose workflows reveal tasks as they run."""
    setup = prepare("hetero-8", Scenario(workload="coordinator", workflows=30, rate=2.0, seed=4))
    seen = []
    for name in ("python", "compiled"):
        sim = Simulation(
            setup.cluster, setup.jobs, tables=setup.tables, core=name, ready_order=order
        )
        policy = _Recorded()
        sim_run.drive_simulation(sim, policy, seed=1)
        seen.append(policy.requests)
    assert looped == [False, True]
    assert len(seen[0]) > 100 and len({r.rank for r in seen[0]}) > 10
    assert [float(r.rank).hex() for r in seen[0]] == [float(r.rank).hex() for r in seen[1]]
    assert seen[0] == seen[1]


class _DefersHalf(PowerOfTwoScheduler):
    """Defers every second task it is offered, where it may (so those wait for capacity
    to be freed: a task's or a tool core's finish, a model load), and places the rest by
    p2c; with ``hedge``, hedges those instead."""

    name = "defers-half"
    answers = frozenset({"place", "defer"})

    def __init__(self, hedge: bool = False) -> None:
        super().__init__()
        self.offers = 0
        self.hedge = hedge

    def select(self, decision: Any) -> int | Defer | Hedge:
        self.offers += 1
        if decision.can_defer and self.offers % 2:
            return Defer()
        if self.hedge:
            return Hedge((0, 1))
        return int(super().select(decision))


@pytest.mark.parametrize(
    ("residency", "workload", "order"),
    [
        ("dynamic", "agentic-mix", "fifo"),  # released by model loads too
        ("planned", "tool-heavy", "fifo"),  # by tool cores
        ("planned", "coordinator", "rank"),
    ],
)
def test_deferred_tasks_are_offered_again_as_the_python_engine_does(
    looped: list[bool], residency: str, workload: str, order: str
) -> None:
    scenario = Scenario(workload=workload, workflows=40, rate=2.0, seed=7, residency=residency)
    setup = prepare("hetero-8", scenario, stream=False)
    looped.clear()
    results = []
    for name in ("python", "compiled"):
        sim = Simulation(
            setup.cluster, setup.jobs, tables=setup.tables, core=name, record_trace=True
        )
        scheduler = _DefersHalf()
        scheduler.ready_order = order  # type: ignore[misc]
        sim_run.drive_simulation(sim, scheduler, seed=3)
        rows = [(r.workflow, r.task, r.server, float(r.end).hex()) for r in sim.trace]
        results.append((rows, sim.deferrals, sim.decisions, sim.events, sim.now))
    assert looped == [False, True]
    assert results[0] == results[1]
    assert results[0][1] > 100 and not sim.deferred and not sim.must_place


def test_tao_defers_in_the_loop_as_on_the_python_engine(
    monkeypatch: pytest.MonkeyPatch, looped: list[bool]
) -> None:
    """An overloaded KV run, where tao finds no engine with room and defers calls."""
    scenario = Scenario(workflows=60, load=1.5, seed=3, residency="dynamic")
    setup = prepare("hetero-4", scenario, stream=False)
    metrics = _same_on_both(monkeypatch, looped, setup, "tao", kv_policy="lru")
    assert metrics["deferrals"] > 100


class _LoadsReplicas(PowerOfTwoScheduler):
    """p2c, asking with every third LLM call for a replica of its model on a random server
    that can hold it, released after a short idle time (so replicas load, serve, fall
    idle, are released or evicted, and some are left loading at the end)."""

    name = "loads-replicas"
    answers = frozenset({"place", "load"})

    def __init__(self, bad: bool = False) -> None:
        super().__init__()
        self.calls = 0
        self.bad = bad

    def select(self, decision: Any) -> int | Place:
        server = int(super().select(decision))
        if decision.task.kind != "llm":
            return server
        self.calls += 1
        if self.calls % 3:
            return server
        m, view, tables = decision.task.model, decision.view, decision.tables
        fits = np.flatnonzero(tables.feasible[:, m])
        absent = view.engine_state[fits, m] == 0
        room = fits[absent & (view.free_gpus[fits] >= tables.tp[fits, m])]
        pool = room if room.size else fits
        where = -1 if self.bad else int(pool[self.calls % pool.size])
        load = LoadReplica(MODEL_NAMES[decision.task.model], where, 4.0 + self.calls % 7)
        return Place(server, loads=(load,))


@pytest.mark.parametrize(
    ("workload", "kv"), [("agentic-mix", None), ("tool-heavy", "lru"), ("coordinator", None)]
)
def test_replica_loads_are_carried_out_as_the_python_engine_does(
    monkeypatch: pytest.MonkeyPatch, looped: list[bool], workload: str, kv: str | None
) -> None:
    scenario = Scenario(workload=workload, workflows=50, rate=1.2, seed=4, residency="dynamic")
    setup = prepare("hetero-8", scenario, stream=False)
    looped.clear()
    results, books = {}, {}
    for name in ("python", "compiled"):
        monkeypatch.setenv(core.CORE_ENV, name)
        sim = Simulation(
            setup.cluster, setup.jobs, tables=setup.tables, core=name, record_trace=True
        )
        sim_run.drive_simulation(sim, _LoadsReplicas(), seed=3)
        books[name] = (sim._replicas.record(sim.now), sim.held_gpu_seconds(0.0, sim.now))
        results[name] = run(setup, _LoadsReplicas(), record_trace=True, kv_policy=kv)
    assert looped == [False, False, True, True]
    assert trace_rows(results["python"]) == trace_rows(results["compiled"])
    same_metrics(results["python"].metrics, results["compiled"].metrics)
    assert books["python"] == books["compiled"]
    requests, loads, released, calls, _ = books["compiled"][0]
    assert requests > 50 and loads > 0 and released > 0 and calls > 0
    assert loads >= 10 or workload == "tool-heavy"  # few LLM calls there


def test_tail_scaleout_runs_in_the_loop_as_on_the_python_engine(
    monkeypatch: pytest.MonkeyPatch, looped: list[bool]
) -> None:
    scenario = Scenario(workflows=120, load=0.9, seed=6, residency="dynamic")
    setup = prepare("hetero-8", scenario, stream=False)
    metrics = _same_on_both(monkeypatch, looped, setup, "tail_scaleout")
    assert metrics["replica_loads"] > 0


def _same_on_both(
    monkeypatch: pytest.MonkeyPatch, looped: list[bool], setup: Any, policy: str, **options: Any
) -> dict[str, Any]:
    """``policy`` on the Python engine and in the compiled loop: the same trace and
    metrics; the compiled run's metrics."""
    looped.clear()
    results = {}
    for name in ("python", "compiled"):
        monkeypatch.setenv(core.CORE_ENV, name)
        results[name] = run(setup, policy, record_trace=True, **options)
    assert looped == [False, True]
    assert trace_rows(results["python"]) == trace_rows(results["compiled"])
    same_metrics(results["python"].metrics, results["compiled"].metrics)
    return results["compiled"].metrics


class _Defers(PowerOfTwoScheduler):
    """Defers even what it must place."""

    name = "defers"
    answers = frozenset({"place", "defer"})

    def select(self, decision: Any) -> Defer:
        return Defer()


class _Masked(PowerOfTwoScheduler):
    name = "masked"
    places_only = True

    def select(self, decision: Any) -> Place:
        return Place(int(np.flatnonzero(~decision.mask)[0]))


class _Unsaid(PowerOfTwoScheduler):
    """Changes ``select`` without saying it only places."""

    name = "unsaid"

    def select(self, decision: Any) -> int:
        return int(np.flatnonzero(decision.mask)[0])


@pytest.mark.parametrize("engine", ["python", "compiled"])
def test_a_wrong_answer_is_a_clear_error(engine: str) -> None:
    setup = prepare("hetero-8", Scenario(workflows=5, rate=1.0, seed=1), stream=False)

    def sim() -> Simulation:
        return Simulation(setup.cluster, setup.jobs, tables=setup.tables, core=engine)

    with pytest.raises(SchedulingError, match=r"task \S+ cannot be deferred: nothing else is"):
        sim_run.drive_simulation(sim(), _Defers(), seed=0)
    with pytest.raises(SchedulingError, match=r"cannot run task \S+ \(masked"):
        sim_run.drive_simulation(sim(), _Masked(), seed=0)
    with pytest.raises(SchedulingError, match="cannot load a replica of .* on server -1"):
        sim_run.drive_simulation(sim(), _LoadsReplicas(bad=True), seed=0)
    if engine == "compiled":  # a hedge from a scheduler that said it would not
        with pytest.raises(SchedulingError, match="deferrals and replica loads only, got Hedge"):
            compiled_loop.run_loop(sim(), _DefersHalf(hedge=True))


def test_a_streamed_run_leaves_the_python_task_book_as_a_finished_one(
    looped: list[bool],
) -> None:
    setup = prepare("hetero-8", Scenario(workflows=30, rate=1.5, seed=2), stream=True)
    sim = Simulation(setup.cluster, setup.jobs, tables=setup.tables, core="compiled")
    looped.clear()
    sim_run.drive_simulation(sim, get_policy("scale-dagger"), seed=0)
    assert looped == [True] and sim.workflows_completed == 30
    assert not sim._in_flight and not sim.server and not sim.tasks.done and not sim.tasks.offset


def test_what_it_leaves_to_the_python_loop(looped: list[bool]) -> None:
    setup = prepare("hetero-8", Scenario(workflows=5, rate=1.0, seed=1), stream=False)
    sim = Simulation(setup.cluster, setup.jobs, tables=setup.tables, core="compiled")
    for name in ("hedge", "rollout"):
        assert not answers(get_policy(name)), name
        assert "does not declare" in str(compiled_loop.loop_unsupported(sim, get_policy(name)))
    assert not answers(_Unsaid())
    assert places_only(get_policy("tail")) and places_only(get_policy("scale-dagger"))
    assert answers(get_policy("tao")) == {"place", "defer"} and not places_only(get_policy("tao"))
    assert answers(get_policy("tail_scaleout")) == {"place", "load"}
    for name in ("p2c", "tao", "tail_scaleout"):
        assert compiled_loop.loop_unsupported(sim, get_policy(name)) is None
    hedges = _DefersHalf()
    hedges.answers = frozenset({"place", "hedge"})  # type: ignore[misc]
    assert "may answer ['hedge']" in str(compiled_loop.loop_unsupported(sim, hedges))
    python_sim = Simulation(setup.cluster, setup.jobs, tables=setup.tables, core="python")
    assert compiled_loop.loop_unsupported(python_sim) == "the simulation runs on the Python core"
    looped.clear()
    sim_run.drive_simulation(sim, _Unsaid(), seed=0)
    assert looped == [False] and sim.workflows_completed == 5
