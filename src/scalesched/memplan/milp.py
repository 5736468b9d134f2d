"""The memory plan as a mixed-integer linear program, solved by HiGHS (scipy.optimize.milp).

Variables: ``x[i,o]`` binary, layer i takes activation option o (one per layer);
``y[s]`` binary, the state mode (exactly one); ``T[w] >= 0``, the length of window w.

    minimise    sum_w T[w]
    subject to  sum_o x[i,o] = 1 for every layer,   sum_s y[s] = 1
                T[w] >= const[k,w] + sum_{i,o} x[i,o] a[i,o,k,w] + sum_s y[s] b[s,k,w]
                    for every window w and stream k (compute, H2D, D2H, NVMe, CPU)
                const[d,w] + sum x m[i,o,d,w] + sum y n[s,d,w] <= cap[d]
                    for every window w and device d (GPU, host, NVMe)

The coefficients are ``plan.coefficients``: the window model that the replay executes, so
the optimum's objective is the replayed iteration time of the plan it returns.  Window
lengths are a max over streams, which the inequalities express exactly because T is
minimised.  A time limit returns the best plan found with HiGHS's relative gap.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from scalesched.memplan.costs import TrainCosts
from scalesched.memplan.plan import OPTIONS, STATES, Coefficients, Plan, coefficients, evaluate


@dataclass(frozen=True, slots=True)
class MilpResult:
    plan: Plan | None
    """None when no feasible plan exists (or none was found within the time limit)."""
    objective_s: float
    """HiGHS's objective, the plan's iteration time under the window model (with
    ``feasibility_only``, the returned plan's evaluated time); inf without a plan."""
    gap: float
    """HiGHS's relative MIP gap (0 when proven optimal)."""
    solver_time_s: float
    status: str
    optimal: bool


@dataclass(frozen=True, slots=True)
class _Layout:
    """Where each variable sits in the vector: the valid (layer, option) pairs first, then
    the allowed state modes, then one window length per window."""

    layers: int
    windows: int
    xs: list[tuple[int, int]]
    """The (layer, option index) of each x variable."""
    ss: list[int]
    """The state index (in ``STATES``) of each y variable."""

    @property
    def nx(self) -> int:
        return len(self.xs)

    @property
    def ny(self) -> int:
        return len(self.ss)

    @property
    def t0(self) -> int:
        """Index of the first window length (the binaries come before it)."""
        return self.nx + self.ny

    @property
    def nv(self) -> int:
        return self.nx + self.ny + self.windows


def solve(
    c: TrainCosts,
    *,
    time_limit_s: float = 60.0,
    states: tuple[str, ...] = STATES,
    feasibility_only: bool = False,
    coef: Coefficients | None = None,
) -> MilpResult:
    """Best plan for ``c`` over the state modes ``states``.

    ``feasibility_only`` drops the objective (for the max-batch search): HiGHS stops at the
    first plan within the memory caps.
    """
    from scipy.optimize import Bounds, LinearConstraint, milp  # lazy: keeps the CLI fast

    coef = coef if coef is not None else coefficients(c)
    L, n_opt = coef.valid.shape
    lay = _Layout(
        layers=L,
        windows=coef.const_time.shape[1],
        xs=[(i, o) for i in range(L) for o in range(n_opt) if coef.valid[i, o]],
        ss=[STATES.index(s) for s in states],
    )
    a, lo, hi = _constraints(coef, lay)
    nv, t0 = lay.nv, lay.t0
    objective = np.zeros(nv)
    if not feasibility_only:
        objective[t0:] = 1.0
    integrality = np.zeros(nv)
    integrality[:t0] = 1
    lb = np.zeros(nv)
    ub = np.full(nv, np.inf)
    ub[:t0] = 1.0
    options = {"time_limit": time_limit_s, "mip_rel_gap": 1e-7, "presolve": True}
    start = time.perf_counter()
    res = milp(
        objective,
        constraints=LinearConstraint(a, lo, hi),
        integrality=integrality,
        bounds=Bounds(lb, ub),
        options=options,
    )
    elapsed = time.perf_counter() - start
    if res.x is None:
        status = "infeasible" if res.status == 2 else f"no plan ({res.message})"
        return MilpResult(None, float("inf"), float("inf"), elapsed, status, res.status == 2)
    plan = _decode(res.x, lay)
    gap = float(getattr(res, "mip_gap", 0.0) or 0.0)
    optimal = res.status == 0
    objective_s = float(res.x[t0:].sum())
    if feasibility_only:  # T is unconstrained without an objective
        objective_s = evaluate(c, plan, coef).iteration_s
    return MilpResult(
        plan,
        objective_s,
        gap,
        elapsed,
        "optimal" if optimal else "time limit (best incumbent)",
        optimal,
    )


def _constraints(coef: Coefficients, lay: _Layout) -> tuple[Any, np.ndarray, np.ndarray]:
    """The constraint matrix (sparse) and its row bounds: one choice per layer and one
    state mode, each stream's load within its window's length, each device's memory
    within its cap. All-zero rows are left out."""
    from scipy.sparse import csr_matrix

    L, W, nx, ny, nv, t0 = lay.layers, lay.windows, lay.nx, lay.ny, lay.nv, lay.t0
    iv = np.array([i for i, _ in lay.xs])
    ov = np.array([o for _, o in lay.xs])
    ss = lay.ss
    blocks: list[np.ndarray] = []
    lo: list[np.ndarray] = []
    hi: list[np.ndarray] = []
    # one choice per layer, one state mode
    pick = np.zeros((L + 1, nv))
    pick[iv, np.arange(nx)] = 1.0
    pick[L, nx : nx + ny] = 1.0
    blocks.append(pick)
    lo.append(np.ones(L + 1))
    hi.append(np.ones(L + 1))
    # stream loads: x.a + y.b - T[w] <= -const   (rows: stream-major, then window)
    n_k = coef.const_time.shape[0]
    load = np.zeros((n_k * W, nv))
    load[:, :nx] = coef.opt_time[iv, ov].reshape(nx, n_k * W).T
    load[:, nx : nx + ny] = coef.state_time[ss].reshape(ny, n_k * W).T
    load[np.arange(n_k * W), t0 + np.tile(np.arange(W), n_k)] = -1.0
    const = coef.const_time.reshape(-1)
    used = np.any(load[:, :t0] != 0.0, axis=1) | (const != 0.0)
    blocks.append(load[used])
    lo.append(np.full(int(used.sum()), -np.inf))
    hi.append(-const[used])
    # memory caps, scaled to fractions of the cap for conditioning
    n_d = coef.const_mem.shape[0]
    caps = np.repeat(coef.caps, W)
    mem = np.zeros((n_d * W, nv))
    mem[:, :nx] = coef.opt_mem[iv, ov].reshape(nx, n_d * W).T / caps[:, None]
    mem[:, nx : nx + ny] = coef.state_mem[ss].reshape(ny, n_d * W).T / caps[:, None]
    used = np.any(mem != 0.0, axis=1)
    blocks.append(mem[used])
    lo.append(np.full(int(used.sum()), -np.inf))
    hi.append(1.0 - coef.const_mem.reshape(-1)[used] / caps[used])
    return csr_matrix(np.vstack(blocks)), np.concatenate(lo), np.concatenate(hi)


def _decode(x_all: np.ndarray, lay: _Layout) -> Plan:
    """The plan a solution vector picks: each layer's option, and the state mode."""
    x = np.round(x_all[: lay.t0]).astype(int)
    choices = ["" for _ in range(lay.layers)]
    for j, (i, o) in enumerate(lay.xs):
        if x[j]:
            choices[i] = OPTIONS[o]
    state = STATES[lay.ss[int(np.argmax(x[lay.nx : lay.t0]))]]
    return Plan(state, tuple(choices))
