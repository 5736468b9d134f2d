"""Baseline plans, each a plan in the MILP's space so that the same replay executes it.

- ``none``: no checkpointing, everything on the GPU;
- ``full-recompute``: every layer keeps only its input and is recomputed;
- ``sqrt``: ceil(sqrt(L)) evenly spaced layers keep their activations, the rest recompute
  (Chen et al. 2016's budget; per-layer recompute already dominates its segment scheme);
- ``greedy-offload`` (ZeRO-Offload): optimizer on the host (fp32); activations offloaded to
  host memory from the first layer on until the plan fits, then recomputed from the first
  layer on if it still does not;
- ``streaming`` (MegaTrain): weights and fp32 optimizer state on the host, streamed layer by
  layer; every layer recomputed.

The first three take the faster of fp32 and 8-bit GPU-resident optimizer state that fits
(fp32 when neither fits, reported as out of memory).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from scalesched.memplan.costs import TrainCosts
from scalesched.memplan.plan import Coefficients, Plan, coefficients, evaluate, option_valid

BASELINES: tuple[str, ...] = ("none", "full-recompute", "sqrt", "greedy-offload", "streaming")


def _best_gpu_state(c: TrainCosts, choices: tuple[str, ...], coef: Coefficients) -> Plan:
    plans = [Plan(s, choices) for s in ("gpu-fp32", "gpu-8bit")]
    evals = [evaluate(c, p, coef) for p in plans]
    fitting = [(e.iteration_s, k) for k, e in enumerate(evals) if e.fits]
    return plans[min(fitting)[1]] if fitting else plans[0]


def _none(c: TrainCosts, coef: Coefficients) -> Plan:
    return _best_gpu_state(c, ("keep",) * c.layers, coef)


def _full_recompute(c: TrainCosts, coef: Coefficients) -> Plan:
    return _best_gpu_state(c, ("recompute",) * c.layers, coef)


def _sqrt(c: TrainCosts, coef: Coefficients) -> Plan:
    L = c.layers
    k = math.ceil(math.sqrt(L))
    kept = {round(j * L / k) for j in range(k)}
    return _best_gpu_state(c, tuple("keep" if i in kept else "recompute" for i in range(L)), coef)


def _greedy_offload(c: TrainCosts, coef: Coefficients) -> Plan:
    L = c.layers
    choices = ["keep"] * L
    plan = Plan("cpu-fp32", tuple(choices))
    for i in range(L):
        if evaluate(c, plan, coef).fits:
            return plan
        if option_valid(i, L, "cpu1"):
            choices[i] = "cpu1"
            plan = Plan("cpu-fp32", tuple(choices))
    for i in range(L):
        if evaluate(c, plan, coef).fits:
            return plan
        choices[i] = "recompute"
        plan = Plan("cpu-fp32", tuple(choices))
    return plan


def _streaming(c: TrainCosts, coef: Coefficients) -> Plan:
    return Plan("stream-fp32", ("recompute",) * c.layers)


_BUILDERS: dict[str, Callable[[TrainCosts, Coefficients], Plan]] = {
    "none": _none,
    "full-recompute": _full_recompute,
    "sqrt": _sqrt,
    "greedy-offload": _greedy_offload,
    "streaming": _streaming,
}


def baseline_plan(name: str, c: TrainCosts, coef: Coefficients | None = None) -> Plan:
    """The plan of baseline ``name`` (check ``evaluate(...).fits`` for out of memory)."""
    coef = coef if coef is not None else coefficients(c)
    return _BUILDERS[name](c, coef)
