"""One-step rollout over a base heuristic: try the base's best few servers in forks of the
running simulation and keep the one whose simulated future is cheapest.

At a contested decision (an LLM call of a model of at least ``min_model_gb`` of weights,
with at least two servers the base would consider) the base's ``candidates`` best servers
by its own estimate (``scores`` where the base has one, as ``tail`` does; else eft's finish
plus imposed delay) are each tried in a fork of the simulation (``Simulation.fork``): the
candidate is applied, and the fork is driven on by a copy of the base policy until its
clock passes the decision time plus ``horizon_s``, or the run ends. A candidate's cost is
the workflow-seconds accrued in its fork (the growth of ``in_system_area``, the integral
of workflows in the system: by Little's law the sum of response time over the window),
padded to a common end time, plus ``terminal_weight`` times the estimated work still
outstanding on the servers at the end (``est_work``: what a placement on a slow or
crowded server leaves for after the horizon). The cheapest wins when it beats the base's
own choice by more than ``min_gain_s``; otherwise, and on ties, the base's choice stands.

Two registered policies:

* ``rollout_oracle`` (``RolloutScheduler``): the forks see the *true* future, the realised
  arrivals and output lengths of the run being simulated: a clairvoyant oracle for
  measuring headroom over its base (docs/headroom.md), not a deployable router. It draws
  no random numbers of its own.
* ``rollout`` (``SampledRolloutScheduler``): the same lookahead, each fork on a *sampled*
  future (``Simulation.fork(sampler=...)``, ``scalesched.sim.futures``): what the
  scheduler could not know at the decision (lengths of calls not started, tool latencies,
  arrivals) is redrawn from the shipped predictor, the hints and the arrival rate seen so
  far (``scalesched.predict.futures``), averaged over ``forks`` draws per candidate with
  the same draws for every candidate. Seeded by ``reset``.

Both are slow (each contested decision simulates ``candidates`` x ``forks`` x ``horizon_s``)
and need the simulator: outside it (a view without ``fork``: the Ray runtime, the gateway)
they answer as their base does, and say so once. The same seed gives the same answers; a
``max_decision_s`` cap is the one exception (when it is hit the answer depends on the
machine's speed), which is why it is off by default. The budget is set where the policy is
named (``--policy rollout:candidates=4,horizon_s=10,forks=2``;
:mod:`scalesched.policies.options`) or in Python, ``SampledRolloutScheduler(candidates=4,
horizon_s=10, forks=2)``, passed where a policy name would be (``runs.setup.run``).
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

import numpy as np

from scalesched.cluster.perf import MODELS
from scalesched.cluster.tables import MODEL_NAMES
from scalesched.decision.actions import Action, Place
from scalesched.decision.cycle import drive
from scalesched.decision.features import ENGINE_ABSENT, Decision
from scalesched.decision.scheduler import BaseScheduler, ReadyOrder, Scheduler
from scalesched.policies.ordering import (
    PLACEMENTS,
    FcfsWorkflowScheduler,
    PlasScheduler,
    ShortestRemainingScheduler,
    placement_scores,
)
from scalesched.policies.tail import PredictedMeanScheduler
from scalesched.predict.futures import PredictedFutures
from scalesched.sim.compiled_run import Trial, compiled_trials, trials_unsupported
from scalesched.sim.engine import Simulation
from scalesched.sim.futures import FutureSampler, NoFutureYet

BASES: dict[str, Callable[[], Scheduler]] = {
    **PLACEMENTS,
    "pred_mean": PredictedMeanScheduler,
    "plas": PlasScheduler,
    "shortest_remaining": ShortestRemainingScheduler,
    "fcfs_workflow": FcfsWorkflowScheduler,
}
"""Base heuristics ``rollout`` can be built over by name: every candidate for the best
heuristic, ``pred_mean`` and the ordering baselines (their admission priority is kept on
whichever server the rollout picks). A fork drives a deep copy of the base taken after its answer,
random generator included, so the fork of the base's own choice continues exactly as the
run would under the base from that point (seeded ones too: ``soft_eft``, ``p2c``)."""

_MODEL_GB = np.array([MODELS[m].weight_bytes / 1e9 for m in MODEL_NAMES])


@dataclass(eq=False)
class RolloutScheduler(BaseScheduler):
    """Fork per candidate server, continue each with the base for ``horizon_s`` simulated
    seconds of the true future, keep the cheapest (ties and small gains: the base's)."""

    base: str = "tail"
    """The heuristic rolled out over, by name (``BASES``); ignored when ``base_policy``
    is given."""
    candidates: int = 3
    """Servers tried per contested decision: the base's choice and its runners-up."""
    horizon_s: float = 20.0
    """Simulated seconds each fork is driven on past the decision."""
    max_decision_s: float | None = None
    """Wall seconds a decision may spend on forks; past it the base's choice is answered.
    None: no cap (answers then never depend on the machine's speed)."""
    min_model_gb: float = 30.0
    """Only LLM calls of models with at least this many GB of weights are rolled out
    (hetero-16: codellama-34b and llama-2-70b, where placement is most expensive)."""
    terminal_weight: float = 0.0
    """Weight of the estimated work left on the servers at the horizon (seconds) in a
    candidate's cost; 0: workflow-seconds within the horizon only."""
    min_gain_s: float = 0.0
    """Workflow-seconds a candidate must save over the base's choice to replace it."""
    loads: bool = True
    """Try servers where the call's model is not loaded (a placement there starts a load,
    evicting what it must). False: only the base's own choice may start one. A diagnostic:
    a swap's cost (the evicted model's next calls reload it) can fall after the horizon;
    on the skewed mix of docs/headroom-map.md that was not what made the 20 s oracle lose."""
    base_policy: Scheduler | None = None
    """A base scheduler instance (overrides ``base``): for tests and studies."""
    stats: dict[str, float] = field(default_factory=dict, init=False)
    """Counters of the current run: ``rolled`` (decisions rolled out), ``changed`` (answers
    other than the base's), ``capped`` (cut by ``max_decision_s``), ``fork_s`` (wall)."""

    name = "rollout_oracle"

    def __post_init__(self) -> None:
        if self.base_policy is None:
            maker = BASES.get(self.base)
            if maker is None:
                raise ValueError(f"base must be one of {', '.join(BASES)}, got {self.base!r}")
            self.base_policy = maker()
        if self.candidates < 2 or not self.horizon_s > 0:
            raise ValueError("need candidates >= 2 and horizon_s > 0")
        if self.max_decision_s is not None and not self.max_decision_s > 0:
            raise ValueError("max_decision_s must be > 0 or None")
        if self.terminal_weight < 0 or self.min_gain_s < 0:
            raise ValueError("terminal_weight and min_gain_s must be >= 0")
        self.ready_order: ReadyOrder = self.inner.ready_order  # the forks' order too
        self._said_no_fork = False
        self._reset_stats()

    @property
    def inner(self) -> Scheduler:
        assert self.base_policy is not None  # set in __post_init__
        return self.base_policy

    def _reset_stats(self) -> None:
        self.stats = dict(rolled=0, changed=0, capped=0, no_future=0, fork_s=0.0)

    def reset(self, seed: int) -> None:
        self.inner.reset(seed)
        self._reset_stats()

    def unsupported_reason(self, n_servers: int) -> str | None:
        return self.inner.unsupported_reason(n_servers)

    def base_scores(self, decision: Decision) -> np.ndarray:
        """(N,) the base's own estimate per server (lower is better); inf where masked."""
        return placement_scores(self.inner, decision)

    def contenders(self, decision: Decision, choice: int) -> list[int]:
        """The servers to try: the base's choice, then its best-scored feasible others."""
        if decision.task.kind != "llm" or _MODEL_GB[decision.task.model] < self.min_model_gb:
            return [choice]
        score = self.base_scores(decision)
        score[~decision.mask] = np.inf
        if not self.loads:
            score[decision.view.engine_state[:, decision.task.model] == ENGINE_ABSENT] = np.inf
        order = [int(s) for s in np.argsort(score, kind="stable") if np.isfinite(score[s])]
        return [choice] + [s for s in order if s != choice][: self.candidates - 1]

    def select(self, decision: Decision) -> int | Action:
        answer = self.inner.select(decision)
        priority: float | None = None
        if isinstance(answer, Place) and not answer.loads:
            choice, priority = answer.server, answer.priority  # an ordering base's answer
        elif type(answer) is int or isinstance(answer, np.integer):
            choice = int(answer)
        else:
            return answer  # an action of the base (a hedge, a load): answered as is
        best = self.lookahead(decision, choice, priority)
        if isinstance(answer, Place):
            return answer if best == choice else Place(best, priority=priority)
        return best

    def lookahead(self, decision: Decision, choice: int, priority: float | None) -> int:
        """The server the forks prefer for the decision's task (with ``priority`` on
        whichever it is), ``choice`` (the base's) where nothing is rolled out."""
        fork = self.fork_of(decision)
        if fork is None:
            return choice
        servers = self.contenders(decision, choice)
        if len(servers) < 2:
            return choice
        best = servers[self.best_of(decision, fork, [(s, priority) for s in servers])]
        self.stats["changed"] += int(best != choice)
        return best

    def fork_of(self, decision: Decision) -> Callable[..., Any] | None:
        """The view's ``fork``; None where the executor cannot fork (the base's answer
        stands then, which is said once)."""
        fork = getattr(decision.view, "fork", None)
        if fork is None and not self._said_no_fork:
            self._said_no_fork = True
            warnings.warn(
                f"{self.name}: this executor cannot fork, so it answers as its base "
                f"({getattr(self.inner, 'name', self.base)}) does",
                stacklevel=3,
            )
        return fork

    def futures(self, fork: Callable[..., Any]) -> list[Callable[..., Any]]:
        """The futures each candidate is tried in, one fork maker each: here the true one
        (a plain ``fork``); ``rollout`` gives sampled ones."""
        return [fork]

    def best_of(
        self,
        decision: Decision,
        fork: Callable[..., Any],
        options: Sequence[tuple[int, float | None]],
    ) -> int:
        """The index of the cheapest of ``options`` (a server for the decision's task and
        its admission priority) in forks, averaged over ``futures``: 0, the base's answer,
        on ties, when the gain is below ``min_gain_s``, and when the wall cap cuts the
        trials short."""
        t0 = perf_counter()
        end = decision.view.now + self.horizon_s
        cost = np.zeros(len(options))
        futures = self.futures(fork)
        try:
            for future in futures:
                trial = self.trials(decision, future)
                ends: list[tuple[float, float, int, float]] = []
                for server, priority in options:
                    if (
                        self.max_decision_s is not None
                        and perf_counter() - t0 > self.max_decision_s
                    ):
                        self.stats["capped"] += 1
                        self.stats["fork_s"] += perf_counter() - t0
                        return 0
                    ends.append(trial(server, end, priority))
                common = max(stop for _, stop, _, _ in ends)  # per future: one end for all
                cost += [
                    area + in_system * (common - stop) + self.terminal_weight * work
                    for area, stop, in_system, work in ends
                ]
        except NoFutureYet:  # e.g. a decision at time 0: no arrival rate to sample from
            self.stats["no_future"] += 1
            self.stats["fork_s"] += perf_counter() - t0
            return 0
        self.stats["rolled"] += 1
        self.stats["fork_s"] += perf_counter() - t0
        cost /= len(futures)
        best = int(np.argmin(cost))  # first minimum: the base's answer on ties
        return best if cost[best] < cost[0] - self.min_gain_s else 0

    def trials(self, decision: Decision, future: Callable[..., Any]) -> Trial:
        """Each candidate's trial in ``future`` (a fork maker): in C++ where the compiled
        core covers it (``sim.compiled_run.compiled_trials``, the same numbers as
        ``trial``): the state taken over once, the view's own for the true future, one
        fork's for a sampled one; else a Python fork per candidate (``trial``)."""
        view = decision.view
        if isinstance(view, Simulation) and trials_unsupported(view, self.inner) is None:
            true_future = type(self).futures is RolloutScheduler.futures
            if true_future or view.stream is None:  # a sampled stream cannot be taken over
                taken = view if true_future else future(shared=True)  # read, never run
                compiled = compiled_trials(taken, self.inner)
                if compiled is not None:
                    return compiled
        return lambda server, end, priority: self.trial(future, server, end, priority)

    def trial(
        self, fork: Callable[[], Any], server: int, end: float, priority: float | None = None
    ) -> tuple[float, float, int, float]:
        """Place the decision's task on ``server`` in a fork and drive it with a copy of
        the base until its clock reaches ``end`` (or the run ends): the workflow-seconds
        accrued, the time it stopped at, the workflows then in the system and the
        estimated work then outstanding on the servers."""
        sim = fork()
        area0 = sim.in_system_area
        sim.apply(server if priority is None else Place(server, priority=priority))
        drive(sim, copy.deepcopy(self.inner), until=lambda: sim.now >= end)
        return (
            float(sim.in_system_area - area0),
            float(sim.now),
            int(sim.in_system),
            float(np.sum(sim.est_work)),
        )


@dataclass(eq=False)
class SampledRolloutScheduler(RolloutScheduler):
    """``rollout``: the same lookahead, each candidate tried in forks whose unrevealed
    future is *sampled* (``Simulation.fork(sampler=...)``): output lengths and tool
    latencies of calls not started from the shipped predictor and the hints, arrivals from
    a Poisson process at the rate seen so far (``scalesched.predict.futures``). A candidate's
    cost is its mean over ``forks`` sampled futures; every candidate meets the same
    ``forks`` futures (common random numbers), so the comparison is between placements,
    not between luck of the draw. Seeded by ``reset(seed)``: the same seed, the same
    answers (``max_decision_s`` aside)."""

    forks: int = 1
    """Sampled futures per candidate (the cost is their mean)."""
    sampler: FutureSampler | None = None
    """What the forks' futures are drawn from; None: ``PredictedFutures()``."""

    name = "rollout"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.forks < 1:
            raise ValueError(f"forks must be >= 1, got {self.forks}")
        if self.sampler is None:
            self.sampler = PredictedFutures()
        self._seed = 0
        self._draws = 0

    def reset(self, seed: int) -> None:
        super().reset(seed)
        self._seed = int(seed)
        self._draws = 0

    def futures(self, fork: Callable[..., Any]) -> list[Callable[..., Any]]:
        """``forks`` fork makers, each with a generator of its own seed, the same for every
        candidate of this decision (a new generator per call, in the same state); a
        maker passes its keywords on to ``fork`` (``shared=True``: a copy to take over)."""
        self._draws += 1
        sampler = self.sampler

        def maker(k: int) -> Callable[..., Any]:
            seq = (self._seed, self._draws, k)
            return lambda **kw: fork(sampler=sampler, rng=np.random.default_rng(seq), **kw)

        return [maker(k) for k in range(self.forks)]
