"""Exhaustive search over every plan of a small model: the MILP's exactness check.

Enumerates every valid option per layer and every state mode (6^L x 6 plans, fewer at the
last layers where offloading has no window), sums the window model's arrays for each and
keeps the fastest plan within the memory caps.  Vectorised over the options of the last
layers, looping over the first ones; practical up to L = 8.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from scalesched.memplan.costs import TrainCosts
from scalesched.memplan.plan import OPTIONS, STATES, Coefficients, Plan, coefficients

_BLOCK = 20_000
"""Plans evaluated at once (bounds the arrays to a few tens of MB)."""


@dataclass(frozen=True, slots=True)
class BruteResult:
    plan: Plan | None
    iteration_s: float
    plans_checked: int


def brute_force(
    c: TrainCosts, *, states: tuple[str, ...] = STATES, coef: Coefficients | None = None
) -> BruteResult:
    coef = coef if coef is not None else coefficients(c)
    L = c.layers
    opts = [np.flatnonzero(coef.valid[i]) for i in range(L)]
    # suffix: the last layers, as one vectorised block of all their combinations
    split = L
    size = 1
    while split > 0 and size * len(opts[split - 1]) <= _BLOCK:
        split -= 1
        size *= len(opts[split])
    suffix = list(itertools.product(*opts[split:]))
    suf_idx = np.array(suffix, dtype=int).reshape(len(suffix), L - split)
    suf_time = np.zeros((len(suffix),) + coef.const_time.shape)
    suf_mem = np.zeros((len(suffix),) + coef.const_mem.shape)
    for j, i in enumerate(range(split, L)):
        suf_time += coef.opt_time[i, suf_idx[:, j]]
        suf_mem += coef.opt_mem[i, suf_idx[:, j]]
    caps = coef.caps[None, :, None] * (1 + 1e-9)
    best_t, best_plan, checked = np.inf, None, 0
    for state in states:
        s = STATES.index(state)
        for prefix in itertools.product(*opts[:split]):
            time = coef.const_time + coef.state_time[s]
            mem = coef.const_mem + coef.state_mem[s]
            for i, o in enumerate(prefix):
                time = time + coef.opt_time[i, o]
                mem = mem + coef.opt_mem[i, o]
            fits = np.all(mem[None] + suf_mem <= caps, axis=(1, 2))
            total = (time[None] + suf_time).max(axis=1).sum(axis=1)
            checked += len(suffix)
            total[~fits] = np.inf
            k = int(np.argmin(total))
            if total[k] < best_t:
                best_t = float(total[k])
                picks = list(prefix) + [int(v) for v in suf_idx[k]]
                best_plan = Plan(state, tuple(OPTIONS[o] for o in picks))
    return BruteResult(best_plan, best_t, checked)
