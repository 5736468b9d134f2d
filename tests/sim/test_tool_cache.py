"""The tool-result cache: a repeated call reuses its finished original's result."""

from __future__ import annotations

import dataclasses

import pytest
from sim_builders import llm, tool, workflow

from scalesched.cluster import get_cluster
from scalesched.cluster.model import ClusterSpec, ServerSpec
from scalesched.policies import get_policy
from scalesched.runs.setup import Scenario, prepare, run
from scalesched.sim.run import simulate
from scalesched.sim.tool_cache import LOOKUP_S
from scalesched.workload.instance import Job

CLUSTER = ClusterSpec(
    "one",
    (
        ServerSpec("g0", "custom", "A100-80G", 1, 4, 1.0, 100.0, 8.0),
        ServerSpec("c0", "custom", None, 0, 4, 1.0, 25.0, 0.0),
    ),
)


def _chain(repeat: bool) -> Job:
    """tool -> llm -> the same tool call again (a repeat of task 0 when ``repeat``)."""
    again = tool("again", cpu=2.0, ext=3.0)
    if repeat:
        again = dataclasses.replace(again, repeat_of=0)
    tasks = [tool("first", cpu=2.0, ext=3.0), llm("think", out=50), again]
    return Job(0, 0.0, workflow(tasks, {(0, 1): 0.0, (1, 2): 0.0}))


def test_a_repeat_after_its_original_is_a_hit() -> None:
    off = simulate(CLUSTER, [_chain(True)], get_policy("eft"), tool_cache=False)
    on = simulate(CLUSTER, [_chain(True)], get_policy("eft"), tool_cache=True)
    assert "tool_cache_hits" not in off.metrics
    assert on.metrics["tool_cache_hits"] == 1
    saved = 2.0 + 3.0 - LOOKUP_S
    assert on.metrics["tool_cache_saved_s"] == pytest.approx(saved)
    assert on.response_times[0] == pytest.approx(off.response_times[0] - saved, abs=1e-6)


def test_a_call_not_marked_repeat_always_runs() -> None:
    on = simulate(CLUSTER, [_chain(False)], get_policy("eft"), tool_cache=True)
    off = simulate(CLUSTER, [_chain(False)], get_policy("eft"), tool_cache=False)
    assert on.metrics["tool_cache_hits"] == 0
    assert on.response_times[0] == off.response_times[0]


def test_a_repeat_that_starts_before_its_original_finishes_runs_normally() -> None:
    """Two parallel roots: the repeat lands while its original still runs: a miss."""
    tasks = [tool("a", cpu=1.0, ext=2.0), dataclasses.replace(tool("b", 1.0, 2.0), repeat_of=0)]
    job = Job(0, 0.0, workflow(tasks, {}))
    on = simulate(CLUSTER, [job], get_policy("eft"), tool_cache=True)
    assert on.metrics["tool_cache_hits"] == 0
    assert on.response_times[0] == pytest.approx(3.0)


def _agentic(tool_repeat: float, tool_cache: bool, seed: int = 5) -> dict:
    scenario = Scenario(workflows=120, rate=0.8, seed=seed, tool_repeat=tool_repeat)
    setup = prepare(get_cluster("hetero-16"), scenario)
    metrics = run(setup, "eft", tool_cache=tool_cache).metrics
    metrics.pop("sim_wall_time_s")
    return metrics


def test_probability_zero_is_the_run_without_repeats() -> None:
    plain = _agentic(0.0, False)
    assert _agentic(0.0, True) == {**plain, "tool_cache_hits": 0, "tool_cache_saved_s": 0.0}


def test_cache_hits_on_agentic_mix_and_response_no_worse() -> None:
    off, on = _agentic(0.3, False), _agentic(0.3, True)
    assert on["tool_cache_hits"] > 0 and on["tool_cache_saved_s"] > 0
    assert on["avg_response_time_s"] <= off["avg_response_time_s"]
    assert on["tasks_completed"] == off["tasks_completed"]


def test_same_seed_same_numbers() -> None:
    assert _agentic(0.3, True) == _agentic(0.3, True)


def test_the_trace_says_what_a_hit_skipped() -> None:
    """The trace's ``skipped``: the seconds a hit did not run (0 for every other task, and
    for every task when the run keeps no trace of reuse)."""
    on = simulate(CLUSTER, [_chain(True)], get_policy("eft"), tool_cache=True, record_trace=True)
    skipped = {r.task: r.skipped for r in on.trace}
    assert skipped["again"] == pytest.approx(2.0 + 3.0 - LOOKUP_S)
    assert skipped["first"] == 0.0 and skipped["think"] == 0.0
    off = simulate(CLUSTER, [_chain(True)], get_policy("eft"), record_trace=True)
    assert all(r.skipped == 0.0 for r in off.trace)


def test_the_trace_says_what_kv_reuse_skipped() -> None:
    """With KV reuse, calls that found their prefix cached record the prefill they skipped
    (positive, below their whole prefill); without it, none does."""
    setup = prepare(
        "hetero-8", Scenario(workload="tool-heavy", workflows=30, rate=0.5, seed=1), stream=False
    )
    cached = run(setup, "eft", record_trace=True, kv_policy="lru")
    hits = [r for r in cached.trace if r.skipped > 0]
    assert hits and all(r.kind == "llm" for r in hits)
    plain = run(setup, "eft", record_trace=True)
    assert all(r.skipped == 0.0 for r in plain.trace)
