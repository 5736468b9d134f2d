"""The output length a call is costed at: one place for tail and the networks' inputs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from scalesched.cluster import get_cluster
from scalesched.cluster.tables import ClusterTables
from scalesched.decision.features import TaskRequest
from scalesched.predict.lengths import OutputLengths, token_quantiles
from scalesched.predict.model import QUANTILES, default_predictor
from scalesched.runs.setup import Scenario, build_jobs
from scalesched.sim.engine import Simulation


def _call(difficulty_hint: float = 0.0) -> TaskRequest:
    """The first LLM call a simulation asks about, with the given length signal."""
    spec = get_cluster("hetero-8")
    sim = Simulation(spec, build_jobs(ClusterTables(spec), Scenario(workflows=5, seed=1)))
    decision = sim.next_decision()
    while decision is not None and decision.task.kind != "llm":
        sim.apply(int(np.flatnonzero(decision.mask)[0]))
        decision = sim.next_decision()
    assert decision is not None
    return dataclasses.replace(decision.task, difficulty_hint=difficulty_hint)


def test_a_level_is_the_predictors_quantile_rounded_to_whole_tokens() -> None:
    q = token_quantiles(default_predictor(), _call())
    p90 = OutputLengths(0.9).tokens(_call())
    assert p90 == max(1, round(float(q[0, QUANTILES.index(0.9)])))
    assert OutputLengths(0.5).tokens(_call()) <= p90


def test_the_answer_follows_the_observable_signal_and_is_remembered_per_signal() -> None:
    lengths = OutputLengths(0.9)
    short, long = lengths.tokens(_call(-1.0)), lengths.tokens(_call(1.0))
    assert short < long
    assert len(lengths.memo) == 2
    # Fields the tokens head does not read share an entry.
    lengths.tokens(dataclasses.replace(_call(1.0), workflow_age=50.0))
    assert len(lengths.memo) == 2


def test_an_unknown_level_is_refused() -> None:
    with pytest.raises(ValueError, match="level must be one of"):
        OutputLengths(0.42)
