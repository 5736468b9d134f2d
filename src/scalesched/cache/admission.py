"""Joint admission and placement of waiting sessions under KV capacity (TAO's solver).

TAO (tool-aware joint scheduling for LLM agent serving, 2026) admits waiting sessions and
places them on GPU nodes in one decision, whenever a GPU frees or a tool returns. The
problem: session i placed on node j is worth ``value[i, j]`` (tool readiness plus the
node's decayed cache credit for the session, minus its token footprint; the policy builds
these), needs ``footprint[i]`` KV blocks, and node j has ``capacity[j]`` free blocks. Pick
at most one node per session, within every node's capacity, to maximise the total value;
a session not admitted waits (value 0), so only positive values are ever taken.

This is the generalised assignment problem (NP-hard). ``solve_dp`` is the dynamic
programme: footprints in whole KV blocks, an exact 0/1 knapsack per node over the blocks,
and coordinate ascent over the nodes. When node j is re-solved, a session already on j
counts its full value, an unplaced one its value on j, and one placed on node k its gain
``value[i, j] - value[i, k]`` (moving it frees k's blocks, so no other node can become
infeasible). Each knapsack's optimum is then the best total after re-deciding node j with
the others fixed, so the total never decreases; the passes stop when a full round over
the nodes changes nothing. ``solve_milp`` is the exact optimum by HiGHS
(scipy.optimize.milp) for checking the DP on small instances (docs/cache.md reports the
gap and the solve times).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

__all__ = ["AdmissionProblem", "Assignment", "random_problem", "solve_dp", "solve_milp"]

UNPLACED = -1


@dataclass(frozen=True)
class AdmissionProblem:
    value: np.ndarray
    """(sessions, nodes) float: what admitting session i on node j is worth."""
    footprint: np.ndarray
    """(sessions,) int: KV blocks session i needs where it is admitted."""
    capacity: np.ndarray
    """(nodes,) int: free KV blocks per node."""

    def __post_init__(self) -> None:
        s, n = self.value.shape
        if self.footprint.shape != (s,) or self.capacity.shape != (n,):
            raise ValueError("value is (sessions, nodes); footprint (sessions,); capacity (nodes,)")
        if (self.footprint < 0).any() or (self.capacity < 0).any():
            raise ValueError("footprints and capacities are non-negative block counts")

    def total(self, node_of: np.ndarray) -> float:
        placed = node_of != UNPLACED
        return float(self.value[np.flatnonzero(placed), node_of[placed]].sum())

    def feasible(self, node_of: np.ndarray) -> bool:
        used = np.zeros(len(self.capacity), dtype=np.int64)
        placed = node_of != UNPLACED
        np.add.at(used, node_of[placed], self.footprint[placed])
        return bool((used <= self.capacity).all())


@dataclass(frozen=True)
class Assignment:
    node_of: np.ndarray
    """(sessions,) int: the node each session is admitted on, or -1 (waits)."""
    total_value: float
    solve_time_s: float
    optimal: bool
    """Proven optimal (the MILP); the DP makes no such claim."""


def _knapsack(gain: np.ndarray, weight: np.ndarray, capacity: int) -> np.ndarray:
    """Indices of the 0/1 knapsack optimum over items with positive gain (exact DP over
    whole blocks, one numpy row per item)."""
    items = np.flatnonzero((gain > 0) & (weight <= capacity))
    if items.size == 0:
        return items
    best = np.zeros(capacity + 1)
    took = np.zeros((items.size, capacity + 1), dtype=bool)
    for row, i in enumerate(items):
        w, g = int(weight[i]), float(gain[i])
        candidate = np.full(capacity + 1, -np.inf)
        candidate[w:] = best[: capacity + 1 - w] + g
        took[row] = candidate > best
        best = np.maximum(best, candidate)
    chosen = []
    c = capacity
    for row in range(items.size - 1, -1, -1):
        if took[row, c]:
            chosen.append(items[row])
            c -= int(weight[items[row]])
    return np.array(chosen[::-1], dtype=np.int64)


def _pair_knapsack(
    gain_j: np.ndarray, gain_k: np.ndarray, weight: np.ndarray, cap_j: int, cap_k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Exact two-node knapsack: each item goes to node j, node k or neither (DP over both
    nodes' free blocks at once)."""
    items = np.flatnonzero((gain_j > 0) | (gain_k > 0))
    best = np.zeros((cap_j + 1, cap_k + 1))
    choice = np.zeros((items.size, cap_j + 1, cap_k + 1), dtype=np.int8)
    for row, i in enumerate(items):
        w = int(weight[i])
        on_j = np.full_like(best, -np.inf)
        on_k = np.full_like(best, -np.inf)
        if gain_j[i] > 0 and w <= cap_j:
            on_j[w:, :] = best[: cap_j + 1 - w, :] + gain_j[i]
        if gain_k[i] > 0 and w <= cap_k:
            on_k[:, w:] = best[:, : cap_k + 1 - w] + gain_k[i]
        stacked = np.stack([best, on_j, on_k])
        choice[row] = stacked.argmax(axis=0)
        best = stacked.max(axis=0)
    to_j, to_k = [], []
    cj, ck = cap_j, cap_k
    for row in range(items.size - 1, -1, -1):
        i, c = items[row], choice[row, cj, ck]
        if c == 1:
            to_j.append(i)
            cj -= int(weight[i])
        elif c == 2:
            to_k.append(i)
            ck -= int(weight[i])
    return np.array(to_j, dtype=np.int64), np.array(to_k, dtype=np.int64)


def _ascend(
    problem: AdmissionProblem, node_of: np.ndarray, max_rounds: int, pairs: bool = True
) -> np.ndarray:
    """Coordinate ascent: re-decide one node at a time by its exact knapsack, others fixed."""
    value, weight = problem.value, problem.footprint
    n_sessions, n_nodes = value.shape
    rows = np.arange(n_sessions)
    node_of = node_of.copy()
    for _ in range(max_rounds):
        changed = False
        for j in range(n_nodes):
            current = np.where(node_of == UNPLACED, 0.0, value[rows, np.maximum(node_of, 0)])
            gain = np.where(node_of == j, value[:, j], value[:, j] - current)
            keep = _knapsack(gain, weight, int(problem.capacity[j]))
            trial = node_of.copy()
            trial[trial == j] = UNPLACED
            trial[keep] = j
            if problem.total(trial) > problem.total(node_of) + 1e-12:
                node_of, changed = trial, True  # ties keep the incumbent, so the rounds end
        for j in range(n_nodes if pairs else 0):
            for k in range(j + 1, n_nodes):
                mine = (node_of == j) | (node_of == k)
                current = np.where(node_of == UNPLACED, 0.0, value[rows, np.maximum(node_of, 0)])
                gain_j = np.where(mine, value[:, j], value[:, j] - current)
                gain_k = np.where(mine, value[:, k], value[:, k] - current)
                to_j, to_k = _pair_knapsack(
                    gain_j, gain_k, weight, int(problem.capacity[j]), int(problem.capacity[k])
                )
                trial = node_of.copy()
                trial[mine] = UNPLACED
                trial[to_j], trial[to_k] = j, k
                if problem.total(trial) > problem.total(node_of) + 1e-12:
                    node_of, changed = trial, True
        if not changed:
            break
    return node_of


def solve_dp(problem: AdmissionProblem, iterations: int = 30, max_rounds: int = 20) -> Assignment:
    """Lagrangian knapsack DP with coordinate-ascent repair (module docstring)."""
    start = time.perf_counter()
    value, weight = problem.value, problem.footprint
    n_sessions, n_nodes = value.shape
    best = _ascend(problem, np.full(n_sessions, UNPLACED, dtype=np.int64), max_rounds, False)
    lower = problem.total(best)
    price = np.zeros(n_sessions)  # multiplier of "at most one node per session"
    step, best_upper, stale = 2.0, np.inf, 0
    for _ in range(iterations):
        taken = np.zeros((n_sessions, n_nodes), dtype=bool)
        upper = float(price.sum())
        for j in range(n_nodes):
            keep = _knapsack(value[:, j] - price, weight, int(problem.capacity[j]))
            taken[keep, j] = True
            upper += float((value[keep, j] - price[keep]).sum())
        if upper <= lower + 1e-9:
            break  # the incumbent is proven optimal
        if upper < best_upper - 1e-9:
            best_upper, stale = upper, 0
        else:
            stale += 1
            if stale >= 3:  # Held-Karp step rule: halve after a few rounds without progress
                step, stale = step / 2, 0
        # Repair: each session keeps its best node among those whose knapsack took it.
        start_point = np.where(
            taken.any(axis=1), np.where(taken, value, -np.inf).argmax(axis=1), UNPLACED
        )
        candidate = _ascend(problem, start_point, max_rounds, pairs=False)
        if problem.total(candidate) > lower:
            best, lower = candidate, problem.total(candidate)
        gradient = 1.0 - taken.sum(axis=1)
        norm = float((gradient**2).sum())
        if norm == 0:
            break
        price = np.maximum(0.0, price - step * (upper - lower) / norm * gradient)
    best = _ascend(problem, best, max_rounds)  # the pair moves, once, on the incumbent
    return Assignment(best, problem.total(best), time.perf_counter() - start, False)


def solve_milp(problem: AdmissionProblem, time_limit_s: float = 60.0) -> Assignment:
    """The exact optimum by HiGHS: x[i, j] binary, one node per session, capacities."""
    from scipy.optimize import Bounds, LinearConstraint, milp  # lazy: keeps imports light
    from scipy.sparse import csr_matrix

    start = time.perf_counter()
    s, n = problem.value.shape
    # x flattened row-major: x[i, j] -> i * n + j
    one_node = csr_matrix((np.ones(s * n), (np.repeat(np.arange(s), n), np.arange(s * n))))
    cols = np.arange(s * n)
    cap = csr_matrix((np.repeat(problem.footprint.astype(float), n), (cols % n, cols)), (n, s * n))
    result = milp(
        c=-problem.value.ravel(),
        integrality=np.ones(s * n),
        bounds=Bounds(0, 1),
        constraints=[
            LinearConstraint(one_node, -np.inf, 1),
            LinearConstraint(cap, -np.inf, problem.capacity.astype(float)),
        ],
        options={"time_limit": time_limit_s},
    )
    node_of = np.full(s, UNPLACED, dtype=np.int64)
    if result.x is not None:
        x = np.round(result.x).reshape(s, n).astype(bool)
        placed = x.any(axis=1)
        node_of[placed] = x[placed].argmax(axis=1)
    return Assignment(
        node_of, problem.total(node_of), time.perf_counter() - start, result.status == 0
    )


def random_problem(
    sessions: int, nodes: int, seed: int, capacity_blocks: int = 64
) -> AdmissionProblem:
    """A seeded instance shaped like TAO's: node-specific cache credit on a common base
    value, footprints of 1/16 to 1/2 of a node, some sessions not worth admitting."""
    rng = np.random.default_rng(seed)
    base = rng.normal(1.0, 0.6, size=(sessions, 1))
    credit = rng.exponential(0.5, size=(sessions, nodes)) * (rng.random((sessions, nodes)) < 0.3)
    footprint = rng.integers(capacity_blocks // 16, capacity_blocks // 2 + 1, size=sessions)
    value = base + credit - 0.4 * footprint[:, None] / capacity_blocks
    capacity = rng.integers(capacity_blocks // 4, capacity_blocks + 1, size=nodes)
    return AdmissionProblem(value, footprint.astype(np.int64), capacity.astype(np.int64))
