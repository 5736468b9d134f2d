"""The replay executes plans op by op; the window model (and so the MILP) must agree."""

from __future__ import annotations

import random

import pytest
from conftest import small_instance

from scalesched.memplan import milp
from scalesched.memplan.costs import train_costs
from scalesched.memplan.plan import DEVICES, OPTIONS, STATES, Plan, evaluate, option_valid
from scalesched.memplan.replay import replay


def _random_plan(rng: random.Random, layers: int) -> Plan:
    choices = [
        rng.choice([o for o in OPTIONS if option_valid(i, layers, o)]) for i in range(layers)
    ]
    return Plan(rng.choice(STATES), tuple(choices))


def test_replay_matches_the_window_model_on_random_plans() -> None:
    rng = random.Random(0)
    for _ in range(60):
        layers = rng.randint(1, 9)
        c = train_costs("llama-2-7b", rng.choice(["L4-24G", "H100-80G"]), rng.randint(1, 6), 1024)
        c = c.truncated(layers)
        plan = _random_plan(rng, layers)
        ev, rep = evaluate(c, plan), replay(c, plan)
        assert rep.iteration_s == pytest.approx(ev.iteration_s, rel=1e-9)
        for d in DEVICES:  # the per-window bound is never below the moment-by-moment peak
            assert rep.peak_bytes[d] <= ev.peak_bytes[d] * (1 + 1e-9)


@pytest.mark.parametrize(
    ("model", "gpu", "batch"),
    [("llama-2-7b", "L4-24G", 4), ("llama-2-7b", "A100-80G", 16), ("codellama-34b", "H100-80G", 4)],
)
def test_milp_prediction_is_the_replayed_time(model: str, gpu: str, batch: int) -> None:
    c = train_costs(model, gpu, batch, 2048)
    res = milp.solve(c, time_limit_s=30)
    assert res.plan is not None
    rep = replay(c, res.plan)
    assert rep.fits
    assert abs(rep.iteration_s - res.objective_s) / rep.iteration_s < 0.03
    assert rep.peak_bytes["gpu"] <= c.hw.gpu_mem_bytes


def test_hand_computed_two_layer_plan() -> None:
    """Two layers, everything on the GPU: windows F0 F1 B1 B0 and three empty tail windows."""
    c = small_instance(2, gpu_frac=10.0)  # no memory pressure
    rep = replay(c, Plan("gpu-fp32", ("keep", "keep")))
    adam = c.params[0] * 28.0 / (c.hw.hbm_gbs * 1e9 * 0.7)
    expected = (
        c.emb_fwd_s + c.fwd_s[0] + c.fwd_s[1] + c.head_fwd_s
        + c.head_bwd_s + c.bwd_s[1] + adam + c.bwd_s[0] + adam + c.emb_bwd_s
    )  # fmt: skip
    assert rep.iteration_s == pytest.approx(expected, rel=1e-12)
    state = sum(c.params) * 14.0
    # peak: during layer 1's backward both layers' activations, its workspace and gradients
    peak = state + 2 * c.act_bytes[0] + c.ws_bytes[1] + 2 * c.params[1]
    assert rep.peak_bytes["gpu"] == pytest.approx(peak, rel=1e-12)
    assert rep.peak_bytes["cpu"] == 0.0


def test_offload_moves_bytes_over_pcie_and_frees_gpu_memory() -> None:
    c = small_instance(4, gpu_frac=10.0)
    keep = replay(c, Plan("gpu-8bit", ("keep",) * 4))
    off = replay(c, Plan("gpu-8bit", ("cpu1", "cpu1", "keep", "keep")))
    assert off.peak_bytes["gpu"] < keep.peak_bytes["gpu"]
    assert off.peak_bytes["cpu"] == pytest.approx(2 * c.act_bytes[0])  # both layers at once
    d2h = [op for op in off.ops if op.stream == "d2h"]
    assert [op.name for op in d2h] == ["offload L0", "offload L1"]
    assert d2h[0].end - d2h[0].start == pytest.approx(c.act_bytes[0] / (c.hw.pcie_gbs * 1e9))
