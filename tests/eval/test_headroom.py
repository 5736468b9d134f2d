"""The headroom study: the decomposition is exact, and the capacity-aware bound lies
between the contention-free bound and every heuristic's measured mean, including on a
mix whose few H100s cannot take all the large-model work."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from scalesched.eval.headroom import COMPONENTS, NO_CACHES, Caches, Headroom, measure_headroom
from scalesched.eval.headroom.bound import batch_levels, capacity_bound
from scalesched.eval.headroom.decompose import Decomposition, Reuse, contention_free_bound
from scalesched.eval.headroom.study import PolicyRow, worse_than_base_notes
from scalesched.kernel.records import lower_bound
from scalesched.runs.setup import Scenario, prepare

HEURISTICS = ["eft", "tail", "least_loaded", "round_robin"]

SKEWED = """name: skewed-a100
servers:
  - type: h100-80g-x4
    count: 1
  - type: a100-80g-x4
    count: 5
  - type: cpu-64c
    count: 2
"""


def _study(cluster: str, caches: Caches = NO_CACHES, **scenario: object) -> Headroom:
    scenario.setdefault("workload", "agentic-mix")
    setup = prepare(cluster, Scenario(**scenario), stream=False)  # type: ignore[arg-type]
    return measure_headroom(setup, HEURISTICS, [], caches=caches)


CACHED = Caches(kv_policy="lru", tool_cache=True)


@pytest.fixture(scope="module")
def studies(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Headroom]:
    skewed = tmp_path_factory.mktemp("clusters") / "skewed.yaml"
    skewed.write_text(SKEWED)
    return {
        "hetero-16 load 0.9": _study("hetero-16", workflows=150, load=0.9, seed=2),
        "hetero-16 load 0.7 azure-code": _study(
            "hetero-16", workflows=150, load=0.7, seed=2, arrivals="azure-code"
        ),
        "skewed rate 0.5": _study(str(skewed), workflows=150, rate=0.5, seed=3),
        "tool-heavy cached": _study(
            "hetero-16",
            CACHED,
            workload="tool-heavy",
            workflows=150,
            load=0.8,
            seed=4,
            tool_repeat=0.3,
        ),  # fmt: skip
        "skewed rate 0.8": _study(str(skewed), workflows=150, rate=0.8, seed=3),
    }


def test_capacity_bound_between_contention_free_bound_and_every_mean(
    studies: dict[str, Headroom],
) -> None:
    for label, study in studies.items():
        cap = study.capacity.mean_s
        assert cap is not None, (label, study.capacity.status)
        assert cap >= study.lower_bound_s - 1e-6, label
        for row in study.rows:
            assert cap <= row.mean_s, (label, row.name, cap, row.mean_s)


def test_skewed_mix_charges_slow_placement(studies: dict[str, Headroom]) -> None:
    """One H100 for five A100s at a rate it cannot carry: part of the 70b work must run on
    A100s, and the capacity-aware bound rises above the contention-free one for it."""
    study = studies["skewed rate 0.8"]
    assert study.capacity.slow_share["llama-2-70b"] > 0.05
    assert study.bound_s > study.lower_bound_s * 1.02


def test_the_slow_share_grows_with_the_rate_on_the_same_workflows(tmp_path: Path) -> None:
    """The same measured workflows offered at a lower rate need less of the 70b work on the
    slower A100s. (Two studies at two rates measure different windows, each from its own
    runs' warm-up, so the same workflows are given to the bound directly.)"""
    skewed = tmp_path / "skewed.yaml"
    skewed.write_text(SKEWED)
    scenario = Scenario(workload="agentic-mix", workflows=150, rate=0.8, seed=3)
    setup = prepare(str(skewed), scenario, stream=False)
    jobs = sorted(setup.jobs, key=lambda j: (j.arrival, j.workflow_id))
    window = jobs[30:135]
    heavy = capacity_bound(setup.tables, window, 0.8, jobs)
    light = capacity_bound(setup.tables, window, 0.4, jobs)
    assert light.slow_share["llama-2-70b"] < heavy.slow_share["llama-2-70b"]
    assert light.mean_s is not None and heavy.mean_s is not None and light.mean_s < heavy.mean_s


def test_decomposition_sums_exactly(studies: dict[str, Headroom]) -> None:
    for label, study in studies.items():
        for row in study.rows:
            d = row.decomposition
            assert d.workflows == study.setting["measured_workflows"]
            assert d.max_abs_residual < 1e-6, (label, row.name)
            gap = d.mean_response - d.mean_bound
            assert math.isclose(sum(d.components.values()), gap, abs_tol=1e-6)
            assert math.isclose(d.mean_response, row.mean_s, rel_tol=1e-9)
            assert math.isclose(d.mean_bound, study.lower_bound_s, rel_tol=1e-9)
            assert d.components["path"] <= 1e-9  # the bound is the longest path
            for name in ("slower_server", "batching", "admission_wait", "model_load", "cache_miss"):
                assert d.components[name] >= -1e-9, (label, row.name, name)
            per_model = sum(sum(parts.values()) for parts in d.by_model.values())
            per_type = sum(sum(parts.values()) for parts in d.by_server_type.values())
            no_path = gap - d.components["path"]
            assert math.isclose(per_model, no_path, abs_tol=1e-6)
            assert math.isclose(per_type, no_path, abs_tol=1e-6)


def test_caches_lower_the_bounds_and_show_as_cache_misses(
    studies: dict[str, Headroom],
) -> None:
    """With KV reuse and the tool cache, the bounds count what the caches could skip (still
    below every run: the test above), and what a run did not skip is ``cache_miss``;
    without caches the bound is ``lower_bound``'s and nothing is a cache miss."""
    cached = studies["tool-heavy cached"]
    assert cached.setting["kv_policy"] == "lru" and cached.setting["tool_cache"]
    assert any(r.decomposition.components["cache_miss"] > 0 for r in cached.rows)
    setup = prepare(
        "hetero-16", Scenario(workload="tool-heavy", workflows=150, load=0.8, seed=4,
                              tool_repeat=0.3), stream=False,
    )  # fmt: skip
    reuse = CACHED.reuse
    assert reuse == Reuse(kv=True, tools=True) and Caches(kv_policy="nocache").reuse == Reuse()
    lowered = 0
    for job in setup.jobs:
        full = lower_bound(setup.tables, job)
        assert contention_free_bound(setup.tables, job) == full
        least = contention_free_bound(setup.tables, job, reuse)
        assert least <= full
        lowered += least < full
    assert lowered > len(setup.jobs) / 2
    for label, study in studies.items():
        if label != "tool-heavy cached":
            assert all(r.decomposition.components["cache_miss"] == 0 for r in study.rows)


def test_model_loads_are_recorded(studies: dict[str, Headroom]) -> None:
    """The trace's ``loaded`` time reaches the split: engines load on demand, and some
    critical-path call waits for one."""
    for study in studies.values():
        assert any(r.decomposition.components["model_load"] > 0 for r in study.rows)


def test_round_robin_pays_for_slow_servers(studies: dict[str, Headroom]) -> None:
    """Sanity of the split: placing blindly puts calls on slow servers, eft much less so."""
    study = studies["hetero-16 load 0.9"]
    rr, eft = study.row("round_robin"), study.row("eft")
    assert rr is not None and eft is not None
    assert (
        rr.decomposition.components["slower_server"]
        > 2 * eft.decomposition.components["slower_server"]
    )


def test_json_shape(studies: dict[str, Headroom]) -> None:
    out = studies["hetero-16 load 0.9"].as_json()
    assert {"lower_bound", "capacity_bound", "oracle", "decomposition", "policies"} <= set(out)
    assert set(out["policies"]) == set(HEURISTICS)
    assert out["best_heuristic"] in ("eft", "tail", "least_loaded")
    for row in out["policies"].values():
        assert {"mean_s", "p99_s", "steady", "gap"} <= set(row)
        assert 0.0 <= row["gap"] < 1.0 and row["cpu_s"] > 0.0
    assert set(out["decomposition"]["policies"]["tail"]["components_s"]) == set(COMPONENTS)
    assert (out["setting"]["load"], out["setting"]["rate"]) == (0.9, None)
    assert studies["skewed rate 0.5"].as_json()["setting"]["load"] is None


def test_a_planned_run_names_the_load_it_was_asked_for() -> None:
    setting = _study("hetero-4", workflows=40, load=0.5, seed=2, residency="planned").setting
    assert setting["world"] == "planned" and setting["load"] == 0.5
    assert setting["rate"] > 0 and setting["offered_rate_wps"] > 0


def test_batch_levels_are_a_lower_left_hull() -> None:
    """Step time seen grows and the engine's cost per request falls along the hull, and
    it is convex (each slope steeper than the next)."""
    setup = prepare("hetero-16", Scenario(workload="agentic-mix", workflows=2, rate=1.0))
    levels = batch_levels(setup.tables, 1, 200, 500)
    assert len(levels) >= 2
    seen, cost = levels[:, 0], levels[:, 1]
    assert (seen[1:] > seen[:-1]).all() and (cost[1:] < cost[:-1]).all()
    slopes = (cost[1:] - cost[:-1]) / (seen[1:] - seen[:-1])
    assert (slopes[1:] >= slopes[:-1] - 1e-12).all()


def test_capacity_bound_is_the_contention_free_bound_when_capacity_is_ample() -> None:
    """At a trickle of arrivals every call can run alone on its fastest server: the
    program's optimum is the contention-free bound itself; past every engine's capacity it
    has no answer."""
    from scalesched.eval.headroom.bound import capacity_bound
    from scalesched.kernel.records import lower_bound

    setup = prepare("hetero-16", Scenario(workload="agentic-mix", workflows=40, rate=0.05))
    jobs = list(setup.jobs)
    lb = sum(lower_bound(setup.tables, j) for j in jobs) / len(jobs)
    ample = capacity_bound(setup.tables, jobs, 0.05)
    assert ample.mean_s is not None and math.isclose(ample.mean_s, lb, rel_tol=1e-6)
    flood = capacity_bound(setup.tables, jobs, 500.0)
    assert flood.mean_s is None and flood.status


def test_the_oracle_rolls_out_over_the_best_heuristic() -> None:
    """The oracle row measures the room above the best heuristic measured beside it, so it
    is built over that heuristic (and says which); with no candidate measured, over tail."""
    setup = prepare("hetero-8", Scenario(workload="agentic-mix", workflows=12, rate=0.6, seed=4))
    study = measure_headroom(setup, ["least_loaded", "round_robin"], ["rollout_oracle"])
    oracle = study.row("rollout_oracle")
    assert study.best_heuristic == "least_loaded"
    assert oracle is not None and oracle.oracle and oracle.base == "least_loaded"
    assert study.as_json()["oracle"]["rollout_oracle"]["base"] == "least_loaded"
    alone = measure_headroom(setup, ["round_robin"], ["rollout_oracle"])
    assert alone.best_heuristic is None and alone.rows[-1].base == "tail"


def test_an_oracle_spec_with_a_base_keeps_it() -> None:
    setup = prepare("hetero-8", Scenario(workload="agentic-mix", workflows=8, rate=0.6, seed=4))
    study = measure_headroom(setup, ["least_loaded"], ["rollout_oracle:base=eft,horizon_s=5"])
    row = study.rows[-1]
    assert row.name == "rollout_oracle:base=eft,horizon_s=5"
    assert row.base == "eft" and row.oracle


def test_an_oracle_worse_than_its_base_is_flagged() -> None:
    """An oracle above its base is no measure of headroom: the study says so and names a
    longer view; one at or below its base gets no note."""
    split = Decomposition(1, 1.0, 1.0, {}, {}, {}, 0.0)

    def row(name: str, mean: float, base: str | None = None) -> PolicyRow:
        return PolicyRow(name, mean, mean, True, base is not None, split, base)

    rows = [row("tail", 30.0), row("rollout_oracle", 33.0, "tail"), row("ro:x=1", 29.0, "tail")]
    (note,) = worse_than_base_notes(rows)
    assert note.startswith("rollout_oracle is 1.100x its base tail") and "horizon_s" in note
    assert worse_than_base_notes(rows[:1] + rows[2:]) == []
