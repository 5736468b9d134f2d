"""Tail-aware routing: the server with the smallest predicted high quantile of finish.

eft ranks servers by the cost model's finish estimate (transfer, queue, model load and
execution at the server's batch) plus the delay the task imposes on that batch, all
computed for the role's static output estimate. ``tail`` asks the shipped predictor
(:mod:`scalesched.predict`, evaluated in numpy) for the task's output-token distribution,
from its observable signals (role, pattern, prompt, difficulty hint), and ranks servers by
the cost model's finish at the p90 of that distribution: finish grows with the output
length on every server, so this is the p90 of finish under the cost model, and it weighs
speed against queueing as a long request would. ``pred_mean`` does the same at the
predicted mean: the baseline that separates acting on the tail from acting on a better
point estimate.

``via="finish"`` ranks by the predictor's ``finish`` head instead (a learned p90 of the
seconds to the end on each server). It is worse than eft (docs/history/tail.md: +20% mean response
at load 0.8): picking the minimum of 16 learned predictions exploits their errors, and the
cost model's structure (one queue per engine, batch slowdown) is right by construction.

``scale_out=True`` (registered as ``tail_scaleout``) adds the scale-out signal: when the
chosen server's predicted p99 finish of an LLM call (the cost model's finish at the p99 of
the predicted output length) exceeds ``slo`` times the call's contention-free time at that
length (alone on its fastest server: the task-level form of eval's ``--slo``, a multiple of
the lower bound), the answer carries a ``LoadReplica`` of the call's model on the free GPUs
where a call like this one would finish first, loading included; at most one load of a
model is pending at a time, and the replica is unloaded after ``idle_s`` idle seconds
(docs/tail.md, "Scale-out").
"""

from __future__ import annotations

import copy
from typing import Any, Literal

import numpy as np

from scalesched.cluster.tables import MODEL_NAMES
from scalesched.decision.actions import REPLICA_IDLE_S, LoadReplica, Place
from scalesched.decision.features import ENGINE_LOADING, Decision
from scalesched.decision.scheduler import BaseScheduler
from scalesched.predict.features import duration_inputs, finish_baseline
from scalesched.predict.lengths import OutputLengths, token_quantiles, workflow_tokens
from scalesched.predict.metrics import predicted_mean
from scalesched.predict.model import QUANTILES, QuantilePredictor, default_predictor
from scalesched.sim.compiled_run import TokenHeadSpec
from scalesched.workload.instance import WorkflowInstance

TAIL_LEVEL = 0.9
SCALE_OUT_LEVEL = 0.99
SCALE_OUT_SLO = 3.0
"""Default of ``slo``: a replica is asked for when the chosen server's predicted p99 finish
exceeds this multiple of the call's contention-free time (docs/tail.md, "Scale-out")."""


class TailScheduler(BaseScheduler):
    """Minimise the predicted ``level`` quantile of finish plus the imposed delay;
    ``level=None`` uses the predicted mean (``pred_mean``)."""

    name = "tail"

    def __init__(
        self,
        level: float | None = TAIL_LEVEL,
        predictor: QuantilePredictor | None = None,
        *,
        via: Literal["tokens", "finish"] = "tokens",
        scale_out: bool = False,
        slo: float = SCALE_OUT_SLO,
        idle_s: float = REPLICA_IDLE_S,
    ) -> None:
        if level is not None and level not in QUANTILES:
            raise ValueError(f"level must be one of {QUANTILES}, got {level}")
        if not slo >= 1 or not idle_s > 0:
            raise ValueError(f"need slo >= 1 and idle_s > 0, got {slo} and {idle_s}")
        self.level = level
        self.via = via
        self.scale_out, self.slo, self.idle_s = scale_out, slo, idle_s
        self.predictor = predictor or default_predictor()
        self.lengths = OutputLengths(level, self.predictor)
        """The predicted output length per task signal, remembered: copies share it."""
        self.exec_scale: np.ndarray | None = None
        """(N,) factor on each server's predicted execution, queueing and imposed delay for
        LLM calls, or None (the cost model as is). Online adaptation sets it from the
        recalibrated duration quantiles (``predict drift``'s ``routing_adapted`` arm)."""

    def reset(self, seed: int) -> None:
        self.exec_scale = None  # a new run starts from the cost model as is

    @property
    def compiled_policy(self) -> str | None:
        """``tail`` as the compiled core runs whole runs of it (``sim.compiled_run``): the
        cost model's finish at the remembered output length, nothing added (None: a
        configuration it does not mirror)."""
        plain = self.via == "tokens" and not self.scale_out and self.exec_scale is None
        return "tail" if plain else None

    @property
    def places_only(self) -> bool:
        """Whether every answer is a server (``sim.compiled_loop``): not with the scale-out
        signal, whose answers may carry a replica load."""
        return not self.scale_out

    @property
    def answers(self) -> frozenset[str]:
        """What it answers (``sim.compiled_loop``): placements, with replica loads under
        the scale-out signal."""
        return frozenset({"place", "load"}) if self.scale_out else frozenset({"place"})

    def __deepcopy__(self, memo: dict[int, Any]) -> TailScheduler:
        """A copy that shares the (immutable) predictor and the token memo and copies the
        rest: ``rollout`` copies its base at every fork, and copying the predictor's
        weights each time cost about 8% of a rollout's time."""
        memo[id(self.predictor)] = self.predictor
        memo[id(self.lengths)] = self.lengths
        clone = self.__class__.__new__(self.__class__)
        memo[id(self)] = clone
        for key, value in self.__dict__.items():
            setattr(clone, key, copy.deepcopy(value, memo))
        return clone

    def _pick(self, q: np.ndarray) -> np.ndarray:
        """(k,) the chosen statistic of (k, Q) quantiles: the level's, or the mean."""
        return predicted_mean(q) if self.level is None else q[:, QUANTILES.index(self.level)]

    def output_tokens(self, decision: Decision) -> int:
        """The output length the cost model is asked about for an LLM task (remembered per
        task signal: the same call is asked about again in every fork of a rollout)."""
        return self.lengths.tokens(decision.task)

    def workflow_lengths(self, wf: WorkflowInstance) -> list[int]:
        """``output_tokens`` of each LLM call of ``wf`` (0 for a tool), asked once per
        workflow by the compiled core's whole runs (``sim.compiled_run``)."""
        return workflow_tokens(self.lengths, wf)

    def token_head(self) -> TokenHeadSpec | None:
        """``workflow_lengths``' function in the form the compiled core computes it itself
        (``OutputLengths.head_spec``; None: asked of ``workflow_lengths``)."""
        return self.lengths.head_spec()

    def _token_quantiles(self, decision: Decision) -> np.ndarray:
        """(1, Q) predicted output-token quantiles of the decision's (LLM) task."""
        return token_quantiles(self.predictor, decision.task)

    def scores(self, decision: Decision) -> np.ndarray:
        """(N,) predicted finish + imposed delay; inf where the task cannot run."""
        mask = decision.mask
        if self.via == "finish":
            servers = np.flatnonzero(mask)
            logq = self.predictor.finish(duration_inputs(decision, servers))
            q = np.exp(logq + finish_baseline(decision, servers)[:, None])
            score = np.full(decision.n_servers, np.inf)
            score[servers] = self._pick(q) + decision.imposed_s[servers]
            return score
        if decision.task.kind == "llm":
            decision = decision.at_output_tokens(self.output_tokens(decision))
            if self.exec_scale is not None:
                return np.where(mask, scaled_score(decision, self.exec_scale), np.inf)
        return np.where(mask, decision.finish_s + decision.imposed_s, np.inf)

    def select(self, decision: Decision) -> int | Place:
        best = int(np.argmin(self.scores(decision)))
        if self.scale_out and decision.task.kind == "llm":
            load = self.replica_request(decision, best)
            if load is not None:
                return Place(best, loads=(load,))
        return best

    def replica_request(self, decision: Decision, best: int) -> LoadReplica | None:
        """The scale-out signal for an LLM call placed on ``best``: a replica of its model
        on the best free GPUs when its predicted p99 finish there misses the SLO; None
        when it meets it, a load of the model is pending, or no free GPUs hold one."""
        m = decision.task.model
        if (decision.view.engine_state[:, m] == ENGINE_LOADING).any():
            return None  # one pending load per model (ours or a placement's)
        free = decision.mask & decision.model_fits_free
        free[best] = False
        if not free.any():
            return None  # checked first: it is the common case and costs nothing
        p99, bound = self.p99_finish(decision)
        if not p99.finish_s[best] > self.slo * bound:
            return None
        where = int(np.argmin(np.where(free, p99.finish_s, np.inf)))
        return LoadReplica(MODEL_NAMES[m], where, self.idle_s)

    def p99_finish(self, decision: Decision) -> tuple[Decision, float]:
        """The LLM call's decision at the p99 of its predicted output length (its
        ``finish_s``: the p99 of finish under the cost model on every server), and the
        call's contention-free time at that length (alone on its fastest server)."""
        q = self._token_quantiles(decision)
        tokens = max(1, int(round(float(q[0, QUANTILES.index(SCALE_OUT_LEVEL)]))))
        task = decision.task
        bound = decision.tables.fastest_llm_time(task.model, task.prompt_tokens, tokens)
        return decision.at_output_tokens(tokens), bound


def scaled_score(decision: Decision, scale: np.ndarray) -> np.ndarray:
    """(N,) finish + imposed delay of an LLM call with each server's execution, queueing
    behind its engine and imposed delay ``scale`` times the cost model's (model loading and
    transfers unchanged): the cost model told that a server runs slower than its tables say."""
    queue = (decision.wait_s - decision.load_s) * scale + decision.load_s
    finish = np.maximum(decision.transfer_s, queue) + decision.exec_s * scale
    return finish + decision.imposed_s * scale


class ScaleOutTailScheduler(TailScheduler):
    """``tail`` with the scale-out signal on (replicas loaded when p99 misses the SLO)."""

    name = "tail_scaleout"

    def __init__(self, predictor: QuantilePredictor | None = None) -> None:
        super().__init__(predictor=predictor, scale_out=True)


class PredictedMeanScheduler(TailScheduler):
    """``tail`` at the predicted mean output length instead of its p90."""

    name = "pred_mean"

    def __init__(self, predictor: QuantilePredictor | None = None) -> None:
        super().__init__(level=None, predictor=predictor)
