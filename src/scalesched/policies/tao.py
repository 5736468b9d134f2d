"""TAO (tool-aware joint scheduling for LLM agent serving, 2026): admit and place every
waiting LLM call of a decision instant at once, by dynamic programming over the GPU nodes
and their free KV capacity (docs/cache.md, "`tao`: joint admission and placement").

What TAO does, and how it is done here:

* **Value** of waiting call i on node (engine) j, in seconds:
  ``readiness_i + CREDIT_WEIGHT x credit_ij - footprint_i - delay_ij``.

  - *tool readiness*: how long the call has been ready (its tool has returned) and
    waited for admission, plus a slack of ``SLACK`` x its best execution time. A call
    that has waited longer is admitted first, and a call is admitted on a node other
    than its best only while the extra delay is within its readiness.
  - *cache credit*: the prefill seconds the node's cache saves the call, time-decayed:
    ``(prefill(prompt) - prefill(prompt - hit)) x exp(-age / CREDIT_TAU_S)``, where
    ``hit`` is the longest prefix of the call (its session context, else its application
    prompt) the policy sent to that node, in whole KV blocks, ``age`` the time since that
    prefix was last used there (estimated: placement plus estimated finish), and the
    prefill is timed on the model's fastest engine class for every node (a slow node's
    slower prefill must not make its cache worth more). Its weight (``CREDIT_WEIGHT`` = 3)
    counts what a hit saves beyond the call's own prefill: KV memory the engine need not
    reserve and prefill compute its batch need not wait for. A first configuration with
    weight 10 (timed on the node's own class), measured on seeds 0-9, ran tool-heavy on
    three 70b engines in 7 runs of 10 where eft loaded a fourth in 7 (a worse TTFT p95);
    weight 3 did so in 4 of 10 on seeds 10-19, as eft did (docs/history/cache.md).
  - *token footprint*: the share of an engine's KV the call reserves, times its slack: a
    property of the session that orders admission under contention (large sessions
    later) and never changes the choice of node.
  - *delay*: eft's regret: the node's estimated finish plus the delay it imposes on the
    batch, minus the best such figure over the feasible nodes (0 at eft's choice).

* **Joint admission and placement**: every LLM call of the instant (``select_batch``) with
  positive value on some node with room for it is a candidate; ``cache.admission.
  solve_dp`` picks the subset to admit and the node of each, within every node's free
  KV. When each candidate's best node with room has room for all of them, that greedy
  answer is the optimum and the DP is skipped.
* A call not admitted is **deferred** (``Defer()``) when ``decision.can_defer``, no
  feasible node has room for it after this instant's admissions (a completion will free
  some and re-offer it) and it has waited less than ``MAX_WAIT_FACTOR`` x its best
  execution time; otherwise it goes to its best node by value (eft plus the cache
  credit). Tools and other non-LLM tasks are placed by eft (estimated finish plus
  imposed delay). Deferring a call as soon as its *best* node is full (late binding)
  was tried on the validation seeds: it deferred 3,700-12,000 times per run without a
  gain on the mean, so it was dropped.
* Calls decided together see each other: each decision after the first of an instant is
  re-estimated on a copy of the state with the instant's earlier placements booked (as
  the ledger books a placement), as eft's one-at-a-time decisions would see them.

What is approximated, and why:

* The policy does not see the engines' caches (neither does a production router): like
  ``cache_aware`` it remembers what it sent where, bounded per engine by the engine's KV
  capacity (least recently routed forgotten first); the decay stands in for the
  evictions it cannot see.
* Free KV per engine: its KV capacity minus its placed, unfinished requests (``engine_
  batch``, exact) times the mean private reservation (prompt + output estimate less the
  expected cached prefix) of the last ``RESERVED_WINDOW`` or so calls this policy sent
  there, and none when the batch is at its cap. The engine's true reservations are not
  observable; counting full reservations instead (as the decisions' own queue estimate
  does) made tao defer calls that the engine would have admitted at once (mean response
  +14% on tool-heavy at load 0.8, validation seed 1000, deferring at the best node).
* The DP works in whole units of at least ``BLOCK_TOKENS`` tokens (footprints rounded up,
  capacities down, at most ``DP_UNITS`` units per node), takes each call's footprint on
  its best node (``AdmissionProblem`` has one footprint per session), and at most
  ``MAX_DP_CALLS`` calls per model and instant (the longest waiting first; the rest are
  deferred or placed as above), with ``DP_ITERATIONS`` / ``DP_ROUNDS``, so that an
  instant stays within milliseconds. The instant's re-estimated decisions assume each
  earlier call went to its best node; the DP may send it elsewhere.
* Readiness counts the time since the policy first saw the call (a ready call is offered
  at once, so that is when its tool returned); it is kept only while the call is deferred.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from scalesched.cache.admission import UNPLACED, AdmissionProblem, solve_dp
from scalesched.cache.kv import BLOCK_TOKENS
from scalesched.decision.actions import Action, Defer
from scalesched.decision.features import ClusterStateView, Decision, make_decision
from scalesched.decision.scheduler import BaseScheduler
from scalesched.policies.cache_aware import RouterTree
from scalesched.policies.eft import eft_choice

CREDIT_TAU_S = 30.0
"""E-folding time of the cache credit (seconds since the prefix was last used there):
about the longest a session's context survives a tool pause under memory pressure (the
TTL policy's cap is 30 s)."""
SLACK = 0.1
"""Readiness slack, as a fraction of the call's best execution time."""
FOOTPRINT_WEIGHT = 1.0
"""Seconds of slack a call that would fill a node's free KV gives up (times its slack)."""
MAX_WAIT_FACTOR = 1.0
"""A call deferred this many times its best execution time is placed, not deferred again."""
CREDIT_WEIGHT = 3.0
"""Multiplier of the cache credit in the value (module docstring)."""
RESERVED_WINDOW = 64
"""Calls the running mean of an engine's private reservation spans (about)."""
MAX_DP_CALLS = 24
DP_UNITS = 64
DP_ITERATIONS = 10
DP_ROUNDS = 10


@dataclass(frozen=True, slots=True)
class _Row:
    """One waiting call as the admission sees it."""

    key: object
    value: np.ndarray
    private: np.ndarray
    """(N,) KV tokens the call would reserve on each node: its footprint less the prefix
    expected cached there."""
    best_exec: float
    """Its execution seconds on its fastest feasible node."""
    waited: float


class _Shadow:
    """The decision state with this instant's earlier placements booked (as the ledger's
    ``book`` does), so that calls placed together see each other, as under eft."""

    def __init__(self, view: ClusterStateView) -> None:
        self.now = view.now
        self.est_work = view.est_work.copy()
        self.n_assigned = view.n_assigned.copy()
        self.busy_cores = view.busy_cores
        self.cpu_backlog = view.cpu_backlog.copy()
        self.tools_in_flight = view.tools_in_flight.copy()
        self.free_gpus = view.free_gpus
        self.idle_gpus = view.idle_gpus
        self.engine_state = view.engine_state
        self.engine_ready_at = view.engine_ready_at
        self.engine_batch = view.engine_batch.copy()
        self.engine_ctx = view.engine_ctx.copy()

    def book(self, d: Decision, s: int) -> None:
        task = d.task
        self.est_work[s] += float(d.exec_s[s])
        self.n_assigned[s] += 1
        if task.kind == "llm":
            self.engine_batch[s, task.model] += 1
            self.engine_ctx[s, task.model] += task.context_tokens
        else:
            self.cpu_backlog[s] += task.cpu_work / float(d.tables.core_speed[s])
            self.tools_in_flight[s] += 1


class TaoScheduler(BaseScheduler):
    name = "tao"
    answers = frozenset({"place", "defer"})  # sim.compiled_loop: Defer() where no node has room

    def __init__(self) -> None:
        self._memory: dict[tuple[int, int], RouterTree] = {}
        self._first_seen: dict[object, float] = {}
        self._reserved: dict[tuple[int, int], tuple[float, int]] = {}
        """(server, model) -> running mean of the private KV tokens of the calls routed
        there (over the last ``RESERVED_WINDOW`` or so), and how many it averages."""
        self.dp_solves = 0
        """Instants whose admission needed the DP (the greedy answer did not fit)."""
        self.joint_admissions = 0
        """Instants that admitted two or more LLM calls of one model together."""
        self.deferrals = 0

    def reset(self, seed: int) -> None:
        super().reset(seed)
        self._memory = {}
        self._first_seen = {}
        self._reserved = {}
        self.dp_solves = self.joint_admissions = self.deferrals = 0

    def select(self, decision: Decision) -> int | Action:
        return self.select_batch([decision])[0]

    def select_batch(self, decisions: list[Decision]) -> list[int | Action]:
        answers: list[int | Action] = [0] * len(decisions)
        shadow = _Shadow(decisions[0].view) if len(decisions) > 1 else None
        rows: dict[int, list[tuple[int, Decision, _Row]]] = {}
        for i, d in enumerate(decisions):
            if shadow is not None and i > 0:  # see the calls placed before it this instant
                again = make_decision(d.tables, shadow, d.task)
                again.can_defer = d.can_defer
                d = again
            if d.task.kind == "llm":
                row = self._row(d)
                rows.setdefault(d.task.model, []).append((i, d, row))
                j = int(np.argmax(row.value))
            else:
                j = answers[i] = eft_choice(d)
            if shadow is not None:
                shadow.book(d, j)
        for group in rows.values():
            for (i, _, _), answer in zip(group, self._admit(group), strict=True):
                answers[i] = answer
        return answers

    def _row(self, d: Decision) -> _Row:
        """The call's value on every node (-inf where it cannot run), footprint, slack."""
        task, mask = d.task, d.mask
        key = _key(d)
        waited = d.now - self._first_seen.setdefault(key, d.now)
        score = d.finish_s + d.imposed_s
        best_exec = float(d.exec_s[mask].min())
        slack = SLACK * best_exec
        footprint = max(task.prompt_tokens + task.output_tokens_est, 1)
        k = d.tables.class_or_zero[:, task.model]
        kv_cap = float(d.tables.kv_capacity[k][mask].max())
        # Footprint: the share of a whole engine's KV the call takes, times its slack (a
        # session property: it orders admission, never the choice of node).
        penalty = FOOTPRINT_WEIGHT * slack * min(footprint / kv_cap, 1.0)
        delay = score - float(score[mask].min())
        saved, hit = self._credit(d)
        value = np.where(mask, slack + waited + CREDIT_WEIGHT * saved - delay - penalty, -np.inf)
        return _Row(key, value, footprint - hit, best_exec, waited)

    # -- the LLM calls of one model ------------------------------------------------------
    def _admit(self, group: list[tuple[int, Decision, _Row]]) -> list[int | Action]:
        d0 = group[0][1]
        tables, view, m = d0.tables, d0.view, d0.task.model
        k = tables.class_or_zero[:, m]
        value = np.stack([row.value for _, _, row in group])
        private = np.stack([row.private for _, _, row in group])
        waited = np.array([row.waited for _, _, row in group])
        # Free KV: each engine's placed requests are taken to reserve what the calls this
        # policy routed there reserved on average (their private tokens; the mean need of
        # the waiting calls where it has routed none).
        mean_private = np.array([self._reserved.get((s, m), (0.0, 0))[0] for s in range(tables.n)])
        mean_private = np.where(mean_private > 0, mean_private, float(private.max(axis=1).mean()))
        batch = view.engine_batch[:, m]
        free = np.minimum(
            tables.kv_capacity[k] - batch * mean_private,
            (tables.max_batch[k] - batch) * mean_private,
        )
        free = np.maximum(free, 0.0)
        room = (private <= free[None, :]) & (value > 0)
        best = np.argmax(value, axis=1)
        footprint = np.maximum(np.ceil(private[np.arange(len(group)), best]), 1).astype(np.int64)
        node_of = self._solve(value, footprint, free, room, waited)
        placed = node_of != UNPLACED
        left = free.copy()  # what this instant's admissions leave free
        np.subtract.at(left, node_of[placed], footprint[placed])
        answers: list[int | Action] = []
        admitted = 0
        for (_, d, row), j in zip(group, node_of.tolist(), strict=True):
            if j == UNPLACED:
                fits = row.private <= left  # by this policy's estimate of free KV
                full = not bool(fits[d.mask].any())  # no room anywhere
                if d.can_defer and full and row.waited < MAX_WAIT_FACTOR * row.best_exec:
                    self.deferrals += 1
                    answers.append(Defer())
                    continue
                j = int(np.argmax(row.value))
            else:
                admitted += 1
            self._first_seen.pop(row.key, None)
            self._route(d, j, k)
            mean, count = self._reserved.get((j, m), (0.0, 0))
            count = min(count + 1, RESERVED_WINDOW)
            self._reserved[(j, m)] = (mean + (float(row.private[j]) - mean) / count, count)
            answers.append(j)
        if admitted >= 2:
            self.joint_admissions += 1
        return answers

    def _solve(
        self,
        value: np.ndarray,
        footprint: np.ndarray,
        free: np.ndarray,
        room: np.ndarray,
        waited: np.ndarray,
    ) -> np.ndarray:
        """Node of each call (UNPLACED: not admitted): greedy when everyone's best node with
        room has room for all, else the DP on the candidates."""
        n = value.shape[0]
        node_of = np.full(n, UNPLACED, dtype=np.int64)
        cand = np.flatnonzero(room.any(axis=1))
        if cand.size == 0:
            return node_of
        masked = np.where(room, value, -np.inf)
        best = masked.argmax(axis=1)
        used = np.zeros(value.shape[1])
        np.add.at(used, best[cand], footprint[cand])
        if (used <= free).all():
            node_of[cand] = best[cand]
            return node_of
        if cand.size > MAX_DP_CALLS:  # the longest waiting first (stable on ties)
            cand = cand[np.argsort(-waited[cand], kind="stable")[:MAX_DP_CALLS]]
        nodes = np.flatnonzero(room[cand].any(axis=0))
        fp = footprint[cand]
        unit = max(BLOCK_TOKENS, math.ceil(float(fp.sum()) / DP_UNITS))
        fp_units = -(-fp // unit)
        cap_units = np.minimum(free[nodes] // unit, fp_units.sum()).astype(np.int64)
        sub = np.where(room[np.ix_(cand, nodes)], value[np.ix_(cand, nodes)], 0.0)
        problem = AdmissionProblem(sub, fp_units.astype(np.int64), cap_units)
        result = solve_dp(problem, iterations=DP_ITERATIONS, max_rounds=DP_ROUNDS)
        self.dp_solves += 1
        placed = result.node_of != UNPLACED
        node_of[cand[placed]] = nodes[result.node_of[placed]]
        return node_of

    def _credit(self, d: Decision) -> tuple[np.ndarray, np.ndarray]:
        """(N,) decayed prefill seconds each node's remembered cache saves the call, and
        (N,) the prefix tokens it is expected to find there (decayed the same way)."""
        task = d.task
        out = np.zeros(d.n_servers)
        tokens = np.zeros(d.n_servers)
        if task.prefix_id is None:
            return out, tokens
        keys: tuple[object, ...] = (
            (task.context_key, task.prefix_id) if task.context_key else (task.prefix_id,)
        )
        # One yardstick for every node, the model's fastest engine class: a slow node's
        # slower prefill must not make its cache worth more.
        fastest = min(
            (entry[1] for entry in d.tables.model_classes[task.model]),
            key=lambda e: e.prefill_s(task.prompt_tokens),
        )
        for s in np.flatnonzero(d.mask).tolist():
            memory = self._memory.get((s, task.model))
            if memory is None:
                continue
            hit, used_at = memory.match_with_use(keys)
            hit = min(hit, task.prompt_tokens - 1) // BLOCK_TOKENS * BLOCK_TOKENS
            if hit <= 0:
                continue
            saved = fastest.prefill_s(task.prompt_tokens) - fastest.prefill_s(
                task.prompt_tokens - hit
            )
            survive = math.exp(-max(d.now - used_at, 0.0) / CREDIT_TAU_S)
            out[s] = saved * survive
            tokens[s] = hit * survive
        return out, tokens

    def _route(self, d: Decision, s: int, k: np.ndarray) -> None:
        """Remember what the call leaves cached on server ``s``, used at its estimated end."""
        task = d.task
        if task.prefix_id is None:
            return
        memory = self._memory.get((s, task.model))
        if memory is None:
            memory = self._memory[(s, task.model)] = RouterTree(
                int(d.tables.kv_capacity[int(k[s])])
            )
        used_at = d.now + float(d.finish_s[s])
        memory.add(task.prefix_id, task.prefix_tokens, 0, used_at)
        base = memory.match((task.context_key, task.prefix_id))
        memory.add(task.call_key, task.prompt_tokens + task.output_tokens_est, base, used_at)


def _key(d: Decision) -> object:
    """Identity of a waiting call across re-offers (its call key, else its workflow's
    arrival time with its sizes)."""
    task = d.task
    if task.call_key is not None:
        return task.call_key
    return (
        round(d.now - task.workflow_age, 9),
        task.model,
        task.prompt_tokens,
        task.output_tokens_est,
    )
