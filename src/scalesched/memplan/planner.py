"""One entry point per question: plan a strategy, find the largest batch that fits, save and
replay plan files.  The CLI and the study are thin layers over these."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scalesched.errors import InputError
from scalesched.memplan import milp
from scalesched.memplan.baselines import BASELINES, baseline_plan
from scalesched.memplan.costs import Hardware, TrainCosts, hardware, resolve_model, train_costs
from scalesched.memplan.plan import (
    Coefficients,
    Plan,
    coefficients,
    evaluate,
    plan_from_dict,
    plan_to_dict,
    read_json,
)
from scalesched.memplan.replay import ReplayResult, replay

STRATEGIES: tuple[str, ...] = ("milp", *BASELINES)
MAX_BATCH_LIMIT = 4096
"""The max-batch search stops here."""


@dataclass(frozen=True, slots=True)
class PlanResult:
    strategy: str
    costs: TrainCosts
    plan: Plan | None
    """None only when the MILP finds no plan within the caps."""
    fits: bool
    predicted_s: float
    """The window model's iteration time (the MILP objective for ``milp``)."""
    replayed: ReplayResult | None
    solver_time_s: float
    gap: float
    status: str


def check_strategy(strategy: str) -> str:
    if strategy not in STRATEGIES:
        known = ", ".join(STRATEGIES)
        raise InputError("--strategy", "strategy", f"unknown strategy {strategy!r}; known: {known}")
    return strategy


def plan_strategy(
    c: TrainCosts, strategy: str, *, time_limit_s: float = 60.0, coef: Coefficients | None = None
) -> PlanResult:
    """The plan of ``strategy`` for ``c``, evaluated by the window model and replayed."""
    check_strategy(strategy)
    coef = coef if coef is not None else coefficients(c)
    if strategy == "milp":
        res = milp.solve(c, time_limit_s=time_limit_s, coef=coef)
        if res.plan is None:
            return PlanResult(
                strategy, c, None, False, math.inf, None, res.solver_time_s, res.gap, res.status
            )
        plan, solver_s, gap, status = res.plan, res.solver_time_s, res.gap, res.status
    else:
        plan, solver_s, gap, status = baseline_plan(strategy, c, coef), 0.0, 0.0, "heuristic"
    ev = evaluate(c, plan, coef)
    rep = replay(c, plan)
    if not ev.fits:
        status = "out of memory"
    return PlanResult(strategy, c, plan, ev.fits, ev.iteration_s, rep, solver_s, gap, status)


def _fits(c: TrainCosts, strategy: str, time_limit_s: float) -> bool:
    coef = coefficients(c)
    if strategy == "milp":
        res = milp.solve(c, time_limit_s=time_limit_s, feasibility_only=True, coef=coef)
        return res.plan is not None
    return evaluate(c, baseline_plan(strategy, c, coef), coef).fits


def max_batch(
    model: str, hw: Hardware, seq: int, strategy: str, *, time_limit_s: float = 30.0
) -> int:
    """Largest batch (<= MAX_BATCH_LIMIT) whose plan fits; 0 if not even batch 1 does.

    Memory grows with the batch for every plan, so feasibility is monotone and a doubling
    then bisection search is exact (for the MILP, up to each solve's time limit).
    """
    check_strategy(strategy)

    def fits(b: int) -> bool:
        return _fits(train_costs(model, hw.gpu, b, seq, hw), strategy, time_limit_s)

    if not fits(1):
        return 0
    lo, hi = 1, 2
    while hi <= MAX_BATCH_LIMIT and fits(hi):
        lo, hi = hi, hi * 2
    if hi > MAX_BATCH_LIMIT:
        return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def summary(result: PlanResult, batch_max: int | None) -> dict[str, Any]:
    """The figures the CLI prints (``--json``)."""
    c = result.costs
    rep = result.replayed
    fits = result.fits
    out: dict[str, Any] = {
        "model": c.model,
        "gpu": c.hw.gpu,
        "batch": c.batch,
        "seq": c.seq,
        "strategy": result.strategy,
        "status": result.status,
        "fits": fits,
        "iteration_time_s": rep.iteration_s if rep and fits else None,
        "tflops": rep.tflops if rep and fits else None,
        "peak_gpu_mem_gb": rep.peak_bytes["gpu"] / 1e9 if rep else None,
        "peak_cpu_mem_gb": rep.peak_bytes["cpu"] / 1e9 if rep else None,
        "peak_nvme_gb": rep.peak_bytes["nvme"] / 1e9 if rep else None,
        "gpu_mem_cap_gb": c.hw.gpu_mem_bytes / 1e9,
        "predicted_iteration_time_s": result.predicted_s if fits else None,
        "max_batch": batch_max,
        "solver_time_s": result.solver_time_s,
        "gap": result.gap,
    }
    if result.plan is not None:
        out["state"] = result.plan.state
        counts: dict[str, int] = {}
        for ch in result.plan.choices:
            counts[ch] = counts.get(ch, 0) + 1
        out["layers"] = counts
    return out


def _hw_dict(hw: Hardware) -> dict[str, float]:
    return {
        "pcie_gbs": hw.pcie_gbs,
        "nvme_read_gbs": hw.nvme_read_gbs,
        "nvme_write_gbs": hw.nvme_write_gbs,
        "cpu_mem_gb": hw.cpu_mem_bytes / 1e9,
        "nvme_gb": hw.nvme_bytes / 1e9,
        "cpu_adam_gbs": hw.cpu_adam_gbs,
    }


def write_plan(result: PlanResult, path: Path, batch_max: int | None = None) -> None:
    """A plan file: the instance, the plan and what was predicted; input of ``replay``."""
    if result.plan is None:
        raise InputError(str(path), "plan", "no plan to write: none fits")
    c = result.costs
    doc = {
        "model": c.model,
        "gpu": c.hw.gpu,
        "batch": c.batch,
        "seq": c.seq,
        "hardware": _hw_dict(c.hw),
        "strategy": result.strategy,
        "plan": plan_to_dict(result.plan),
        "predicted": summary(result, batch_max),
    }
    Path(path).write_text(json.dumps(doc, indent=1) + "\n")


def read_plan(path: Path) -> tuple[TrainCosts, Plan, str]:
    """The instance and plan of a plan file (as ``write_plan`` writes it)."""
    src = str(path)
    d = read_json(path)
    for key, kind in (("model", str), ("gpu", str), ("batch", int), ("seq", int)):
        if not isinstance(d.get(key), kind):
            raise InputError(src, key, f"missing or not a {kind.__name__}")
    hw_in = d.get("hardware", {})
    if not isinstance(hw_in, dict):
        raise InputError(src, "hardware", "must be an object")
    try:
        resolve_model(d["model"])
        hw = hardware(d["gpu"], **{k: float(v) for k, v in hw_in.items()})
        costs = train_costs(d["model"], d["gpu"], d["batch"], d["seq"], hw)
    except InputError as exc:
        raise InputError(src, exc.field, exc.message) from None
    except (TypeError, ValueError) as exc:
        raise InputError(src, "hardware", str(exc)) from None
    plan = plan_from_dict(d.get("plan"), src)
    if len(plan.choices) != costs.layers:
        raise InputError(
            src, "plan.choices", f"{len(plan.choices)} choices for {costs.layers} layers"
        )
    return costs, plan, str(d.get("strategy", "?"))
