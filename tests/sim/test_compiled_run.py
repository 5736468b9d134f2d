"""Whole runs on the compiled core (``scalesched.sim.compiled_run``) against the Python
engine they must equal.

Equivalence is identical runs: the same trace rows (every float exact), the same metrics,
and the same books left in the ``Simulation`` afterwards (per-task and per-job state, the
live per-server arrays, the accounts' integrals and window marks, the held-GPU log and the
counters), over random small scenarios of both worlds, every workload kind, streamed or
not. The golden runs (``test_engine_golden.py``) pin the same runs against recorded values.
Each compiled run is checked to have really run whole in C++.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sim_builders import spy_compiled
from test_compiled_core import same_metrics, trace_rows

from scalesched.decision.actions import Place
from scalesched.decision.features import relative_excess
from scalesched.policies import get_policy
from scalesched.policies.eft import EftScheduler
from scalesched.policies.rollout import RolloutScheduler, SampledRolloutScheduler
from scalesched.policies.soft_eft import SHARPNESS
from scalesched.runs.setup import Scenario, prepare, run
from scalesched.sim import compiled_run, core
from scalesched.sim import run as sim_run
from scalesched.sim.engine import Simulation

pytestmark = pytest.mark.skipif(
    not core.compiled_available(), reason="the compiled core is not built in this install"
)

LABS = Path(__file__).parents[2] / "configs" / "clusters"


@pytest.fixture
def whole_runs(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each run since went whole through the compiled core."""
    return spy_compiled(monkeypatch)[1]


def scenario_of(case: dict[str, Any]) -> Scenario:
    """The scenario a hypothesis case names (``repeats``: none; "marked", half the tool
    calls repeating an earlier one, run as plain calls; "cached", those taking their
    original's result from the tool cache)."""
    return Scenario(
        workload=case["workload"],
        workflows=case["workflows"],
        rate=case["rate"],
        seed=case["seed"],
        residency=case["residency"],
        tool_repeat=0.0 if case.get("repeats", "none") == "none" else 0.5,
    )


REPEATS = st.sampled_from(["none", "marked", "cached"])
KV_MODES = st.sampled_from([None, None, "lru", "ttl", "agent-aware", "nocache"])
"""KV reuse across calls (``--kv-policy``; None: off)."""


def run_on(
    monkeypatch: pytest.MonkeyPatch, name: str, setup: Any, policy: str = "eft", **options: Any
) -> Any:
    monkeypatch.setenv(core.CORE_ENV, name)
    return run(setup, policy, record_trace=True, **options)


SCENARIOS = st.fixed_dictionaries(
    {
        "cluster": st.sampled_from(
            ["hetero-4", "hetero-8", "hetero-16", "homogeneous-6", str(LABS / "edge-l4-cpu.yaml")]
        ),
        "workload": st.sampled_from(
            [
                "agentic-mix",
                "tool-heavy",
                "agent-mix",
                "coordinator",
                "test-time-scaling",
                "self-consistency",
            ]
        ),
        "rate": st.floats(0.1, 3.0),  # a rate, not a load: no capacity to measure first
        "workflows": st.integers(1, 40),
        "seed": st.integers(0, 10_000),
        "residency": st.sampled_from(["dynamic", "planned"]),
        "policy": st.sampled_from(
            [
                "eft",
                "tail",
                "least_loaded",
                "pred_mean",
                "fcfs_workflow",
                "plas",
                "kv_aware",
                "heft_online",  # eft in the rank ready order (sim/_core/ranks.hpp)
                "p2c",  # numpy's PCG64 stream in C++ (sim/_core/numpy_random.hpp)
                "soft_eft",  # and numpy's log1p and exp, called from C++
                "soft_tail",
            ]
        ),
        "stream": st.booleans(),
        "warmup": st.sampled_from([0, 3, None]),
        "cooldown": st.sampled_from([0, 2]),
        "repeats": REPEATS,
        "kv": KV_MODES,
    }
)


@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=SCENARIOS)
def test_random_scenarios_run_whole_and_identically(
    monkeypatch: pytest.MonkeyPatch, whole_runs: list[bool], case: dict[str, Any]
) -> None:
    setup = prepare(case["cluster"], scenario_of(case), stream=case["stream"])
    whole_runs.clear()
    results = {
        name: run_on(
            monkeypatch,
            name,
            setup,
            case["policy"],
            warmup=case["warmup"],
            cooldown=case["cooldown"],
            tool_cache=case["repeats"] == "cached",
            kv_policy=case["kv"],
        )
        for name in ("python", "compiled")
    }
    assert whole_runs == [False, True]
    assert trace_rows(results["python"]) == trace_rows(results["compiled"])
    same_metrics(results["python"].metrics, results["compiled"].metrics)
    for field in ("series", "series_lower_bounds", "gpu_utilisation", "cpu_utilisation"):
        a, b = getattr(results["python"], field), getattr(results["compiled"], field)
        assert a.tobytes() == b.tobytes(), field


def _books(sim: Simulation) -> dict[str, Any]:
    """Everything a finished simulation holds that the run wrote, comparable exactly."""

    def exact(values: Any) -> list[str]:
        return [float(x).hex() for x in values]

    books: dict[str, Any] = {
        name: getattr(sim, name)
        for name in (
            "events",
            "decisions",
            "model_loads",
            "tasks_completed",
            "workflows_completed",
            "decode_retimes",
            "decode_skipped",
            "in_system",
            "server",
            "missing",
            "job_left",
            "_busy_cores",
        )
    }
    books["done"] = list(sim.tasks.done)  # type: ignore[arg-type]
    books["seq"] = next(copy.copy(sim._seq))  # peeked, not drawn
    for name in ("now", "bytes_moved", "in_system_area"):
        books[name] = float(getattr(sim, name)).hex()
    for name in (
        "ready_at",
        "landed_at",
        "started_at",
        "ended_at",
        "loaded_at",
        "_est",
        "job_end",
        "_free_gpus",
        "_busy_gpus",
        "_gpu_area",
        "_cpu_area",
        "_gpu_mark",
        "_cpu_mark",
        "priority",
    ):
        books[name] = exact(getattr(sim, name))
    for name in (
        "est_work",
        "n_assigned",
        "busy_cores",
        "cpu_backlog",
        "tools_in_flight",
        "free_gpus",
        "idle_gpus",
        "engine_state",
        "engine_ready_at",
        "engine_batch",
        "engine_ctx",
        "attained",
        "lower_bounds",
        "any_deployment_bounds",
    ):
        books[name] = getattr(sim, name).tobytes()
    books["marks"] = [(g.tobytes(), c.tobytes(), float(a).hex()) for g, c, a in sim.accounts.marks]
    books["held"] = [(float(t).hex(), float(h).hex()) for t, h in sim._redeploy.log]
    if sim._tool_cache is not None:
        books["tool_cache"] = [a.tobytes() for a in sim._tool_cache.record()]
    if sim.skipped_s is not None:
        books["skipped_s"] = exact(sim.skipped_s)
    if sim._kv is not None:
        record = sim._kv.record(0)
        books["kv"] = [getattr(record, f.name) for f in dataclasses.fields(record)]
        books["kv"] = [v.tobytes() if isinstance(v, np.ndarray) else v for v in books["kv"]]
        books["kv_reentries"] = dict(sim._kv.reentries)
        books["kv_evicted"] = sim._kv.lost + sum(
            e.kv.evicted for engines in sim._engines for e in engines.values() if e.kv
        )
    return books


@pytest.mark.parametrize(
    ("residency", "workload", "policy", "tool_cache", "kv"),
    [
        ("dynamic", "agentic-mix", "eft", False, None),
        ("planned", "agentic-mix", "tail", False, None),
        ("dynamic", "tool-heavy", "tail", False, None),
        ("planned", "tool-heavy", "least_loaded", False, None),
        ("dynamic", "agentic-mix", "fcfs_workflow", False, None),
        ("planned", "agentic-mix", "plas", False, None),
        ("dynamic", "tool-heavy", "kv_aware", False, None),
        ("planned", "tool-heavy", "tail", True, None),
        ("dynamic", "coordinator", "eft", True, None),
        ("dynamic", "coordinator", "tail", False, "lru"),
        ("planned", "coordinator", "heft_online", True, "agent-aware"),
        ("dynamic", "agent-mix", "kv_aware", False, "ttl"),
        ("planned", "tool-heavy", "p2c", False, None),
        ("dynamic", "coordinator", "p2c", True, "lru"),
        ("dynamic", "tool-heavy", "soft_eft", True, "ttl"),
        ("planned", "agentic-mix", "soft_eft", False, None),
        ("dynamic", "coordinator", "soft_tail", False, "lru"),
    ],
)
def test_the_books_left_behind_are_the_python_engines(
    whole_runs: list[bool],
    residency: str,
    workload: str,
    policy: str,
    tool_cache: bool,
    kv: str | None,
) -> None:
    scenario = Scenario(
        workload=workload,
        workflows=60,
        rate=1.5,
        seed=5,
        residency=residency,
        tool_repeat=0.5 if tool_cache else 0.0,
    )
    setup = prepare("hetero-8", scenario, stream=False)
    whole_runs.clear()  # preparing may measure the capacity
    books = {}
    for name in ("python", "compiled"):
        sim = Simulation(
            setup.cluster,
            setup.jobs,
            tables=setup.tables,
            warmup=6,
            core=name,
            tool_cache=tool_cache,
            kv_policy=kv,
            record_trace=tool_cache or kv is not None,  # and so the seconds each hit skipped
            ready_order=get_policy(policy).ready_order,
        )
        scheduler = get_policy(policy)
        sim_run.drive_simulation(sim, scheduler, seed=0)
        books[name] = _books(sim)
        generator = getattr(scheduler, "generator", None)  # left as Python leaves it
        if generator is not None:
            books[name]["generator"] = generator.bit_generator.state
    assert whole_runs == [False, True]
    assert books["python"].keys() == books["compiled"].keys()
    for key in books["python"]:
        assert books["python"][key] == books["compiled"][key], key
    assert books["compiled"]["model_loads"] > 0 or residency == "planned"
    if tool_cache:
        assert len(books["compiled"]["tool_cache"][0]) > 10  # hits, as many as Python's
    if kv is not None:
        assert books["compiled"]["kv_reentries"]  # sessions went on, from the cache or not
        assert books["compiled"]["kv_evicted"] > 0 or residency == "planned"  # memory to spare


def test_the_progress_callback_and_a_written_trace_are_the_same(
    monkeypatch: pytest.MonkeyPatch, whole_runs: list[bool], tmp_path: Path
) -> None:
    setup = prepare("hetero-8", Scenario(workflows=25, rate=1.0, seed=2), stream=True)
    whole_runs.clear()  # preparing may measure the capacity
    calls: dict[str, list[int]] = {}
    for name in ("python", "compiled"):
        calls[name] = []
        monkeypatch.setenv(core.CORE_ENV, name)
        run(
            setup,
            "eft",
            on_workflow_done=calls[name].append,
            trace_path=tmp_path / f"{name}.csv",
        )
    assert whole_runs == [False, True]
    assert calls["python"] == calls["compiled"] == list(range(1, 26))
    written = {name: (tmp_path / f"{name}.csv").read_bytes() for name in calls}
    assert written["python"] == written["compiled"] and written["python"].count(b"\n") > 25


class _NotEft(EftScheduler):
    """eft's class with a choice of its own: not eft, whatever it inherits."""

    name = "not-eft"

    def select(self, decision: Any) -> int:
        return int(np.flatnonzero(decision.mask)[-1])


def test_only_the_policies_it_has_run_whole() -> None:
    for name in compiled_run.POLICIES:
        assert compiled_run.compiled_policy(get_policy(name)) == name
    assert compiled_run.compiled_policy(get_policy("pred_mean")) == "tail"  # at its mean
    for name in (
        "tail_scaleout",
        "cache_aware",
        "random",
        "shortest_remaining",
        "fcfs_workflow:placement=eft",
    ):
        assert compiled_run.compiled_policy(get_policy(name)) is None, name
    assert compiled_run.compiled_policy(_NotEft()) is None
    adapted = get_policy("tail")
    adapted.exec_scale = np.ones(4)  # type: ignore[attr-defined]
    assert compiled_run.compiled_policy(adapted) is None


def test_what_it_does_not_cover_runs_through_the_decision_cycle(
    monkeypatch: pytest.MonkeyPatch, whole_runs: list[bool]
) -> None:
    setup = prepare("hetero-8", Scenario(workflows=12, rate=1.0, seed=1), stream=False)
    whole_runs.clear()  # preparing may measure the capacity
    monkeypatch.setenv(core.CORE_ENV, "compiled")
    ours = run(setup, _NotEft(), record_trace=True)
    logits = run(setup, "eft", logits_cache=True)
    assert whole_runs == [False, False]
    assert ours.metrics["decisions"] > 0 and logits.metrics["decisions"] > 0

    def fresh(**options: Any) -> Simulation:
        return Simulation(setup.cluster, setup.jobs, tables=setup.tables, **options)

    eft = get_policy("eft")
    reasons = {
        "python": compiled_run.unsupported(fresh(core="python"), eft),
        "policy": compiled_run.unsupported(fresh(core="compiled"), get_policy("random")),
        "logits": compiled_run.unsupported(fresh(core="compiled", logits_cache=True), eft),
    }
    assert all(reasons.values()), reasons
    assert compiled_run.unsupported(fresh(core="compiled"), eft) is None
    assert compiled_run.unsupported(fresh(core="compiled", tool_cache=True), eft) is None
    assert compiled_run.unsupported(fresh(core="compiled", kv_policy="lru"), eft) is None
    assert compiled_run.unsupported(fresh(core="compiled", ready_order="rank"), eft) is None
    started = fresh(core="compiled")
    assert started.next_decision() is not None
    assert compiled_run.unsupported(started, eft) == "the simulation is already under way"


def test_a_run_with_no_workflows_ends_at_once(whole_runs: list[bool]) -> None:
    setup = prepare("hetero-4", Scenario(workflows=3, rate=0.5, seed=0), stream=False)
    whole_runs.clear()  # preparing may measure the capacity
    sim = Simulation(setup.cluster, [], tables=setup.tables, core="compiled")
    sim_run.drive_simulation(sim, get_policy("eft"))
    assert whole_runs == [True] and sim.events == 0 and sim.now == 0.0


@pytest.mark.parametrize("policy", ["eft", "least_loaded"])
def test_a_network_of_cpus_only_schedules_identically(
    monkeypatch: pytest.MonkeyPatch, whole_runs: list[bool], policy: str
) -> None:
    """A static problem's cluster has no GPU engines at all (its decode tables keep one
    placeholder row): the compiled run takes it and gives the same schedule."""
    from scalesched.static import static_schedule
    from scalesched.static.io import load_network, load_task_graph

    configs = LABS.parent
    graph = load_task_graph(str(configs / "workflows" / "wfcommons-blast-small.json"))
    network = load_network(configs / "networks" / "example-4.yaml")
    schedules = {}
    for name in ("python", "compiled"):
        monkeypatch.setenv(core.CORE_ENV, name)
        schedules[name] = static_schedule(graph, network, policy)
    assert whole_runs == [False, True]
    assert schedules["python"].mapping == schedules["compiled"].mapping
    assert schedules["python"].info == schedules["compiled"].info


TRIALS = st.fixed_dictionaries(
    {
        "cluster": st.sampled_from(["hetero-4", "hetero-8", "hetero-16"]),
        "workload": st.sampled_from(["agentic-mix", "tool-heavy", "coordinator"]),
        "base": st.sampled_from(
            ["tail", "eft", "fcfs_workflow", "plas", "kv_aware", "heft_online", "p2c", "soft_eft"]
            + ["soft_tail"]
        ),
        "rate": st.floats(0.3, 4.0),
        "workflows": st.integers(5, 60),
        "seed": st.integers(0, 10_000),
        "residency": st.sampled_from(["dynamic", "planned"]),
        "stream": st.booleans(),
        "skip": st.integers(0, 40),
        "horizon": st.sampled_from([1.0, 10.0, 60.0, 1e9]),
        "sampled": st.booleans(),
        "repeats": REPEATS,
        "kv": KV_MODES,
    }
)


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=TRIALS)
def test_rollout_trials_in_cpp_are_python_forks(case: dict[str, Any]) -> None:
    """At an open decision part-way through a run, each candidate's trial in C++
    (``compiled_trials``) gives rollout's four numbers exactly as a Python fork driven by a
    copy of the base does, on the true future or a sampled one (taken over from one fork
    on it), and leaves the simulation as it was."""
    setup = prepare(case["cluster"], scenario_of(case), stream=case["stream"])
    base = get_policy(case["base"])
    sim = Simulation(
        setup.cluster,
        setup.jobs,
        tables=setup.tables,
        core="compiled",
        ready_order=base.ready_order,
        tool_cache=case["repeats"] == "cached",
        kv_policy=case["kv"],  # the engines' caches are taken over as they are
    )
    base.reset(0)
    kind = SampledRolloutScheduler if case["sampled"] else RolloutScheduler
    rollout = kind(base_policy=base, horizon_s=case["horizon"])
    rollout.reset(case["seed"])
    for _ in range(case["skip"]):
        decision = sim.next_decision()
        if decision is None:
            return
        sim.apply(base.select(decision))
    decision = sim.next_decision()
    if decision is None:
        return
    answer = base.select(decision)
    priority = answer.priority if isinstance(answer, Place) else None
    (future,) = rollout.futures(sim.fork)
    made = future() if case["sampled"] else sim
    trial = compiled_run.compiled_trials(made, base)
    if case["sampled"] and case["stream"]:  # a sampled stream's jobs to come are unrealised
        assert trial is None and compiled_run.trials_unsupported(made, base)
        return
    assert trial is not None
    before = _books(sim)
    end = sim.now + case["horizon"]
    for server in np.flatnonzero(decision.mask)[:4]:
        want = rollout.trial(future, int(server), end, priority)
        got = trial(int(server), end, priority)
        assert [float(x).hex() for x in got] == [float(x).hex() for x in want], server
    assert _books(sim) == before


@pytest.mark.parametrize("workload", ["agentic-mix", "coordinator", "test-time-scaling"])
def test_the_cores_ranks_are_the_books(workload: str) -> None:
    """The ``rank`` ready order's HEFT ranks in C++ (``sim/_core/ranks.hpp``) are the
    Python book's (``kernel.ranks.VisibleRanks``), bit for bit, for every task in flight at
    decisions through a run: with tasks hidden behind a revealing task not yet finished,
    and after."""
    scenario = Scenario(workload=workload, workflows=30, rate=2.0, seed=5)
    setup = prepare("hetero-8", scenario, stream=False)
    base = get_policy("heft_online")
    sim = Simulation(
        setup.cluster, setup.jobs, tables=setup.tables, core="compiled", ready_order="rank"
    )
    compared = hidden = 0
    for k in itertools.count():
        decision = sim.next_decision()
        if decision is None:
            break
        if k % 5 == 0:
            run = compiled_run.adopted(sim, base)
            for ji, job in enumerate(setup.jobs):
                if job.arrival > sim.now or sim.job_left[ji] == 0:
                    continue
                off = sim.tasks.offset[ji]
                for i, task in enumerate(job.workflow.tasks):
                    rb = task.revealed_by
                    hidden += rb is not None and not sim.task_done[off + rb]
                    assert run.rank_of(off + i).hex() == sim.tasks.rank(off + i).hex()
                    compared += 1
        sim.apply(base.select(decision))
    assert compared > 1000 and hidden > 0


def test_rollout_runs_its_trials_in_cpp_with_the_same_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    setup = prepare("hetero-16", Scenario(workflows=40, rate=3.0, seed=3), stream=False)
    stats, traces = {}, {}
    for name in ("python", "compiled"):
        monkeypatch.setenv(core.CORE_ENV, name)
        policy = get_policy("rollout_oracle:horizon_s=30")
        traces[name] = trace_rows(run(setup, policy, warmup=0, record_trace=True))
        stats[name] = dict(policy.stats)  # type: ignore[attr-defined]
    assert traces["python"] == traces["compiled"]
    assert stats["python"]["changed"] == stats["compiled"]["changed"] > 0
    assert stats["compiled"]["fork_s"] < stats["python"]["fork_s"] / 3  # loose: shared CI
    for name in ("python", "compiled"):  # sampled futures: one fork per future taken over
        monkeypatch.setenv(core.CORE_ENV, name)
        policy = get_policy("rollout:horizon_s=30")
        traces[name] = trace_rows(run(setup, policy, warmup=0, record_trace=True))
        stats[name] = dict(policy.stats)  # type: ignore[attr-defined]
    assert traces["python"] == traces["compiled"]
    assert stats["python"]["changed"] == stats["compiled"]["changed"] > 0


@pytest.mark.parametrize("kv", ["lru", "agent-aware"])
def test_rollout_over_kv_reuse_runs_its_trials_in_cpp(
    monkeypatch: pytest.MonkeyPatch, kv: str
) -> None:
    """The oracle in a run with KV reuse: each decision's state, the engines' caches and
    the calls' holds included, is taken over by C++ (``EventRun.adopt_kv``), and the run
    is the Python engine's."""
    scenario = Scenario(workload="coordinator", workflows=16, rate=2.0, seed=7)
    setup = prepare("hetero-8", scenario, stream=False)
    adopted = []
    monkeypatch.setattr(
        compiled_run, "_kv_snapshot", spy := _counting(compiled_run._kv_snapshot, adopted)
    )
    traces, stats = {}, {}
    for name in ("python", "compiled"):
        monkeypatch.setenv(core.CORE_ENV, name)
        policy = get_policy("rollout_oracle:horizon_s=20")
        result = run(setup, policy, warmup=0, record_trace=True, kv_policy=kv)
        traces[name] = trace_rows(result)
        stats[name] = dict(policy.stats)  # type: ignore[attr-defined]
        assert result.metrics["prefix_hit_rate"] > 0.2
    assert spy is compiled_run._kv_snapshot
    assert len(adopted) >= stats["compiled"]["rolled"] > 30  # every trial set in C++
    assert traces["python"] == traces["compiled"]
    assert stats["python"]["changed"] == stats["compiled"]["changed"] > 0


def _counting(function: Any, calls: list[int]) -> Any:
    def counted(*args: Any) -> Any:
        calls.append(1)
        return function(*args)

    return counted


def test_p2c_draws_numpys_stream_in_cpp() -> None:
    """The compiled core's PCG64 and ``choice(size=2, replace=False)``
    (``sim/_core/numpy_random.hpp``) give numpy's pairs and leave numpy's state, from
    generators part-way through their streams (a 32-bit half kept or not), over small and
    large populations (Lemire's rejection taken now and then)."""
    ext: Any = core._EXTENSION
    sizes = [3, 4, 5, 17, 48, 255, 256, 1000, 65_537, 3_000_000_000]
    for seed in range(40):
        rng = np.random.default_rng(seed)
        rng.integers(0, 10, size=seed % 3)  # odd counts leave a 32-bit half kept
        state = rng.bit_generator.state
        words = (state["state"]["state"], state["state"]["inc"])
        halves = [part for w in words for part in (w >> 64, w & ((1 << 64) - 1))]
        sizes_here = [sizes[(seed + i) % len(sizes)] for i in range(25)]
        pairs, left = ext.pcg64_choose_two(
            *halves, bool(state["has_uint32"]), state["uinteger"], sizes_here
        )
        want = [tuple(int(x) for x in rng.choice(n, size=2, replace=False)) for n in sizes_here]
        assert [tuple(p) for p in pairs] == want, seed
        after = rng.bit_generator.state
        state_hi, state_lo, inc_hi, inc_lo, has_uint32, uinteger = left
        assert (state_hi << 64 | state_lo, inc_hi << 64 | inc_lo) == (
            after["state"]["state"],
            after["state"]["inc"],
        )
        assert (int(has_uint32), uinteger) == (after["has_uint32"], after["uinteger"])


def test_numpys_sum_is_mirrored_in_cpp() -> None:
    """``numpy_pairwise_sum`` (``sim/_core/numpy_sum.hpp``) gives ``np.sum``'s double over
    lengths that take each of its branches (under 8, blocks of 8 up to 128, halves above),
    on values whose sum depends on the order they are added in."""
    ext: Any = core._EXTENSION
    rng = np.random.default_rng(11)
    lengths = [*range(1, 40), 127, 128, 129, 135, 256, 257, 300, 1000, 1031]
    differs = 0
    for n in lengths * 20:
        values = np.exp(-5.0 * rng.random(n) * rng.random() * 20.0)
        assert ext.numpy_sum(values) == float(values.sum()), n
        differs += ext.numpy_sum(values) != float(values[::-1].sum())
    assert differs > 100  # the order matters for these values: the test can fail


def test_soft_eft_weighs_servers_as_numpy_does() -> None:
    """soft_eft's cumulative weights in C++ (``sim/_core/soft_eft.hpp``, numpy's ``log1p``
    and ``exp`` called from there) are ``Generator.choice``'s own, to the bit: the feasible
    servers' ``p`` from ``sample_near_best``, summed cumulatively and divided by the last,
    over finish times of every spread and masks that leave one server to all of them."""
    ext: Any = core._EXTENSION
    rng = np.random.default_rng(5)
    for _ in range(400):
        n = int(rng.integers(1, 300))
        finish = 10.0 ** rng.uniform(-2, 4) * (1.0 + rng.exponential(rng.uniform(0.01, 3), n))
        mask = rng.random(n) < rng.uniform(0.05, 1.0)
        mask[int(rng.integers(n))] = True
        feasible = np.flatnonzero(mask)
        weights = np.exp(-SHARPNESS * relative_excess(finish, mask)[feasible])
        cdf = (weights / weights.sum()).cumsum()
        cdf /= cdf[-1]
        got_feasible, got_cdf = ext.soft_eft_cdf(SHARPNESS, finish.tolist(), mask.tolist())
        assert got_feasible == feasible.tolist()
        assert [x.hex() for x in got_cdf] == [float(x).hex() for x in cdf]
