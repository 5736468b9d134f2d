"""The MILP is exact: it equals exhaustive search on every small instance tried."""

from __future__ import annotations

import pytest
from conftest import small_instance

from scalesched.memplan import milp
from scalesched.memplan.brute import brute_force
from scalesched.memplan.costs import TrainCosts, train_costs
from scalesched.memplan.plan import STATES, Plan, coefficients, evaluate

CASES = [
    # layers, gpu, gpu_frac, cpu_frac, seed, NVMe GB/s (None: default), states
    (2, "L4-24G", 0.5, 1.0, None, None, "all"),
    (3, "A100-80G", 0.3, 1.0, 1, None, "all"),
    (4, "H100-80G", 0.4, 0.2, 2, None, "all"),
    (5, "L4-24G", 0.2, 0.5, 3, None, "all"),
    (5, "L4-24G", 0.08, 0.0, None, 40.0, "all"),  # no host room: NVMe (striped) pays
    (6, "A100-80G", 0.5, 0.1, None, None, "all"),
    (6, "L4-24G", 0.15, 0.3, 4, None, "all"),
    (6, "L4-24G", 0.05, 0.0, 7, 40.0, "all"),
    (7, "H100-80G", 0.25, 1.0, 5, None, ("gpu-8bit", "cpu-8bit", "stream-fp32")),
    (8, "L4-24G", 0.3, 0.3, 6, None, ("gpu-8bit", "stream-8bit")),
    (8, "A100-80G", 0.2, 1.0, None, None, ("cpu-fp32",)),
    (8, "A40-48G", 0.06, 0.0, 8, 60.0, ("stream-8bit", "cpu-8bit")),
]


def _instance(case: tuple) -> TrainCosts:  # type: ignore[type-arg]
    layers, gpu, gpu_frac, cpu_frac, seed, nvme, _ = case
    return small_instance(
        layers, gpu=gpu, gpu_frac=gpu_frac, cpu_frac=cpu_frac, seed=seed, nvme_gbs=nvme
    )


def _states(case: tuple) -> tuple[str, ...]:  # type: ignore[type-arg]
    return STATES if case[-1] == "all" else case[-1]


@pytest.mark.parametrize("case", CASES)
def test_milp_equals_brute_force(case: tuple) -> None:  # type: ignore[type-arg]
    c = _instance(case)
    coef = coefficients(c)
    bf = brute_force(c, coef=coef, states=_states(case))
    res = milp.solve(c, coef=coef, states=_states(case))
    assert bf.plan is not None and res.plan is not None
    assert res.optimal
    assert res.objective_s == pytest.approx(bf.iteration_s, rel=1e-6)
    # the MILP's plan, evaluated independently, is what it claims and fits
    ev = evaluate(c, res.plan, coef)
    assert ev.fits
    assert ev.iteration_s == pytest.approx(res.objective_s, rel=1e-6)


def test_the_cases_bind_memory_and_use_every_option_kind() -> None:
    """Not trivial: keeping everything on the GPU never fits, and the optimal plans
    together keep, recompute, offload to the host and to NVMe."""
    kinds: set[str] = set()
    for case in CASES:
        c = _instance(case)
        assert not evaluate(c, Plan("gpu-8bit", ("keep",) * c.layers)).fits
        res = milp.solve(c, states=_states(case))
        assert res.plan is not None
        kinds |= {ch.rstrip("12") for ch in res.plan.choices}
    assert kinds == {"keep", "recompute", "cpu", "nvme"}


def test_infeasible_instance_has_no_plan() -> None:
    c = small_instance(3, gpu_frac=-0.1)  # below the leanest plan's peak
    assert brute_force(c).plan is None
    res = milp.solve(c)
    assert res.plan is None and res.status == "infeasible"


def test_time_limit_keeps_a_consistent_incumbent() -> None:
    """codellama-34b on A100 takes HiGHS 15-35 s to prove optimal here; at 0.5 s it returns
    its incumbent, which must be a fitting plan whose objective and gap are consistent."""
    c = train_costs("codellama-34b", "A100-80G", 8, 2048)
    res = milp.solve(c, time_limit_s=0.5)
    assert res.plan is not None
    ev = evaluate(c, res.plan)
    assert ev.fits
    assert ev.iteration_s == pytest.approx(res.objective_s, rel=1e-6)
    if not res.optimal:  # a much faster machine may prove optimality within the limit
        assert res.status == "time limit (best incumbent)"
        assert 0.0 < res.gap < 0.05
