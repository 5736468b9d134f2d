"""The capacity-aware bound on the test-time-scaling workloads: each call's own Jensen rows
(``call_facets``) tighten it, more edges never loosen it, and it still lies below every
heuristic's measured mean on best-of-n and self-consistency."""

from __future__ import annotations

import numpy as np
import pytest

from scalesched.cluster.tables import MODEL_INDEX
from scalesched.eval.headroom import Headroom, measure_headroom
from scalesched.eval.headroom.bound import (
    CALL_FACETS,
    _facets,
    batch_levels,
    capacity_bound,
    pick_facets,
)
from scalesched.runs.setup import Scenario, prepare

HEURISTICS = ["eft", "tail", "least_loaded", "heft_online"]


def _study(cluster: str, workload: str, load: float, seed: int) -> Headroom:
    scenario = Scenario(workload=workload, workflows=150, load=load, seed=seed)
    return measure_headroom(prepare(cluster, scenario, stream=False), HEURISTICS, [])


@pytest.fixture(scope="module")
def tts_studies() -> dict[str, Headroom]:
    return {
        "best-of-n homogeneous-16 0.9": _study("homogeneous-16", "best-of-n", 0.9, 5),
        "self-consistency hetero-16 0.5": _study("hetero-16", "self-consistency", 0.5, 3),
    }


def test_bound_below_every_heuristic_on_test_time_scaling(
    tts_studies: dict[str, Headroom],
) -> None:
    for label, study in tts_studies.items():
        cap = study.capacity.mean_s
        assert cap is not None, (label, study.capacity.status)
        assert study.capacity.call_facets == CALL_FACETS
        assert cap >= study.lower_bound_s - 1e-6, label
        for row in study.rows:
            assert cap <= row.mean_s, (label, row.name, cap, row.mean_s)


def test_per_call_rows_tighten_the_fan_out_bound() -> None:
    """Best-of-n at load 0.9: the class-aggregate rows let the program run each workflow's
    longest sample alone and pay at the average batch; each call's own rows do not, and
    the bound rises well above the aggregate one (and never falls below it)."""
    setup = prepare(
        "homogeneous-16",
        Scenario(workload="best-of-n", workflows=120, load=0.9, seed=5),
        stream=False,
    )
    jobs = sorted(setup.jobs, key=lambda j: (j.arrival, j.workflow_id))
    span = jobs[-1].arrival - jobs[0].arrival
    rate = (len(jobs) - 1) / span
    aggregate = capacity_bound(setup.tables, jobs, rate, call_facets=0)
    few = capacity_bound(setup.tables, jobs, rate, call_facets=4)
    per_call = capacity_bound(setup.tables, jobs, rate)
    assert aggregate.mean_s is not None and few.mean_s is not None
    assert per_call.mean_s is not None
    # more edges are more constraints on the same program: the optimum never falls
    assert aggregate.mean_s <= few.mean_s + 1e-6 <= per_call.mean_s + 2e-6
    assert per_call.mean_s > 1.1 * aggregate.mean_s


def test_every_hull_edge_lies_below_every_batch_point() -> None:
    """The validity of a call's own rows: each edge's line, extended, is below every
    (seen, cost) point of every batch size (not only the hull's), and falls with seen, so
    it is below a step whose batchmates hold more than the smallest context too."""
    setup = prepare("hetero-16", Scenario(workload="best-of-n", workflows=2, rate=1.0))
    t = setup.tables
    m = MODEL_INDEX["llama-2-7b"]
    for k in sorted({int(k) for k in t.engine_class[:, m] if k >= 0}):
        min_ctx, min_need = 1000, 1100
        levels = batch_levels(t, k, min_ctx, min_need)
        top = max(1, min(int(t.max_batch[k]), int(t.kv_capacity[k]) // min_need))
        b = np.arange(1, top + 1)
        lin = t.decode_lin[k, 1 : top + 1]
        seen = lin + float(t.decode_attn[k]) * (b - 1) * min_ctx
        cost = lin / b
        for alpha, beta in _facets(levels):
            assert beta < 0
            assert (cost >= alpha + beta * seen - 1e-12).all(), (k, alpha, beta)


def test_pick_facets_is_a_bounded_subset_keeping_the_ends() -> None:
    facets = [(float(i), -1.0) for i in range(63)]
    assert pick_facets(facets, 0) == []
    assert pick_facets(facets, 1) == [facets[0]]
    assert pick_facets(facets[:5], 17) == facets[:5]
    for limit in range(2, 70):
        picked = pick_facets(facets, limit)
        assert 2 <= len(picked) <= limit
        assert picked[0] == facets[0] and picked[-1] == facets[-1]
        assert picked == sorted(set(picked))
    dense = pick_facets(facets, CALL_FACETS)
    assert facets[:7] == dense[:7]  # every edge where few requests share a batch


def test_negative_call_facets_is_refused() -> None:
    setup = prepare("hetero-16", Scenario(workload="best-of-n", workflows=2, rate=1.0))
    with pytest.raises(ValueError, match="call_facets"):
        capacity_bound(setup.tables, list(setup.jobs), 1.0, call_facets=-1)


def test_fanout_calls_are_the_samples_released_together() -> None:
    """best-of-n's samples share their parents and model: each is a fan-out call; a call
    alone under its parents is not."""
    from scalesched.eval.headroom.bound import fanout_calls
    from scalesched.runs.setup import Scenario, prepare

    setup = prepare("hetero-16", Scenario(workload="best-of-n", workflows=3, rate=1.0, seed=1))
    for job in setup.jobs:
        wf = job.workflow
        fan = fanout_calls(wf)
        llm = [i for i, t in enumerate(wf.tasks) if t.kind == "llm"]
        assert len(fan) >= 2 and fan <= set(llm)
        for i in fan:
            same = [j for j in fan if sorted(wf.parents[j]) == sorted(wf.parents[i])]
            assert len(same) >= 2
        for i in set(llm) - fan:
            twins = [
                j
                for j in llm
                if j != i
                and wf.tasks[j].model == wf.tasks[i].model
                and sorted(wf.parents[j]) == sorted(wf.parents[i])
            ]
            assert not twins


def test_a_time_limit_gives_no_bound_rather_than_a_wrong_one() -> None:
    setup = prepare("hetero-16", Scenario(workflows=60, load=0.9, seed=1), stream=False)
    jobs = list(setup.jobs)
    stopped = capacity_bound(setup.tables, jobs, 1.0, time_limit_s=1e-6)
    assert stopped.mean_s is None and "time limit" in stopped.status
    free = capacity_bound(setup.tables, jobs, 1.0, time_limit_s=600.0)
    assert free.mean_s == capacity_bound(setup.tables, jobs, 1.0).mean_s


def test_the_command_line_default_limit_is_the_librarys() -> None:
    import inspect

    from scalesched.commands.headroom import headroom
    from scalesched.eval.headroom.bound import BOUND_TIME_LIMIT_S

    default = inspect.signature(headroom).parameters["bound_time_limit"].default
    assert default == BOUND_TIME_LIMIT_S
