"""Where a test-time-scaling fan-out's samples run, and two probes of what placement could
still win there (docs/headroom-map.md, "Test-time scaling: how much of the room is real").

Why: on best-of-n and self-consistency the best heuristic sits far above the capacity-aware
bound, nearly all of it batching of the samples' model. Two explanations compete, and each
probe tests one:

* piling: a heuristic puts a workflow's simultaneous samples on one engine when idle
  engines exist. ``SiblingSpread`` is eft that never puts two samples of one fan-out on one
  server while a feasible server without one is left; ``fanout_stats`` counts how many
  servers the samples reach and how many siblings share the last one's engine.
* clairvoyance: the bound knows each call's output length, so it can give each workflow's
  longest sample (the one on the critical path) a lightly loaded engine and batch the rest.
  ``ClairvoyantSplit`` reads the true lengths (research only: no deployed scheduler has
  them) and reserves a few engines for the longest samples.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from scalesched.cluster.tables import MODEL_INDEX
from scalesched.decision.features import Decision
from scalesched.decision.scheduler import BaseScheduler
from scalesched.eval.headroom.bound import fan_outs
from scalesched.kernel.metrics import window_bounds
from scalesched.kernel.records import TaskRecord
from scalesched.runs.setup import RunSetup, run
from scalesched.runs.windows import default_cooldown, default_warmup
from scalesched.workload.instance import Job


@dataclass(frozen=True)
class FanoutStats:
    """Means over the fan-outs of the workflows counted."""

    fan_outs: int
    samples: float
    """Samples per fan-out."""
    servers: float
    """Distinct servers a fan-out's samples ran on."""
    siblings_with_last: float
    """Siblings that ran on the server of the sample that finished last (the one on the
    workflow's critical path through the fan-out)."""


def fanout_stats(
    jobs: Sequence[Job], trace: Iterable[TaskRecord], workflow_ids: set[int] | None = None
) -> FanoutStats:
    """``FanoutStats`` of the fan-outs of ``jobs`` (those in ``workflow_ids``, default all)
    from a run's trace."""
    ends: dict[tuple[int, str], TaskRecord] = {}
    for r in trace:
        if workflow_ids is None or r.workflow in workflow_ids:
            ends[r.workflow, r.task] = r
    n = samples = servers = siblings = 0
    for job in jobs:
        if workflow_ids is not None and job.workflow_id not in workflow_ids:
            continue
        for group in fan_outs(job.workflow):
            rows = [ends.get((job.workflow_id, job.workflow.tasks[i].id)) for i in group]
            done = [r for r in rows if r is not None]
            if len(done) < 2:
                continue
            last = max(done, key=lambda r: r.end)
            n += 1
            samples += len(done)
            servers += len({r.server for r in done})
            siblings += sum(1 for r in done if r is not last and r.server == last.server)
    d = max(n, 1)
    return FanoutStats(n, samples / d, servers / d, siblings / d)


def _eft_scores(decision: Decision) -> np.ndarray:
    return np.where(decision.mask, decision.finish_s + decision.imposed_s, np.inf)


class SiblingSpread(BaseScheduler):
    """eft, except that samples released together from one context (same ``context_key``,
    same instant) avoid the servers their siblings went to while a feasible one is left."""

    name = "sibling_spread"
    places_only = True  # sim.compiled_loop: answers with a server only

    def __init__(self) -> None:
        self.placed: dict[object, tuple[float, set[int]]] = {}

    def reset(self, seed: int) -> None:
        self.placed = {}

    def select(self, decision: Decision) -> int:
        score = _eft_scores(decision)
        key = decision.task.context_key
        if decision.task.kind != "llm" or key is None:
            return int(np.argmin(score))
        at, used = self.placed.get(key, (math.nan, set()))
        if at != decision.now:
            used = set()
        spread = score.copy()
        spread[list(used)] = np.inf
        choice = int(np.argmin(spread if np.isfinite(spread).any() else score))
        used.add(choice)
        self.placed[key] = (decision.now, used)
        return choice


class ClairvoyantSplit(BaseScheduler):
    """Research probe, clairvoyant: reads the true output lengths of ``jobs``. The longest
    sample of every fan-out of ``model`` runs on the first ``reserved`` servers that can
    hold the model (eft among them), every other call of the model on the rest, and
    everything else by eft."""

    name = "clairvoyant_split"
    places_only = True  # sim.compiled_loop: answers with a server only

    def __init__(self, jobs: Sequence[Job], model: str, reserved: int) -> None:
        if model not in MODEL_INDEX:
            raise ValueError(f"unknown model {model!r}")
        if reserved < 1:
            raise ValueError(f"reserved must be >= 1, got {reserved}")
        names = [job.workflow.name for job in jobs]
        if len(set(names)) != len(names):
            raise ValueError("workflow names repeat: calls cannot be told apart by call_key")
        self.model, self.reserved = MODEL_INDEX[model], reserved
        self.longest: set[tuple[str, int]] = set()
        for job in jobs:
            wf = job.workflow
            for group in fan_outs(wf):
                if wf.tasks[group[0]].model == model:
                    top = max(group, key=lambda i: (wf.tasks[i].output_tokens, -i))
                    self.longest.add((wf.name, top))

    def select(self, decision: Decision) -> int:
        task = decision.task
        if task.kind != "llm" or task.model != self.model:
            return int(np.argmin(_eft_scores(decision)))
        return _in_lane(decision, self.reserved, task.call_key in self.longest)


class HintSplit(BaseScheduler):
    """``ClairvoyantSplit`` without the truth: a call of ``model`` that extends another's
    context (a fan-out's sample) and whose observable ``difficulty_hint`` exceeds
    ``threshold`` runs on the reserved servers, every other call of the model on the rest."""

    name = "hint_split"
    places_only = True  # sim.compiled_loop: answers with a server only

    def __init__(self, model: str, reserved: int, threshold: float) -> None:
        if model not in MODEL_INDEX:
            raise ValueError(f"unknown model {model!r}")
        if reserved < 1:
            raise ValueError(f"reserved must be >= 1, got {reserved}")
        self.model, self.reserved, self.threshold = MODEL_INDEX[model], reserved, threshold

    def select(self, decision: Decision) -> int:
        task = decision.task
        if task.kind != "llm" or task.model != self.model:
            return int(np.argmin(_eft_scores(decision)))
        long = task.context_key is not None and task.difficulty_hint > self.threshold
        return _in_lane(decision, self.reserved, long)


def _in_lane(decision: Decision, reserved: int, on_reserved: bool) -> int:
    """eft's best server within a lane: the first ``reserved`` feasible servers, or the
    others (eft's best anywhere when the lane has none)."""
    score = _eft_scores(decision)
    lane = np.zeros(decision.n_servers, dtype=bool)
    lane[np.flatnonzero(decision.mask)[:reserved]] = True
    kept = np.where(lane if on_reserved else ~lane, score, np.inf)
    return int(np.argmin(kept if np.isfinite(kept).any() else score))


def top_hint(jobs: Sequence[Job], model: str, share: float) -> float:
    """The hint above which ``share`` of the fan-out samples of ``model`` in ``jobs`` lie
    (about one sample per fan-out at ``share = 1 / mean samples``)."""
    hints = [
        job.workflow.tasks[i].difficulty_hint
        for job in jobs
        for group in fan_outs(job.workflow)
        for i in group
        if job.workflow.tasks[i].model == model
    ]
    return float(np.quantile(hints, 1.0 - share)) if hints else math.inf


@dataclass(frozen=True)
class ProbeRow:
    name: str
    mean_s: float
    steady: bool
    stats: FanoutStats


def probe_fanout(
    setup: RunSetup, baseline: str = "tail", model: str = "llama-2-7b", reserved: int = 4
) -> list[ProbeRow]:
    """Run ``baseline``, ``SiblingSpread``, ``ClairvoyantSplit`` and ``HintSplit`` (the
    top tenth of the samples' hints) on ``setup`` (jobs realised up front) and report each
    one's mean response and fan-out statistics over the default steady-state window."""
    jobs = list(setup.jobs)
    ordered = sorted(jobs, key=lambda j: (j.arrival, j.workflow_id))
    first, last = window_bounds(len(jobs), default_warmup(len(jobs)), default_cooldown(len(jobs)))
    window = {j.workflow_id for j in ordered[first : last + 1]}
    rows = []
    policies: list[str | BaseScheduler] = [
        baseline,
        SiblingSpread(),
        ClairvoyantSplit(jobs, model, reserved),
        HintSplit(model, reserved, top_hint(jobs, model, 0.1)),
    ]
    for policy in policies:
        result = run(setup, policy, warmup=first, record_trace=True)
        name = policy if isinstance(policy, str) else policy.name
        m = result.metrics
        stats = fanout_stats(jobs, result.trace, window)
        rows.append(ProbeRow(name, float(m["avg_response_time_s"]), bool(m["steady_state"]), stats))
    return rows
