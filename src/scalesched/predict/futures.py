"""A ``FutureSampler`` from what a scheduler may know: the shipped predictor's output-length
distribution, the difficulty hint for tool latencies, and the arrival rate seen so far.

Used by ``Simulation.fork(sampler=..., rng=...)`` (``scalesched.sim.futures``) to continue a
fork on a sampled future instead of the true one (the ``rollout`` policy's forks):

* an LLM call's output length is read off the predicted quantile function of its tokens
  (``QuantilePredictor.tokens``, the same inputs ``tail`` uses) at the task's level, as
  ``scalesched.predict.sampling`` reads it (log-linear between predicted levels, flat beyond
  q0.05 and q0.99);
* a tool's external latency: the hint is ``ln(truth / estimate)`` plus noise of known
  sigma (``scalesched.workload.hints``), so with a normal prior on that log ratio of sigma
  ``tool_sigma`` the latency is drawn from the posterior: a lognormal around the estimate,
  shifted toward what the hint says;
* a re-sampled branch's shared prefix (``replay_tokens``) is cut to the new length;
* future arrivals: a Poisson process at ``rate_wps``, or (None) at the rate seen so far
  (arrivals seen / clock), memoryless from the fork's clock.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np

from scalesched.cluster.tables import MODEL_INDEX
from scalesched.decision.features import TaskRequest
from scalesched.predict.features import token_baseline, token_inputs
from scalesched.predict.model import QUANTILES, QuantilePredictor, default_predictor
from scalesched.sim.futures import NoFutureYet, with_truths
from scalesched.workload.hints import _EXT_FLOOR, HINT_SIGMA
from scalesched.workload.instance import TaskInstance

_NORMAL = NormalDist()
_CACHE_MAX = 200_000
"""Most forecasts kept (one row of quantiles per distinct visible task)."""


@dataclass(eq=False)
class PredictedFutures:
    """Draws of hidden truths from the shipped predictor and the hints (module docstring)."""

    predictor: QuantilePredictor = field(default_factory=default_predictor)
    rate_wps: float | None = None
    """Arrival rate of the future, workflows per second; None: the rate seen so far."""
    tool_sigma: float = 0.5
    """Prior sigma of ln(true / estimated) external latency (an assumption: the workload's
    tool latencies are lognormal around their estimate with a sigma of this order)."""
    _forecasts: dict[tuple[object, ...], list[float]] = field(default_factory=dict, init=False)
    """ln of the predicted token quantiles per visible task (the same for every fork)."""

    def __post_init__(self) -> None:
        if self.rate_wps is not None and not (self.rate_wps > 0 and math.isfinite(self.rate_wps)):
            raise ValueError(f"rate_wps must be a positive number or None, got {self.rate_wps}")
        if not self.tool_sigma >= 0:
            raise ValueError(f"tool_sigma must be >= 0, got {self.tool_sigma}")

    def redraw_task(self, task: TaskInstance, pattern: str, level: float) -> TaskInstance:
        return with_truths(task, self.redraw_truths(task, pattern, level))

    def redraw_truths(
        self, task: TaskInstance, pattern: str, level: float
    ) -> tuple[int, int, float]:
        """``redraw_task``'s hidden truths (output_tokens, replay_tokens, ext_latency):
        an LLM call's output length, a tool's external latency."""
        if task.kind == "llm":
            out = self.output_tokens(task, pattern, level)
            return out, min(task.replay_tokens, out), task.ext_latency
        return task.output_tokens, task.replay_tokens, self.ext_latency(task, level)

    def output_tokens(self, task: TaskInstance, pattern: str, level: float) -> int:
        """The call's output length at ``level`` of its predicted distribution."""
        key = (
            task.model,
            task.role,
            pattern,
            task.prompt_tokens,
            task.output_tokens_est,
            task.difficulty_hint,
        )
        logq = self._forecasts.get(key)
        if logq is None:
            logq = np.log(np.maximum(self._forecast(task, pattern)[0], 1e-12)).tolist()
            if len(self._forecasts) >= _CACHE_MAX:
                self._forecasts.clear()
            self._forecasts[key] = logq
        return max(1, int(round(_on_grid(logq, level))))

    def _forecast(self, task: TaskInstance, pattern: str) -> np.ndarray:
        """(1, Q) predicted output-token quantiles of ``task`` (its visible fields only)."""
        request = TaskRequest(
            kind="llm",
            model=MODEL_INDEX[task.model or ""],
            prompt_tokens=task.prompt_tokens,
            output_tokens_est=task.output_tokens_est,
            cpu_work=task.cpu_work,
            ext_latency_est=task.ext_latency_est,
            parent_servers=(),
            parent_bytes=(),
            rank=0.0,
            workflow_age=0.0,
            role=task.role,
            pattern=pattern,
            difficulty_hint=task.difficulty_hint,
        )
        return np.exp(self.predictor.tokens(token_inputs(request)) + token_baseline(request))

    def ext_latency(self, task: TaskInstance, level: float) -> float:
        """The tool's external latency at ``level`` of its posterior given the hint."""
        est = task.ext_latency_est
        if est <= 0.0:
            return est  # no estimate, no hint: nothing to draw around
        prior, noise = self.tool_sigma**2, HINT_SIGMA**2
        mean = task.difficulty_hint * prior / (prior + noise)
        sd = math.sqrt(prior * noise / (prior + noise))
        z = _NORMAL.inv_cdf(min(max(level, 1e-12), 1 - 1e-12))
        return max(0.0, (est + _EXT_FLOOR) * math.exp(mean + sd * z) - _EXT_FLOOR)

    def arrivals(
        self, seen: np.ndarray, now: float, n: int, rng: np.random.Generator
    ) -> np.ndarray:
        """``n`` Poisson arrivals after ``now`` at ``rate_wps`` or the rate seen so far
        (``NoFutureYet`` before any time has passed or any job arrived: no rate to
        estimate)."""
        rate = self.rate_wps
        if rate is None:
            if seen.size == 0 or not now > 0:
                raise NoFutureYet("no arrivals seen yet to estimate a rate from: give rate_wps")
            rate = seen.size / now
        return now + np.cumsum(rng.exponential(1.0 / rate, size=n))


def _on_grid(logq: list[float], level: float) -> float:
    """The quantile function at one ``level`` from ln quantiles at ``QUANTILES``: what
    ``scalesched.predict.metrics.on_grid`` computes for a row, in plain floats (one draw
    per task read; numpy's per-call cost would dominate)."""
    j = min(max(bisect_left(QUANTILES, level) - 1, 0), len(QUANTILES) - 2)
    lo, hi = QUANTILES[j], QUANTILES[j + 1]
    w = min(max((level - lo) / (hi - lo), 0.0), 1.0)
    return math.exp(logq[j] * (1.0 - w) + logq[j + 1] * w)
