"""The capacity-aware bound of a long window, cheaply: a Lagrangian bound on the linear
program of ``eval.headroom.bound``, priced from the program of a sample of its workflows.

Why. The program couples its workflows only through the capacity rows (decode seconds, KV
token-seconds and slots of each engine class over the horizon); everything else is one
small block per workflow (its calls' placement fractions and its critical path). Solved
whole, it grows worse than linearly: on hetero-16's planned deployment, 875 measured
workflows did not solve in 600 s, where the blocks alone solve in 3 s.

How. Weak duality: for any prices ``p >= 0`` on the capacity rows ``g_r(v) >= 0``,

    min { f(v) : local rows, g(v) >= 0 }  >=  min { f(v) - sum_r p_r g_r(v) : local rows }

and the right side separates into the workflows' blocks (plus the residency fractions
``x``, which keep their GPU rows), solved as one block-diagonal program. So the bound holds
for every choice of prices; good prices make it tight. The prices are the dual values of the
capacity rows in the whole program over an evenly spaced sample of the window's workflows
(at most ``sample`` of them, at the same rate: its horizon is the sample's count over that
rate), scaled by the sample's size over the window's (each workflow's weight in the mean).

The rows are priced in the form without the program's helper columns: a class's aggregate
rows read ``horizon sum x capacity - sum over its calls >= 0`` directly; the row with the
fan-out calls' own shares, whose "rest" column is the largest of one line per hull edge,
becomes one row per edge, each priced at the dual of that edge's row. Both are the same
feasible set, so the bound is the program's (module doc of ``bound``) relaxed once more.

A window no larger than the sample gets the whole program (``capacity_bound``).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy.optimize import OptimizeWarning, linprog
from scipy.sparse import coo_matrix

from scalesched.cluster.tables import ClusterTables
from scalesched.eval.headroom.bound import (
    CALL_FACETS,
    TIME_LIMIT_STATUS,
    CapacityBound,
    _classes,
    _facets,
    _levels,
    _Program,
    capacity_bound,
)
from scalesched.eval.headroom.decompose import NO_REUSE, Reuse
from scalesched.workload.instance import Job

SAMPLE_WORKFLOWS = 100
"""Workflows of the priced sample: a solve of a few seconds (on hetero-16's planned
deployment, 875 workflows priced on 100 and on 50 give bounds within 0.05% of each other)."""


def evenly_spaced(window: Sequence[Job], count: int) -> list[Job]:
    """``count`` of ``window``'s jobs spread evenly over it (all of them if fewer)."""
    if len(window) <= count:
        return list(window)
    picks = np.linspace(0, len(window) - 1, count).round().astype(int)
    return [window[int(i)] for i in picks]


def prices(program: _Program, result: Any, scale: float) -> dict[tuple[Any, ...], float]:
    """Each capacity row's price: its dual value (``linprog``'s marginal of a ``<=`` row
    is <= 0; the row is stored negated), clipped at 0 (any price >= 0 is valid), scaled."""
    marginals = np.asarray(result.ineqlin.marginals)
    return {key: max(0.0, -float(marginals[row])) * scale for key, row in program.coupling.items()}


def lagrangian_capacity_bound(
    tables: ClusterTables,
    window: Sequence[Job],
    offered_rate_wps: float,
    run_jobs: Sequence[Job] | None = None,
    *,
    sample: int = SAMPLE_WORKFLOWS,
    call_facets: int = CALL_FACETS,
    reuse: Reuse = NO_REUSE,
    time_limit_s: float | None = None,
) -> CapacityBound:
    """The Lagrangian bound (module doc) over ``window`` arriving at ``offered_rate_wps``,
    priced from ``sample`` of its workflows; the arguments are ``capacity_bound``'s. Its
    status says ``lagrangian`` and the sample; ``time_limit_s`` covers both solves."""
    if sample < 1:
        raise ValueError(f"sample must be >= 1, got {sample}")
    n = len(window)
    if n <= sample or not offered_rate_wps > 0:
        return capacity_bound(
            tables,
            window,
            offered_rate_wps,
            run_jobs,
            call_facets=call_facets,
            reuse=reuse,
            time_limit_s=time_limit_s,
        )
    classes = _classes(tables)
    levels = _levels(tables, classes, run_jobs or window, reuse)
    return priced_bound(
        lambda: _Program(tables, classes, levels, call_facets, reuse),
        window,
        offered_rate_wps,
        sample,
        time_limit_s,
    )


def priced_bound(
    make: Callable[[], _Program],
    window: Sequence[Job],
    offered_rate_wps: float,
    sample: int,
    time_limit_s: float | None,
) -> CapacityBound:
    """The Lagrangian bound of the programs ``make`` builds (module doc), over ``window``
    (more than ``sample`` workflows) at ``offered_rate_wps``, priced on ``sample`` of them."""
    started = time.perf_counter()
    n = len(window)
    picks = evenly_spaced(window, sample)
    small = make()
    call_facets = small.call_facet_limit
    for job in picks:
        small.workflow(job, 1.0 / len(picks))
    small.capacity(len(picks) / offered_rate_wps)
    priced = small.solve(time_limit_s)
    if priced.status != 0:
        status = "the priced sample was not solved: " + str(priced.message)
        return CapacityBound(None, status, time.perf_counter() - started, small.n_vars)
    price = prices(small, priced, len(picks) / n)
    full = make()
    for job in window:
        full.workflow(job, 1.0 / n)
    left = None if time_limit_s is None else time_limit_s - (time.perf_counter() - started)
    result, y = _solve_priced(full, price, n / offered_rate_wps, left)
    elapsed = time.perf_counter() - started
    if result.status == TIME_LIMIT_STATUS:
        status = f"the program was not solved within the {time_limit_s:g} s time limit"
        return CapacityBound(None, status, elapsed, full.n_vars, {}, call_facets)
    if result.status != 0:
        return CapacityBound(None, str(result.message), elapsed, full.n_vars, {}, call_facets)
    status = f"lagrangian (priced on {len(picks)} of {n} workflows)"
    return CapacityBound(
        float(result.fun), status, elapsed, full.n_vars, full.slow_share(y), call_facets
    )


def _solve_priced(
    prog: _Program, price: dict[tuple[Any, ...], float], horizon_s: float, limit: float | None
) -> tuple[Any, np.ndarray]:
    """min f - sum p g over the workflows' own rows and the residency columns' GPU rows
    (module doc); returns linprog's result and the solution's columns."""
    res = prog.residency()
    cost = np.array(prog.cost)
    base = prog.n_vars
    x = {key: base + i for i, key in enumerate(res.upper)}
    gpu_rows = [[(x[key], coef) for key, coef in terms] for _, terms, _ in res.gpu_rows]
    x_cost = np.zeros(len(x))
    for (m, k), use in prog.use.items():
        # p x (what the calls use - horizon x capacity) per priced row, gathered per list
        # of the class's terms: one weight each, and the capacity priced in all
        charge = _Charges()
        edges = _facets(prog.levels[k])
        for e, (alpha, beta) in enumerate(edges):
            charge.add(price.get(("decode", m, k, e), 0.0), 1.0, own=1.0, steps=alpha, seen=beta)
        if use.shares and use.rest_steps:
            for e, (alpha, beta) in enumerate(edges):
                p = price.get(("rest", m, k, e), 0.0)
                charge.add(p, 1.0, own=1.0, shares=1.0, rest_steps=alpha, rest_seen=beta)
        elif use.shares:
            charge.add(price.get(("shares", m, k), 0.0), 1.0, own=1.0, shares=1.0)
        charge.add(price.get(("kv", m, k), 0.0), res.kv[k], kv=1.0)
        charge.add(price.get(("slots", m, k), 0.0), res.slots[k], slots=1.0)
        for name, w in charge.weight.items():
            terms: list[tuple[int, float]] = getattr(use, name)
            if w and terms:
                cols, coefs = zip(*terms, strict=True)
                np.add.at(cost, np.array(cols), w * np.array(coefs))
        for key in res.serves.get(k, []):
            x_cost[x[key] - base] -= horizon_s * charge.priced
    upper = list(res.upper.values())
    gpus = [g for _, _, g in res.gpu_rows]
    return _linprog(prog, np.concatenate([cost, x_cost]), gpu_rows, gpus, upper, limit)


class _Charges:
    """One class's priced rows, gathered: ``p`` x (what its calls use - horizon x its
    capacity) per row, as one weight per list of its terms (``bound._ClassUse``'s fields)
    and the capacity priced in all (per unit of residency)."""

    def __init__(self) -> None:
        self.weight: dict[str, float] = {}
        self.priced = 0.0

    def add(self, p: float, per_unit: float, **lists: float) -> None:
        """A row priced ``p``: ``per_unit`` capacity per unit, ``factor`` x each list."""
        self.priced += p * per_unit
        for name, factor in lists.items():
            self.weight[name] = self.weight.get(name, 0.0) + p * factor


def _linprog(
    prog: _Program,
    cost: np.ndarray,
    gpu_rows: list[list[tuple[int, float]]],
    gpus: list[float],
    upper: list[float],
    limit: float | None,
) -> tuple[Any, np.ndarray]:
    """The block-diagonal program: the workflows' rows, plus ``sum tp x <= gpus`` and
    ``0 <= x <= upper`` (dual simplex: a vertex, so the value is the minimum's, and fast on
    blocks)."""
    n_rows = len(prog.rhs)
    rows = list(prog.rows) + [n_rows + i for i, row in enumerate(gpu_rows) for _ in row]
    cols = list(prog.cols) + [c for row in gpu_rows for c, _ in row]
    vals = list(prog.vals) + [a for row in gpu_rows for _, a in row]
    a_ub = coo_matrix((vals, (rows, cols)), shape=(n_rows + len(gpu_rows), cost.size)).tocsr()
    eq_rows = [r for r, (terms, _) in enumerate(prog.eq) for _ in terms]
    eq_cols = [c for terms, _ in prog.eq for c, _ in terms]
    eq_vals = [a for terms, _ in prog.eq for _, a in terms]
    a_eq = coo_matrix((eq_vals, (eq_rows, eq_cols)), shape=(len(prog.eq), cost.size)).tocsr()
    bounds = [(0.0, u) for u in prog.upper] + [(0.0, u) for u in upper]
    options: dict[str, float] = {} if limit is None else {"time_limit": max(1e-3, limit)}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Unrecognized options", OptimizeWarning)
        result = linprog(
            cost,
            A_ub=a_ub,
            b_ub=np.array(list(prog.rhs) + gpus),
            A_eq=a_eq,
            b_eq=np.array([v for _, v in prog.eq]),
            bounds=bounds,
            method="highs-ds",
            options=options,
        )
    y = np.asarray(result.x) if result.x is not None else np.zeros(cost.size)
    return result, y
