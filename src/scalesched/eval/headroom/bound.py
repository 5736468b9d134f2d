"""The capacity-aware lower bound on the mean response time: a fluid relaxation of the
simulator's model, solved as one linear program (HiGHS).

Why a second bound. The contention-free bound puts every LLM call on its fastest server
(an H100 for the large models). When the offered work of a model is more than the fast
servers can decode, some calls must run on slower ones, and that share of the gap to the
contention-free bound is not headroom any scheduler could win. This bound charges it.

The program, over the measured workflows W (arrived in the measurement window):

* each LLM call ``i`` is placed on engine class ``k`` (model x GPU type x tensor
  parallelism) a fraction ``y[i, k] >= 0``, ``sum_k y[i, k] = 1``, and sees ``u[i, k] / y``
  seconds per decode step (less its own attention), between the step alone and the step
  of the largest batch it can share (``batch_levels``); its duration is
  ``sum_k y (prefill_k + out attn_k ctx_i) + out u``; a tool's is alone on the fastest core;
* ``e_i >= e_p + d_i`` for every parent ``p``, ``e_i >= d_i``, and ``R_w >= e_i``: ``R_w``
  is at least the workflow's critical path under those durations;
* capacity: engine ``(s, m)`` (model ``m`` on server ``s``) is resident a fraction
  ``x[s, m] <= 1`` of the time, ``sum_m tp[s, m] x[s, m] <= gpus[s]``; per class, over the
  horizon ``T = n / rate`` (the window's workflows over the offered rate): decode seconds
  <= ``T sum x``, KV token-seconds <= ``T sum x kv_tokens``, slot-seconds <=
  ``T sum x batch_cap``;
* minimise ``mean_w R_w``.

Why it is a lower bound on the steady-state mean response of any schedule:

1. Durations. A decode step of ``b`` requests takes ``lin[b] + attn sum_j ctx_j`` >=
   ``lin[b] + attn (ctx_i + (b - 1) min_ctx)`` (``min_ctx``: the model's smallest context
   in the run), and ``lin`` does not decrease with ``b``; prefill is the call's own.
   Queueing, loads and transfers only add time. So each response is at least the critical
   path under the durations of its actual (integral) placement and batches; fractions
   only relax that.
2. Decode seconds. Split a step of ``b`` requests as ``lin[b] / b + attn ctx_j`` per
   request: an engine's decode time is the sum over its calls of their steps' shares. A
   call's (seen, share) per step lies on or above the lower-left convex hull of the
   points (``lin[b] + attn (b - 1) min_ctx``, ``lin[b] / b``), ``b`` up to the batch cap
   and to what KV memory holds of the model's smallest call; every hull edge, extended,
   is a line (``alpha + beta seen``, ``beta < 0``) below the hull, so below every step's
   point (a step seen beyond the hull's end, ``seen_max``, counts as ``seen_max``: the last
   vertex is the cheapest point, so each line holds there too, and ``u`` is capped at
   ``seen_max``). Summed over one call's steps on class ``k``: its share there, less its own
   attention, is ``c >= out (alpha y + beta u)`` for every edge (Jensen per call: ``c``
   is a column of its own, bounded by ``CALL_FACETS`` edges, any subset of which is
   valid). Fan-out calls (``fanout_calls``) get such a column; the other calls of the
   class, as one group, get ``r >= alpha O' + beta S'`` for every edge (Jensen over the
   group); the class's decode seconds are at least ``sum c + r + A`` (``A`` own attention
   seconds placed there). Summed over the class's calls first, ``alpha O + beta S + A``
   (``O`` steps, ``S`` seen step-seconds) holds for every edge too and is kept, but alone
   it is much looser: it charges the class at the calls' mean step, so a clairvoyant
   program could give each test-time-scaling workflow's longest sample an engine to
   itself (step ``lin[1]``) and pay for it with samples in large batches, at the price of
   the average batch (docs/headroom-map.md, "Test-time scaling").
3. KV and slots. A call holds its KV tokens (at most the engine's, when it runs alone)
   and a batch slot from admission to its end, at least its duration; an engine holds
   at most its KV capacity and batch cap at any instant.
4. Residency. At every instant the resident engines of a server hold at most its GPUs;
   averaged over time that is the ``x`` row. An engine serves only while resident.
5. Rates (the assumption). In steady state the work each engine class completes per second
   equals the work placed on it per second, so the window's calls use the classes'
   capacity over ``T`` and no more. A finite run can differ a little: it can borrow
   capacity from its warm-up and cool-down. It holds for a schedule that keeps up with
   the arrivals (a run judged steady).
6. Slack. Calls off the critical path may run on slow classes or in big batches at no cost
   to ``R_w`` as far as their slack allows; the program finds that, so only the
   unavoidable share of slow placement is charged. The bound is never below the
   contention-free bound (every duration is at least the fastest alone) and equals it when
   the fast classes have room.

Caches (``reuse``): with KV reuse a call with a prompt prefix identity counts the prefill
of its last block only and holds only its output's KV for itself (everything before could
have been cached, shared with the segments before it); with the tool cache a repeated tool
call counts ``LOOKUP_S``: the least any run with those caches could take, so the bound
stays below every such run (``decompose.Reuse``).

Left out (each only loosens the bound): tool CPU cores, model load time, prefill's use of
the engine, transfers, and the batchmates' real contexts (every other request of a batch
counts as the model's smallest call, ``min_ctx``: on best-of-n the samples' contexts are
about twice the smallest pose's, and the bound rises by about 1 s of 9 at load 0.5 on
homogeneous-16 when the batchmates count at twice ``min_ctx``, a figure no valid argument
here gives).

When even every class fully used cannot absorb the offered work, no schedule keeps up (the
queues grow): the program is infeasible and there is no bound (``None``).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import OptimizeWarning, linprog
from scipy.sparse import coo_matrix

from scalesched.cluster.tables import MODEL_INDEX, MODEL_NAMES, ClusterTables
from scalesched.eval.headroom.decompose import NO_REUSE, Reuse, alone_fastest
from scalesched.workload.instance import Job, TaskInstance, WorkflowInstance

TIME_LIMIT_STATUS = 1
"""``scipy.optimize.linprog``'s status for a solve stopped by its iteration or time limit."""
BOUND_TIME_LIMIT_S = 600.0
"""Default wall seconds the program may take before the study reports no capacity bound
(agentic-mix on hetero-16 at 1500 workflows takes about 50 s; a bursty window can take
twenty times that)."""

CALL_FACETS = 17
"""Most hull edges bounding each call's own share (``c`` in point 2 of the module doc),
picked at geometric steps along the hull (``pick_facets``): where the hull bends most (a
few requests per batch) every edge, further out every few. 17 holds the geometric picks of
a 63-edge hull (llama-2-7b on an A100) and gives the bound of all 63 to 0.01% at about a
third of the solve time; 0 drops the per-call rows (the aggregate rows alone: the bound
before them)."""


@dataclass(frozen=True)
class CapacityBound:
    """The program's answer."""

    mean_s: float | None
    """The bound on the mean response (None: infeasible, the load is past capacity)."""
    status: str
    solve_s: float
    variables: int
    slow_share: dict[str, float] = field(default_factory=dict)
    """Per model: the share of its calls' decode work the bound places off the fastest class."""
    call_facets: int = CALL_FACETS
    """Hull edges bounding each call's own decode share (0: the class-aggregate rows only)."""

    def as_json(self) -> dict[str, object]:
        return {
            "mean_s": self.mean_s,
            "status": self.status,
            "solve_s": self.solve_s,
            "variables": self.variables,
            "slow_share": self.slow_share,
            "call_facets": self.call_facets,
        }


def batch_levels(tables: ClusterTables, k: int, min_ctx: int, min_need: int) -> np.ndarray:
    """The lower-left convex hull of engine class ``k``'s per-step trade-off: for each batch
    size ``b`` a request can decode in, (step seconds it sees at least, step seconds it
    costs the engine) = (``lin[b] + attn (b - 1) min_ctx``, ``lin[b] / b``), both less the
    request's own ``attn ctx``. ``b`` runs up to the batch cap and to what the KV memory
    holds of the model's smallest call. Rows: (seen, cost)."""
    cap = int(tables.max_batch[k])
    top = max(1, min(cap, int(tables.kv_capacity[k]) // max(1, min_need)))
    b = np.arange(1, top + 1)
    lin = tables.decode_lin[k, 1 : top + 1]
    seen = lin + float(tables.decode_attn[k]) * (b - 1) * min_ctx
    return lower_left_hull(seen, lin / b)


def lower_left_hull(seen: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """The lower-left convex hull of the points (``seen``, ``cost``), as rows (seen, cost)
    in order of seen: every point lies on or above each of its edges, extended."""
    order = np.lexsort((cost, seen))
    seen, cost = seen[order], cost[order]
    # the Pareto front first (cheaper than every point seen sooner): a numpy pass, so
    # that the walk below sees few points however many there are
    before = np.concatenate(([np.inf], np.minimum.accumulate(cost)[:-1]))
    front = cost < before
    hull: list[tuple[float, float]] = []
    for x, y in zip(seen[front].tolist(), cost[front].tolist(), strict=True):
        if hull and y >= hull[-1][1]:
            continue  # dominated: no cheaper for the engine, and slower
        while len(hull) >= 2:
            (x1, y1), (x2, y2) = hull[-2], hull[-1]
            if (x2 - x1) * (y - y1) - (y2 - y1) * (x - x1) <= 0:
                hull.pop()  # hull[-1] lies on or above the chord: a mix of its neighbours
            else:
                break
        hull.append((x, y))
    return np.array(hull)


@dataclass
class _ClassUse:
    """What the calls placed on one engine class use, as sums of their columns."""

    steps: list[tuple[int, float]] = field(default_factory=list)
    """Decode steps placed there (``out y``): O."""
    seen: list[tuple[int, float]] = field(default_factory=list)
    """Step-seconds they see, less their own attention (``out u``): S."""
    own: list[tuple[int, float]] = field(default_factory=list)
    """Their own attention's decode seconds (``out attn ctx y``): A."""
    kv: list[tuple[int, float]] = field(default_factory=list)
    """KV token-seconds (tokens x residence >= duration)."""
    slots: list[tuple[int, float]] = field(default_factory=list)
    """Slot-seconds (residence >= duration)."""
    shares: list[tuple[int, float]] = field(default_factory=list)
    """Each fan-out call's own decode share there, less its own attention (its ``c``
    column)."""
    rest_steps: list[tuple[int, float]] = field(default_factory=list)
    """Steps of the calls without a column of their own (the rest of O)."""
    rest_seen: list[tuple[int, float]] = field(default_factory=list)
    """Step-seconds those calls see (the rest of S)."""


@dataclass(frozen=True)
class Residency:
    """The program's capacity side (module doc, 3 and 4): its residency columns, the GPU
    rows over them, and which columns give each engine class its capacity. On a world's
    tables a column is an engine's resident fraction (``x[s, m]``); over allocations
    (``allocation``) it is the GPUs a pool of servers gives a class."""

    upper: dict[Hashable, float]
    """Each residency column (by key, in column order) and its upper bound."""
    gpu_rows: list[tuple[tuple[Any, ...], list[tuple[Hashable, float]], float]]
    """(row key, [(column key, GPUs per unit)], GPUs): sum <= GPUs."""
    serves: dict[int, list[Hashable]]
    """Per engine class: the columns whose units give it capacity."""
    kv: dict[int, float]
    """Per engine class: KV tokens one unit of residency holds."""
    slots: dict[int, float]
    """Per engine class: batch slots one unit of residency holds."""


def table_residency(tables: ClusterTables, models: Sequence[int]) -> Residency:
    """A world's residency: ``x[s, m] <= 1`` per server and model with an engine, ``sum_m
    tp x <= gpus`` per server; a unit is one engine (its KV capacity, its batch cap)."""
    t = tables
    upper: dict[Hashable, float] = {}
    rows: list[tuple[tuple[Any, ...], list[tuple[Hashable, float]], float]] = []
    serves: dict[int, list[Hashable]] = {}
    for s in range(t.n):
        terms: list[tuple[Hashable, float]] = []
        for m in models:
            k = int(t.engine_class[s, m])
            if k >= 0:
                upper[s, m] = 1.0
                terms.append(((s, m), float(t.tp[s, m])))
                serves.setdefault(k, []).append((s, m))
        if terms:
            rows.append((("gpu", s), terms, float(t.gpus[s])))
    return Residency(
        upper,
        rows,
        serves,
        {k: float(t.kv_capacity[k]) for k in serves},
        {k: float(t.max_batch[k]) for k in serves},
    )


def fan_outs(workflow: WorkflowInstance) -> list[list[int]]:
    """Task indexes of each fan-out: two or more LLM calls of one model with the same
    parents, released together (a best-of-n's samples, a self-consistency's paths)."""
    groups: dict[tuple[str, tuple[int, ...]], list[int]] = {}
    for i, task in enumerate(workflow.tasks):
        if task.kind == "llm" and task.model:
            key = (task.model, tuple(sorted(workflow.parents[i])))
            groups.setdefault(key, []).append(i)
    return [members for members in groups.values() if len(members) > 1]


def fanout_calls(workflow: WorkflowInstance) -> set[int]:
    """The fan-out calls of a workflow. Only they get a decode-share column of their own:
    the class-aggregate rows are what is loose for them (module doc, 2), and a column per
    call everywhere costs minutes of solve time for a bound that moves 0.2% on
    agentic-mix."""
    return {i for members in fan_outs(workflow) for i in members}


class _Program:
    """Columns and rows of the linear program, built workflow by workflow."""

    def __init__(
        self,
        tables: ClusterTables,
        classes: dict[int, list[int]],
        levels: dict[int, np.ndarray],
        call_facets: int = CALL_FACETS,
        reuse: Reuse = NO_REUSE,
    ) -> None:
        self.tables, self.classes, self.levels, self.reuse = tables, classes, levels, reuse
        self.call_facet_limit = call_facets
        self.call_facets = {k: pick_facets(_facets(lv), call_facets) for k, lv in levels.items()}
        """Per class: the hull edges that bound each call's own share (none: 0)."""
        self.cost: list[float] = []
        self.upper: list[float | None] = []
        self.rows: list[int] = []
        self.cols: list[int] = []
        self.vals: list[float] = []
        self.rhs: list[float] = []
        self.eq: list[tuple[list[tuple[int, float]], float]] = []
        """Equality rows: (terms, value); per LLM call its y columns sum to 1."""
        self.use: dict[tuple[int, int], _ClassUse] = {}
        """Per (model, class)."""
        self.shares: list[tuple[int, int, float, bool]] = []
        """Per y column: (column, model, decode steps, whether the class is the fastest)."""
        self.coupling: dict[tuple[Any, ...], int] = {}
        """The rows ``capacity`` adds, by what they say: ``("gpu", s)``, ``("decode", m, k,
        e)`` (edge ``e`` of the hull), ``("shares", m, k)``, ``("rest", m, k, e)``,
        ``("kv", m, k)``, ``("slots", m, k)`` (``lagrange`` prices them)."""

    @property
    def n_vars(self) -> int:
        return len(self.cost)

    def var(self, cost: float = 0.0, upper: float | None = None) -> int:
        self.cost.append(cost)
        self.upper.append(upper)
        return self.n_vars - 1

    def geq(self, terms: Sequence[tuple[int, float]], const: float) -> None:
        """sum(coef x) >= const, stored as -sum <= -const."""
        r = len(self.rhs)
        for col, coef in terms:
            self.rows.append(r)
            self.cols.append(col)
            self.vals.append(-coef)
        self.rhs.append(-const)

    def duration(
        self, task: TaskInstance, own_share: bool = False
    ) -> tuple[list[tuple[int, float]], float]:
        """The task's duration as (terms, constant). An LLM call is on class ``k`` a
        fraction ``y`` and sees ``u / y`` seconds per step (between the class's fastest and
        slowest batch level, ``batch_levels``), less its own attention. ``own_share``: the
        call gets a decode-share column of its own (a fan-out sample, module doc, 2)."""
        if task.kind != "llm" or not task.model:
            return [], self.fastest(task)
        m = MODEL_INDEX[task.model]
        out = max(1, task.output_tokens)
        ctx = task.prompt_tokens + out // 2
        kv_tokens = self.reuse.kv_tokens(task)
        prefilled = self.reuse.prefilled(task)
        fastest = self.fastest(task)
        terms, ys = [], []
        for k in self.classes[m]:
            fixed, own_attn, kv_cap = self.class_costs(k, prefilled, ctx, out)
            levels = self.levels[k]
            y, u = self.var(), self.var()
            ys.append(y)
            terms += [(y, fixed), (u, float(out))]
            self.geq([(u, 1.0), (y, -float(levels[0, 0]))], 0.0)  # u >= y seen_min
            self.geq([(y, float(levels[-1, 0])), (u, -1.0)], 0.0)  # u <= y seen_max
            use = self.use.setdefault((m, k), _ClassUse())
            use.steps.append((y, float(out)))
            use.seen.append((u, float(out)))
            use.own.append((y, out * own_attn))
            if own_share and self.call_facets[k]:
                use.shares.append((self.call_share(k, y, u, float(out)), 1.0))
            else:
                use.rest_steps.append((y, float(out)))
                use.rest_seen.append((u, float(out)))
            kv = min(float(kv_tokens), kv_cap)
            use.kv += [(y, kv * fixed), (u, kv * out)]
            use.slots += [(y, fixed), (u, float(out))]
            alone = fixed + out * float(levels[0, 0])
            self.shares.append((y, m, float(out), alone <= fastest))
        self.eq.append(([(y, 1.0) for y in ys], 1.0))
        return terms, 0.0

    def class_costs(self, k: int, prefilled: int, ctx: int, out: int) -> tuple[float, float, float]:
        """What a call (``prefilled`` prompt tokens computed, mean context ``ctx``, ``out``
        decode steps) costs on class ``k``, besides the steps' shared part: (its prefill
        plus its own attention over its steps, in seconds; its own attention per step in
        the class's capacity units (decode-seconds of one engine); the most KV tokens it
        can hold there)."""
        t = self.tables
        attn = float(t.decode_attn[k]) * ctx
        fixed = t.engines[k].prefill_s(prefilled) + out * attn
        return fixed, attn, float(t.kv_capacity[k])

    def fastest(self, task: TaskInstance) -> float:
        """The task alone on its fastest server (a tool's duration; the call's yardstick of
        ``slow_share``)."""
        return alone_fastest(self.tables, task, self.reuse)

    def residency(self) -> Residency:
        """The capacity side: a world's engines and servers (``table_residency``)."""
        return table_residency(self.tables, list(self.classes))

    def call_share(self, k: int, y: int, u: int, out: float) -> int:
        """A column ``c >= out (alpha y + beta u)`` for each of class ``k``'s picked hull
        edges: the call's decode share on ``k``, less its own attention (module doc, 2)."""
        c = self.var()
        for alpha, beta in self.call_facets[k]:
            self.geq([(c, 1.0), (y, -alpha * out), (u, -beta * out)], 0.0)
        return c

    def workflow(self, job: Job, weight: float) -> None:
        """R_w >= e_i >= e_p + d_i for the workflow's tasks (critical path under d)."""
        wf = job.workflow
        finish: list[int] = []
        r_col = self.var(weight)
        fan = fanout_calls(wf)
        for i, task in enumerate(wf.tasks):
            terms, const = self.duration(task, own_share=i in fan)
            e = self.var()
            finish.append(e)
            parents: Sequence[int | None] = wf.parents[i] or (None,)
            for p in parents:
                lhs = [(e, 1.0)] + [(c, -a) for c, a in terms]
                if p is not None:
                    lhs.append((finish[p], -1.0))
                self.geq(lhs, const)
            self.geq([(r_col, 1.0), (e, -1.0)], 0.0)

    def _sum(self, terms: list[tuple[int, float]]) -> int:
        """A column equal to sum(coef x)."""
        col = self.var()
        self.eq.append(([(col, 1.0)] + [(c, -a) for c, a in terms], 0.0))
        return col

    def capacity(self, horizon_s: float) -> None:
        """Residency columns and their GPU rows (``residency``); per class, what its calls
        use <= horizon x the units resident there x one unit's capacity: decode seconds
        (each facet of ``batch_levels``, by Jensen over the calls), KV token-seconds,
        slots."""
        res = self.residency()
        x = {key: self.var(upper=upper) for key, upper in res.upper.items()}
        for row_key, terms, gpus in res.gpu_rows:
            self.coupling[row_key] = len(self.rhs)
            self.geq([(x[key], -coef) for key, coef in terms], -gpus)  # sum tp x <= gpus
        for (m, k), use in self.use.items():
            servers = [x[key] for key in res.serves.get(k, [])]
            steps, seen, own = self._sum(use.steps), self._sum(use.seen), self._sum(use.own)
            for e, (alpha, beta) in enumerate(_facets(self.levels[k])):
                # decode seconds >= alpha O + beta S + A
                self.coupling["decode", m, k, e] = len(self.rhs)
                lhs = [(s, horizon_s) for s in servers] + [(own, -1.0), (steps, -alpha)]
                self.geq(lhs + [(seen, -beta)], 0.0)
            if use.shares:
                # decode seconds >= the fan-out calls' own shares + the rest's (Jensen
                # over the rest as a group: r >= alpha O' + beta S' per edge) + A
                rest = self.var()
                if use.rest_steps:
                    rest_o, rest_s = self._sum(use.rest_steps), self._sum(use.rest_seen)
                    for e, (alpha, beta) in enumerate(_facets(self.levels[k])):
                        self.coupling["rest", m, k, e] = len(self.rhs)
                        self.geq([(rest, 1.0), (rest_o, -alpha), (rest_s, -beta)], 0.0)
                self.coupling["shares", m, k] = len(self.rhs)
                lhs = [(s, horizon_s) for s in servers] + [(own, -1.0), (rest, -1.0)]
                self.geq(lhs + [(c, -a) for c, a in use.shares], 0.0)
            for name, amount, per_unit in (
                ("kv", use.kv, res.kv[k]),
                ("slots", use.slots, res.slots[k]),
            ):
                self.coupling[name, m, k] = len(self.rhs)
                self.geq(
                    [(s, horizon_s * per_unit) for s in servers] + [(c, -a) for c, a in amount],
                    0.0,
                )

    def solve(self, time_limit_s: float | None = None) -> Any:
        a_ub = coo_matrix(
            (self.vals, (self.rows, self.cols)), shape=(len(self.rhs), self.n_vars)
        ).tocsr()
        rows = [r for r, (terms, _) in enumerate(self.eq) for _ in terms]
        cols = [c for terms, _ in self.eq for c, _ in terms]
        vals = [a for terms, _ in self.eq for _, a in terms]
        a_eq = coo_matrix((vals, (rows, cols)), shape=(len(self.eq), self.n_vars))
        problem = {
            "A_ub": a_ub,
            "b_ub": np.array(self.rhs),
            "A_eq": a_eq.tocsr() if self.eq else None,
            "b_eq": np.array([v for _, v in self.eq]) if self.eq else None,
            "bounds": [(0.0, u) for u in self.upper],
            "method": "highs-ipm",  # HiGHS interior point: ~3x the dual simplex here
        }
        started = time.perf_counter()

        def limit() -> dict[str, float]:
            if time_limit_s is None:
                return {}
            return {"time_limit": max(1e-3, time_limit_s - (time.perf_counter() - started))}

        with warnings.catch_warnings():
            # scipy passes HiGHS options it does not know verbatim, with a warning
            warnings.filterwarnings("ignore", "Unrecognized options", OptimizeWarning)
            # first without crossover to a vertex: only the optimum's value is read (the
            # interior solution's is within 1e-8 of it), and crossover takes about half
            # the time; an interior point HiGHS cannot certify gets the crossover after all
            # (not one the time limit stopped: that is the answer)
            cost = np.array(self.cost)
            result = linprog(cost, **problem, options={"run_crossover": "off", **limit()})
            if result.status not in (0, TIME_LIMIT_STATUS):
                result = linprog(cost, **problem, options=limit())
        return result

    def slow_share(self, y: np.ndarray) -> dict[str, float]:
        """Per model: the share of its calls' decode steps placed off their fastest class."""
        total: dict[int, float] = {}
        slow: dict[int, float] = {}
        for col, m, steps, fastest in self.shares:
            total[m] = total.get(m, 0.0) + y[col] * steps
            if not fastest:
                slow[m] = slow.get(m, 0.0) + y[col] * steps
        return {
            MODEL_NAMES[m]: float(slow.get(m, 0.0) / tot)
            for m, tot in sorted(total.items())
            if tot > 0
        }


def _facets(levels: np.ndarray) -> list[tuple[float, float]]:
    """(alpha, beta) of each edge of the hull (cost = alpha + beta seen); one flat line
    when the hull is a single point."""
    if len(levels) == 1:
        return [(float(levels[0, 1]), 0.0)]
    out = []
    for (x1, y1), (x2, y2) in zip(levels[:-1], levels[1:], strict=True):
        beta = (y2 - y1) / (x2 - x1)
        out.append((float(y1 - beta * x1), float(beta)))
    return out


def pick_facets(facets: list[tuple[float, float]], limit: int) -> list[tuple[float, float]]:
    """At most ``limit`` of ``facets`` (hull edges in order of batch size): every one when
    they fit, else those at indexes ``round(1.25^j) - 1`` (dense where few requests share
    a batch, where the hull bends most), thinned to every other one, always keeping the
    last. Any subset is valid: each edge alone bounds the share from below."""
    if limit <= 0:
        return []
    if len(facets) <= limit:
        return list(facets)
    if limit == 1:
        return [facets[0]]
    last = len(facets) - 1
    picks = sorted({min(last, round(1.25**j) - 1) for j in range(64)})
    while len(picks) > limit:
        picks = sorted({*picks[::2], last})
    return [facets[i] for i in picks]


def _classes(tables: ClusterTables) -> dict[int, list[int]]:
    """Per model: the engine classes that run it."""
    return {
        m: sorted({int(k) for k in tables.engine_class[:, m] if k >= 0})
        for m in range(tables.engine_class.shape[1])
    }


def smallest_calls(
    jobs: Sequence[Job], reuse: Reuse = NO_REUSE
) -> tuple[dict[int, int], dict[int, int]]:
    """Per model, among ``jobs``' calls: the smallest mean context and the smallest KV a
    call holds for itself (with ``reuse``): what every batchmate counts as
    (``batch_levels``)."""
    need: dict[int, int] = {}
    ctx: dict[int, int] = {}
    for job in jobs:
        for task in job.workflow.tasks:
            if task.kind == "llm" and task.model:
                m = MODEL_INDEX[task.model]
                n = reuse.kv_tokens(task)
                c = task.prompt_tokens + max(1, task.output_tokens) // 2
                need[m] = min(need.get(m, n), n)
                ctx[m] = min(ctx.get(m, c), c)
    return ctx, need


def _levels(
    tables: ClusterTables,
    classes: dict[int, list[int]],
    jobs: Sequence[Job],
    reuse: Reuse = NO_REUSE,
) -> dict[int, np.ndarray]:
    """``batch_levels`` of every class, for the smallest call of its model among ``jobs``
    (smallest in the KV it holds for itself, with ``reuse``)."""
    ctx, need = smallest_calls(jobs, reuse)
    return {
        k: batch_levels(tables, k, ctx.get(m, 0), need.get(m, 1))
        for m, ks in classes.items()
        for k in ks
    }


def capacity_bound(
    tables: ClusterTables,
    jobs: Sequence[Job],
    offered_rate_wps: float,
    run_jobs: Sequence[Job] | None = None,
    *,
    call_facets: int = CALL_FACETS,
    reuse: Reuse = NO_REUSE,
    time_limit_s: float | None = None,
) -> CapacityBound:
    """The bound over ``jobs`` (the measured workflows) arriving at ``offered_rate_wps``;
    ``run_jobs``: every job of the run (the smallest calls that may share a batch with the
    measured ones; default ``jobs``); ``call_facets``: hull edges per call's own share
    (``CALL_FACETS``; 0: the class-aggregate rows only, a looser bound); ``reuse``: the
    caches the runs had (each call then counts the least prefill and KV memory, and each
    repeated tool call the least time, any run with them could take); ``time_limit_s``:
    wall seconds the solve may take (None: no limit), past which there is no bound
    (``mean_s`` None, the status says so). A bound that is given never depends on the
    limit; whether one is given depends on the machine's speed."""
    started = time.perf_counter()
    n = len(jobs)
    if call_facets < 0:
        raise ValueError(f"call_facets must be >= 0, got {call_facets}")
    if n == 0 or not offered_rate_wps > 0:
        return CapacityBound(None, "no measured workflows", 0.0, 0, call_facets=call_facets)
    classes = _classes(tables)
    levels = _levels(tables, classes, run_jobs or jobs, reuse)
    prog = _Program(tables, classes, levels, call_facets, reuse)
    return solve_whole(prog, jobs, offered_rate_wps, time_limit_s, started)


def solve_whole(
    prog: _Program,
    jobs: Sequence[Job],
    offered_rate_wps: float,
    time_limit_s: float | None,
    started: float,
) -> CapacityBound:
    """``prog`` over ``jobs`` (each weighing one over their count) and its capacity over
    their horizon at ``offered_rate_wps``, solved whole; ``started``: when the caller's
    clock began (the answer's ``solve_s``)."""
    n, call_facets = len(jobs), prog.call_facet_limit
    for job in jobs:
        prog.workflow(job, 1.0 / n)
    prog.capacity(n / offered_rate_wps)
    result = prog.solve(time_limit_s)
    elapsed = time.perf_counter() - started
    if result.status == TIME_LIMIT_STATUS:
        status = f"the program was not solved within the {time_limit_s:g} s time limit"
        return CapacityBound(None, status, elapsed, prog.n_vars, {}, call_facets)
    if result.status != 0:
        return CapacityBound(None, str(result.message), elapsed, prog.n_vars, {}, call_facets)
    y = np.asarray(result.x)
    mean = float(result.fun)
    return CapacityBound(mean, "optimal", elapsed, prog.n_vars, prog.slow_share(y), call_facets)
