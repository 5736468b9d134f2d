"""Baselines: each is a plan in the MILP's space, so the MILP is never worse than any."""

from __future__ import annotations

import pytest

from scalesched.memplan.baselines import BASELINES, baseline_plan
from scalesched.memplan.costs import hardware, train_costs
from scalesched.memplan.plan import evaluate
from scalesched.memplan.planner import max_batch, plan_strategy


def test_baseline_shapes() -> None:
    c = train_costs("llama-2-7b", "L4-24G", 4, 2048)
    assert baseline_plan("none", c).choices == ("keep",) * 32
    assert baseline_plan("full-recompute", c).choices == ("recompute",) * 32
    sqrt = baseline_plan("sqrt", c).choices
    assert sqrt.count("keep") == 6 and sqrt.count("recompute") == 26
    assert baseline_plan("streaming", c).state == "stream-fp32"
    greedy = baseline_plan("greedy-offload", c)
    assert greedy.state == "cpu-fp32" and "cpu1" in greedy.choices


def test_no_checkpointing_reports_out_of_memory() -> None:
    c = train_costs("llama-2-7b", "L4-24G", 4, 2048)
    res = plan_strategy(c, "none")
    assert not res.fits and res.status == "out of memory"


@pytest.mark.parametrize(("gpu", "batch"), [("L4-24G", 4), ("A100-80G", 8), ("H100-80G", 16)])
def test_milp_is_at_least_as_fast_as_every_fitting_baseline(gpu: str, batch: int) -> None:
    c = train_costs("llama-2-7b", gpu, batch, 2048)
    best = plan_strategy(c, "milp", time_limit_s=30)
    assert best.fits
    for name in BASELINES:
        ev = evaluate(c, baseline_plan(name, c))
        if ev.fits:
            assert best.predicted_s <= ev.iteration_s * (1 + 1e-9), name


def test_milp_max_batch_is_at_least_every_baselines() -> None:
    hw = hardware("L4-24G")
    ours = max_batch("llama-2-7b", hw, 2048, "milp", time_limit_s=20)
    assert ours > 0
    for name in BASELINES:
        assert ours >= max_batch("llama-2-7b", hw, 2048, name), name
    # and it is the largest: one more sequence does not fit any plan
    assert not plan_strategy(train_costs("llama-2-7b", "L4-24G", ours + 1, 2048, hw), "milp").fits
