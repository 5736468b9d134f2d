"""The compiled core (``scalesched.sim.core``) against the Python engine it must equal.

Equivalence is defined as identical traces: the compiled decision build must give every
array of a ``Decision`` byte for byte, so that every run, under every policy, places every
task on the same server at the same instant. Checked three ways: the arrays themselves on
recorded decisions (LLM and tool tasks, engines absent, loading and ready, servers without
free GPUs, an in-place drift of the decode tables); whole traces over random small
scenarios (hypothesis: dynamic and planned worlds, streamed or not, with and without KV
reuse); and the golden runs (``test_engine_golden.py``, both cores). The per-workflow
estimates (bounds, HEFT's mean costs) are checked as exact doubles against the Python
functions they replace.

The tests that need the extension skip where the install has none (built without a
compiler); the selection and fallback tests run everywhere.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sim_builders import spy_compiled

from scalesched.cluster import get_cluster
from scalesched.cluster.tables import ClusterTables
from scalesched.decision.cycle import Watched, drive
from scalesched.decision.features import Decision, make_decision
from scalesched.policies import get_policy
from scalesched.runs.setup import Scenario, build_jobs, prepare, run
from scalesched.sim import core
from scalesched.sim.engine import Simulation

needs_extension = pytest.mark.skipif(
    not core.compiled_available(), reason="the compiled core is not built in this install"
)

FIELDS = (
    "mask",
    "transfer_s",
    "wait_s",
    "load_s",
    "exec_s",
    "finish_s",
    "imposed_s",
    "est_work",
    "n_assigned",
    "_resident",
    "_batch",
)


def assert_same_decision(a: Decision, b: Decision) -> None:
    """Every array of the two decisions byte for byte, dtype and shape included."""
    assert a.now == b.now and a.task == b.task
    for name in FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and x.shape == y.shape, name
        assert x.tobytes() == y.tobytes(), f"{name}: {x} != {y}"


def compare_along_a_run(n: int, workflows: int, rate: float, seed: int, policy: str) -> int:
    """Drive a run with ``policy`` on the Python engine and, at every decision, build it on
    both cores from the same state; returns the decisions compared."""
    spec = get_cluster(f"hetero-{n}")
    tables = ClusterTables(spec)
    jobs = build_jobs(tables, Scenario(workflows=workflows, rate=rate, seed=seed))
    sim = Simulation(spec, jobs, tables=tables, core="python")
    scheduler = get_policy(policy)
    scheduler.reset(seed)
    seen = [0]

    def check(decision: Decision, _: object) -> None:
        task = decision.task
        a = make_decision(tables, sim, task)
        b = core.make_decision_compiled(tables, sim, task)
        assert type(b) is core.CompiledDecision
        assert_same_decision(a, b)
        assert b.mask is a.mask  # shared, read-only: the same object
        if task.kind == "llm":
            for tokens in (1, task.output_tokens_est * 3 + 7):
                assert_same_decision(a.at_output_tokens(tokens), b.at_output_tokens(tokens))
        seen[0] += 1

    drive(sim, Watched(scheduler, check))
    return seen[0]


@needs_extension
@pytest.mark.parametrize(
    ("n", "rate", "seed", "policy"),
    [(16, 2.4, 0, "eft"), (16, 3.6, 1, "least_loaded"), (48, 6.2, 2, "eft")],
)
def test_decision_arrays_identical_along_runs(n: int, rate: float, seed: int, policy: str) -> None:
    """Overload (3.6 on hetero-16) keeps engines loading and servers without free GPUs."""
    assert compare_along_a_run(n, 80, rate, seed, policy) > 200


def recorded_requests() -> tuple[ClusterTables, Simulation, list[Any]]:
    """hetero-16's tables, a finished Python-engine run of 30 workflows under eft, and
    every task request it decided (to build decisions again in states set by hand)."""
    spec = get_cluster("hetero-16")
    tables = ClusterTables(spec)
    jobs = build_jobs(tables, Scenario(workflows=30, rate=2.0, seed=3))
    sim = Simulation(spec, jobs, tables=tables, core="python")
    requests: list[Any] = []
    drive(sim, Watched(get_policy("eft"), lambda d, _: requests.append(d.task)))
    return tables, sim, requests


@needs_extension
def test_every_engine_state_and_drift() -> None:
    """States a run reaches rarely, set by hand: engines loading (past and future ready
    times), absent without GPUs, and an in-place change of the decode tables (``eval.drift``)
    that both builds must see."""
    tables, sim, requests = recorded_requests()
    rng = np.random.default_rng(0)
    for trial in range(40):
        sim.now = float(rng.uniform(0, 100))
        sim.engine_state[:] = rng.integers(0, 3, size=sim.engine_state.shape)
        sim.engine_ready_at[:] = sim.now + rng.uniform(-5, 5, size=sim.engine_ready_at.shape)
        sim.engine_batch[:] = rng.integers(0, 300, size=sim.engine_batch.shape)
        sim.engine_ctx[:] = sim.engine_batch * rng.uniform(0, 4000, size=sim.engine_ctx.shape)
        sim.free_gpus[:] = rng.integers(0, 3, size=sim.free_gpus.shape)
        sim.idle_gpus[:] = rng.integers(0, 2, size=sim.idle_gpus.shape)
        sim.est_work[:] = rng.uniform(0, 50, size=sim.est_work.shape)
        sim.n_assigned[:] = rng.integers(0, 9, size=sim.n_assigned.shape)
        sim.tools_in_flight[:] = rng.integers(0, 40, size=sim.tools_in_flight.shape)
        sim.cpu_backlog[:] = rng.uniform(0, 30, size=sim.cpu_backlog.shape)
        if trial == 20:
            k = 0
            tables.decode_lin[k] *= 1.37
            tables.decode_attn[k] *= 1.37
            tables.decode_step_increase[k] *= 1.37
        for task in requests[:: max(1, len(requests) // 25)]:
            assert_same_decision(
                make_decision(tables, sim, task), core.make_decision_compiled(tables, sim, task)
            )


def trace_rows(result: Any) -> list[tuple[object, ...]]:
    """The trace, every float as its exact hex (NaN included), for comparing runs."""

    def exact(x: float) -> str:
        return float(x).hex()

    return [
        (
            r.workflow,
            r.task,
            r.kind,
            r.model,
            r.server,
            *(exact(t) for t in (r.ready, r.landed, r.start, r.end, r.loaded, r.skipped)),
        )
        for r in result.trace
    ]


def same_metrics(a: dict[str, Any], b: dict[str, Any]) -> None:
    wall = {"sim_wall_time_s", "wall_s", "events_per_s", "decisions_per_s"}
    assert set(a) == set(b)
    for key in set(a) - wall:
        x, y = a[key], b[key]
        if isinstance(x, float) and isinstance(y, float):
            assert float(x).hex() == float(y).hex(), key
        else:
            assert x == y, key


def run_both(
    monkeypatch: pytest.MonkeyPatch,
    cluster: str,
    scenario: Scenario,
    policy: str,
    *,
    stream: bool = False,
    **options: Any,
) -> None:
    """The same run on both cores (chosen the way users choose: the environment); traces
    and metrics must be identical, and the compiled run must have run whole in C++
    (``sim.compiled_run``) or built its decisions on the compiled core."""
    setup = prepare(cluster, scenario, stream=stream)
    results = {}
    built, whole = spy_compiled(monkeypatch)
    for name in ("python", "compiled"):
        monkeypatch.setenv(core.CORE_ENV, name)
        results[name] = run(setup, policy, warmup=0, record_trace=True, **options)
    assert results["compiled"].metrics["decisions"] > 0
    assert whole[-1] or built[0] >= results["compiled"].metrics["decisions"]
    assert trace_rows(results["python"]) == trace_rows(results["compiled"])
    same_metrics(results["python"].metrics, results["compiled"].metrics)


SCENARIOS = st.fixed_dictionaries(
    {
        "cluster": st.sampled_from(["hetero-4", "hetero-8", "hetero-16"]),
        "workload": st.sampled_from(["agentic-mix", "tool-heavy", "agent-mix"]),
        "policy": st.sampled_from(["eft", "tail", "least_loaded", "kv_aware", "hedge", "soft_eft"]),
        "kv": st.sampled_from([None, "lru"]),
        "rate": st.floats(0.2, 3.0),
        "workflows": st.integers(5, 30),
        "seed": st.integers(0, 10_000),
        "residency": st.sampled_from(["dynamic", "planned"]),
        "stream": st.booleans(),
    }
)


@needs_extension
@needs_extension
def test_tool_waits_and_transfers_at_the_edges() -> None:
    """The decision build's shortcuts (a free core waits +0.0 without dividing; the NIC and
    core-speed kinds) against numpy where they must not apply: backlogs that are NaN,
    infinite, negative or zero, in-flight counts at, below and above the cores, and tasks
    with several parents (on one server twice, on others, with zero and NaN bytes)."""
    tables, sim, requests = recorded_requests()
    rng = np.random.default_rng(1)
    n = tables.n
    cores = np.asarray(tables.cores)
    for _ in range(60):
        sim.tools_in_flight[:] = np.maximum(cores - 1 + rng.integers(-2, 3, size=n), 0)
        sim.cpu_backlog[:] = rng.choice([0.0, -0.0, 3.5, -2.0, np.inf, np.nan, 1e308], size=n)
        parents = tuple(int(x) for x in rng.integers(0, n, size=int(rng.integers(1, 5))))
        nbytes = tuple(
            float(x) for x in rng.choice([0.0, 1e6, 3e9, np.nan, -1.0], size=len(parents))
        )
        for task in requests[:: max(1, len(requests) // 10)]:
            task = dataclasses.replace(
                task, parent_servers=parents + parents[:1], parent_bytes=nbytes + nbytes[:1]
            )
            with np.errstate(invalid="ignore", divide="ignore"):
                expected = make_decision(tables, sim, task)
            assert_same_decision(expected, core.make_decision_compiled(tables, sim, task))


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=SCENARIOS)
def test_random_small_scenarios_trace_identically(
    monkeypatch: pytest.MonkeyPatch, case: dict[str, Any]
) -> None:
    scenario = Scenario(
        workload=case["workload"],
        workflows=case["workflows"],
        rate=case["rate"],
        seed=case["seed"],
        residency=case["residency"],
    )
    run_both(
        monkeypatch,
        case["cluster"],
        scenario,
        case["policy"],
        stream=case["stream"],
        kv_policy=case["kv"],
    )


@needs_extension
def test_compiled_simulation_forks_on_the_compiled_core() -> None:
    spec = get_cluster("hetero-16")
    tables = ClusterTables(spec)
    jobs = build_jobs(tables, Scenario(workflows=10, rate=2.0, seed=0))
    sim = Simulation(spec, jobs, tables=tables, core="compiled")
    decision = sim.next_decision()
    assert sim.core == "compiled" and type(decision) is core.CompiledDecision
    clone = sim.fork()
    assert clone.core == "compiled"
    assert type(clone.next_decision()) is core.CompiledDecision


@needs_extension
def test_the_compiled_core_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(core.CORE_ENV, raising=False)
    assert core.resolve_core() == "compiled"
    monkeypatch.setenv(core.CORE_ENV, "")
    assert core.resolve_core() == "compiled"
    spec = get_cluster("hetero-4")
    sim = Simulation(spec, [], tables=ClusterTables(spec))
    assert sim.core == "compiled" and sim._make_decision is core.make_decision_compiled
    monkeypatch.setenv(core.CORE_ENV, "python")
    sim = Simulation(spec, [], tables=ClusterTables(spec))
    assert sim.core == "python" and sim._make_decision is make_decision


def test_without_the_extension_the_default_is_python_with_one_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(core, "_EXTENSION", None)
    monkeypatch.setattr(core, "_warned", False)
    monkeypatch.delenv(core.CORE_ENV, raising=False)
    with pytest.warns(RuntimeWarning, match="not built in this install"):
        assert core.resolve_core() == "python"
    monkeypatch.setattr(core, "_warned", False)
    monkeypatch.setenv(core.CORE_ENV, "python")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # asked for by name: no warning
        assert core.resolve_core() == "python"


def test_an_unknown_core_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="core='fast'"):
        core.resolve_core("fast")
    monkeypatch.setenv(core.CORE_ENV, "rust")
    with pytest.raises(ValueError, match="SCALESCHED_CORE='rust'"):
        core.resolve_core()


def test_without_the_extension_compiled_falls_back_with_one_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(core, "_EXTENSION", None)
    monkeypatch.setattr(core, "_warned", False)
    assert not core.compiled_available()
    with pytest.warns(RuntimeWarning, match="not built in this install"):
        assert core.resolve_core("compiled") == "python"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second request warns no more
        assert core.resolve_core("compiled") == "python"
        spec = get_cluster("hetero-4")
        sim = Simulation(spec, [], tables=ClusterTables(spec), core="compiled")
    assert sim.core == "python"


@needs_extension
def test_a_state_array_bound_anew_is_read_anew() -> None:
    """The compiled build keeps the view's arrays between calls; an attribute that now holds
    another array (a view that rebinds, or another view) must be read again, and an array
    it could only read through a conversion (a copy, stale at the next call) is refused."""
    spec = get_cluster("hetero-16")
    tables = ClusterTables(spec)
    jobs = build_jobs(tables, Scenario(workflows=20, rate=2.0, seed=4))
    sim = Simulation(spec, jobs, tables=tables, core="python")
    requests: list[Any] = []
    drive(sim, Watched(get_policy("eft"), lambda d, _: requests.append(d.task)))
    llm = next(t for t in requests if t.kind == "llm")
    tool = next(t for t in requests if t.kind == "tool")
    for task in (llm, tool):
        core.make_decision_compiled(tables, sim, task)
        sim.est_work = sim.est_work + 3.0
        sim.n_assigned = np.zeros_like(sim.n_assigned)
        sim.engine_state = np.zeros_like(sim.engine_state)  # every engine absent
        sim.free_gpus = np.zeros_like(sim.free_gpus)
        sim.tools_in_flight = sim.tools_in_flight + 5.0
        sim.cpu_backlog = sim.cpu_backlog + 7.0
        assert_same_decision(
            make_decision(tables, sim, task), core.make_decision_compiled(tables, sim, task)
        )
    sim.est_work = sim.est_work.astype(np.float32)
    with pytest.raises(TypeError, match="est_work must be a contiguous"):
        core.make_decision_compiled(tables, sim, llm)


# -- the per-workflow estimates (bounds, HEFT's mean costs) -----------------------------------


def _estimate_worlds() -> list[tuple[str, ClusterTables, list[Any]]]:
    """Tables with plain engines (dynamic) and with replica groups (a planned deployment),
    each with realised jobs of every workload."""
    worlds = []
    for cluster, residency in (("hetero-8", "dynamic"), ("hetero-16", "planned")):
        jobs: list[Any] = []
        tables = None
        for workload in ("agentic-mix", "tool-heavy", "agent-mix"):
            scenario = Scenario(
                workload=workload, workflows=15, rate=1.0, seed=7, residency=residency
            )
            setup = prepare(cluster if tables is None else tables, scenario, stream=False)
            tables = setup.tables
            jobs += list(setup.jobs)
        assert tables is not None
        worlds.append((f"{cluster}-{residency}", tables, jobs))
    return worlds


def hexes(values: Any) -> list[str]:
    return [float(v).hex() for v in values]


@needs_extension
def test_the_estimates_are_the_python_doubles() -> None:
    """Every estimate the compiled core gives for the ledger and the ranks, against the
    Python function it replaces, as exact doubles: per call (a grid of prompt, output and
    prefilled lengths, past the prefill table's end) and per workflow (the two bounds, HEFT's
    mean costs)."""
    from scalesched.cluster.anywhere import any_deployment
    from scalesched.kernel.ranks import mean_task_costs
    from scalesched.kernel.records import job_bounds

    for name, tables, jobs in _estimate_worlds():
        anywhere = any_deployment(tables.spec)
        costs = core.task_costs(tables, anywhere)
        assert any(tables.model_classes), name
        for m in range(len(tables.model_classes)):
            for prompt in (0, 1, 7, 300, 4096, 40_000):
                for output in (0, 1, 2, 99, 2048):
                    exact = float.hex
                    for pre in (None, 0, prompt // 3):
                        p = -1 if pre is None else pre
                        assert exact(costs.fastest_llm(m, prompt, output, p)) == exact(
                            tables.fastest_llm_time(m, prompt, output, pre)
                        ), (name, m, prompt, output, pre)
                        assert exact(costs.any_llm(m, prompt, output, p)) == exact(
                            anywhere.llm_time(m, prompt, output, pre)
                        ), (name, m, prompt, output, pre)
                    assert exact(costs.mean_llm(m, prompt, output)) == exact(
                        tables.mean_llm_time(m, prompt, output)
                    )
        for job in jobs:
            wf = job.workflow
            want = job_bounds(tables, anywhere, job)
            assert hexes(core.job_bounds_compiled(tables, anywhere, job)) == hexes(want)
            mean = mean_task_costs(tables, wf)
            assert hexes(core.mean_task_costs_compiled(tables, wf)) == hexes(mean)


@needs_extension
def test_a_compiled_simulation_uses_the_compiled_estimates() -> None:
    """The compiled core replaces the ledger's bounds and the ranks' costs (and a fork
    keeps them); the Python core keeps the Python functions."""
    from scalesched.kernel.ranks import mean_task_costs

    spec = get_cluster("hetero-8")
    tables = ClusterTables(spec)
    jobs = build_jobs(tables, Scenario(workflows=5, rate=1.0, seed=0))
    fast = Simulation(spec, jobs, tables=tables, core="compiled")
    assert fast._job_bounds is core.job_bounds_compiled
    assert fast.tasks.ranks.mean_costs is core.mean_task_costs_compiled
    assert fast.fork().tasks.ranks.mean_costs is core.mean_task_costs_compiled
    slow = Simulation(spec, jobs, tables=tables, core="python")
    assert slow.tasks.ranks.mean_costs is mean_task_costs


# -- the task requests ---------------------------------------------------------------------


def assert_same_request(a: Any, b: Any) -> None:
    """Equal requests whose fields are of the same types (floats as exact doubles)."""
    import dataclasses

    assert a == b
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        assert type(x) is type(y), f.name
        if isinstance(x, float):
            assert x.hex() == y.hex(), f.name


@needs_extension
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("workload", ["agentic-mix", "tool-heavy", "agent-mix"])
def test_every_request_is_the_python_request(workload: str, stream: bool) -> None:
    """Along a compiled run (prefix identities in tool-heavy and agent-mix, revealed
    tasks, streamed ids), every request the scheduler is shown equals the one the Python
    ledger builds from the same state."""
    setup = prepare(
        "hetero-8", Scenario(workload=workload, workflows=25, rate=1.5, seed=4), stream=stream
    )
    sim = Simulation(setup.cluster, setup.jobs, tables=setup.tables, core="compiled")
    seen = [0]

    def check(decision: Decision, _: object) -> None:
        gid = sim.current_task
        assert gid is not None
        want = sim.tasks.request(gid, sim.server, sim.now, sim.attained)
        assert_same_request(decision.task, want)
        seen[0] += 1

    drive(sim, Watched(get_policy("eft"), check))
    assert seen[0] > 100


@needs_extension
def test_the_request_builder_refuses_a_changed_request_class() -> None:
    """A field added to ``TaskRequest`` without the C++ knowing is an error when bound."""
    import dataclasses

    from scalesched.decision.features import TaskRequest

    ext = core._EXTENSION
    fields = [f.name for f in dataclasses.fields(TaskRequest)]
    defaults = {f.name: f.default for f in dataclasses.fields(TaskRequest)}
    ext.RequestBuilder(TaskRequest, fields, defaults, {})  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="fields changed"):
        ext.RequestBuilder(TaskRequest, [*fields, "urgency"], defaults, {})  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="fields changed"):
        ext.RequestBuilder(TaskRequest, fields[::-1], defaults, {})  # type: ignore[union-attr]


# -- eft's choice ----------------------------------------------------------------------------


def _numpy_eft(mask: np.ndarray, finish: np.ndarray, imposed: np.ndarray) -> int:
    with np.errstate(invalid="ignore"):  # inf + -inf: NaN on purpose
        return int(np.argmin(np.where(mask, finish + imposed, np.inf)))


@needs_extension
def test_eft_choice_is_numpys_argmin() -> None:
    """The compiled eft answer against numpy's on the cases where argmin has rules: ties
    (the first), NaN (the first NaN), infinities, every server masked out, read-only and
    strided arrays; arrays of another dtype or shape are left to numpy (None)."""
    rng = np.random.default_rng(11)
    for trial in range(3000):
        n = int(rng.integers(1, 9))
        finish = rng.choice([0.0, -0.0, 1.0, 2.5, np.inf, -np.inf, np.nan], size=n)
        if trial % 3:
            finish = rng.integers(0, 3, size=n).astype(float)  # ties
        imposed = rng.choice(
            [0.0, 1.0, np.inf, -np.inf, np.nan], size=n, p=[0.6, 0.1, 0.1, 0.1, 0.1]
        )
        mask = rng.random(n) < 0.7
        if trial % 7 == 0:
            wide = np.repeat(finish, 2)
            finish = wide[::2]  # a strided view
        mask.setflags(write=False)
        decision = core.CompiledDecision.__new__(core.CompiledDecision)
        decision.mask, decision.finish_s, decision.imposed_s = mask, finish, imposed
        assert core.eft_choice_compiled(decision) == _numpy_eft(mask, finish, imposed), (
            mask,
            finish,
            imposed,
        )
    decision.finish_s = finish.astype(np.float32)
    assert core.eft_choice_compiled(decision) is None
    decision.finish_s, decision.mask = finish, mask.tolist()
    assert core.eft_choice_compiled(decision) is None


@needs_extension
def test_the_folded_choice_is_numpys_argmin() -> None:
    """A whole run's eft and tail choose as they build (``FirstMin``, offered only the
    servers that can run the task): numpy's argmin over the masked scores, ties, NaN,
    infinities and every server masked out included."""
    rng = np.random.default_rng(12)
    for trial in range(3000):
        n = int(rng.integers(1, 9))
        scores = rng.choice([0.0, -0.0, 1.0, 2.5, np.inf, -np.inf, np.nan], size=n)
        if trial % 3:
            scores = rng.integers(0, 3, size=n).astype(float)
        mask = rng.random(n) < 0.7
        got = core._EXTENSION.first_min_choice(mask, scores)  # type: ignore[union-attr]
        assert got == _numpy_eft(mask, scores, np.zeros(n)), (mask, scores)


@needs_extension
def test_eft_answers_a_compiled_decision_on_the_compiled_core(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """eft asks the compiled core for a compiled decision's answer, numpy for the rest."""
    from scalesched.policies import eft

    spec = get_cluster("hetero-8")
    tables = ClusterTables(spec)
    jobs = build_jobs(tables, Scenario(workflows=3, rate=1.0, seed=0))
    calls = [0]
    real = eft.eft_choice_compiled

    def counted(decision: Decision) -> int | None:
        calls[0] += 1
        return real(decision)

    monkeypatch.setattr(eft, "eft_choice_compiled", counted)
    for name, want in (("compiled", 1), ("python", 0)):
        calls[0] = 0
        decision = Simulation(spec, jobs, tables=tables, core=name).next_decision()
        assert decision is not None
        assert eft.eft_choice(decision) == _numpy_eft(
            decision.mask, decision.finish_s, decision.imposed_s
        )
        assert calls[0] == want


@needs_extension
@pytest.mark.parametrize(("policy", "residency"), [("rollout", "dynamic"), ("tao", "planned")])
def test_forking_and_batch_policies_trace_identically(
    monkeypatch: pytest.MonkeyPatch, policy: str, residency: str
) -> None:
    """Policies the random scenarios do not draw: rollout forks the running simulation at
    each decision (the fork keeps the compiled pieces), tao decides a batch at a time."""
    scenario = Scenario(workload="agent-mix", workflows=8, rate=1.0, seed=3, residency=residency)
    run_both(monkeypatch, "hetero-8", scenario, policy)
