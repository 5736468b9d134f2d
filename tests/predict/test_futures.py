"""PredictedFutures: draws of hidden truths from what a scheduler may know."""

from __future__ import annotations

import numpy as np
import pytest

from scalesched.predict.futures import PredictedFutures, _on_grid
from scalesched.predict.metrics import on_grid
from scalesched.workload.instance import TaskInstance

CALL = TaskInstance(
    id="c", kind="llm", model="llama-2-70b", prompt_tokens=800, output_tokens=300,
    output_tokens_est=250, role="planner",
)  # fmt: skip
TOOL = TaskInstance(id="t", kind="tool", tool="web_search", ext_latency=2.0, ext_latency_est=1.5)


def test_the_scalar_quantile_function_is_the_predictors() -> None:
    rng = np.random.default_rng(0)
    q = np.sort(np.exp(rng.normal(5.0, 1.0, size=(1, 9))), axis=1)
    levels = np.concatenate([rng.random(500), [1e-4, 0.05, 0.5, 0.99, 1 - 1e-4]])
    scalar = [_on_grid(np.log(q[0]).tolist(), level) for level in levels]
    assert np.allclose(scalar, on_grid(q, levels)[0], rtol=1e-12)


def test_output_lengths_follow_the_levels_and_leave_the_visible_fields() -> None:
    sampler = PredictedFutures()
    outs = [sampler.redraw_task(CALL, "react", u) for u in (0.02, 0.3, 0.5, 0.9, 0.999)]
    tokens = [t.output_tokens for t in outs]
    assert tokens == sorted(tokens) and tokens[0] < tokens[-1] and tokens[0] >= 1
    for t in outs:
        assert (t.output_tokens_est, t.prompt_tokens, t.difficulty_hint) == (250, 800, 0.0)
    assert sampler.redraw_task(CALL, "react", 0.5) == outs[2]  # one draw per level


def test_tool_latency_centres_on_the_estimate_and_follows_the_hint() -> None:
    sampler = PredictedFutures()
    assert sampler.ext_latency(TOOL, 0.5) == pytest.approx(1.5)
    long = TaskInstance(id="t", kind="tool", ext_latency_est=1.5, difficulty_hint=1.0)
    assert sampler.ext_latency(long, 0.5) > 1.5 * 1.1
    assert sampler.ext_latency(TOOL, 0.05) < 1.5 < sampler.ext_latency(TOOL, 0.95)
    none = TaskInstance(id="t", kind="tool", ext_latency=3.0)
    assert sampler.redraw_task(none, "react", 0.9).ext_latency == 0.0


def test_arrivals_are_poisson_after_the_clock() -> None:
    rng = np.random.default_rng(1)
    given = PredictedFutures(rate_wps=2.0).arrivals(np.array([0.3]), 10.0, 4000, rng)
    assert given[0] > 10.0 and np.all(np.diff(given) >= 0)
    assert abs((given.size / (given[-1] - 10.0)) / 2.0 - 1) < 0.05
    seen = np.linspace(0.5, 49.5, 100)  # 100 arrivals in 50 s: 2 per second
    estimated = PredictedFutures().arrivals(seen, 50.0, 4000, rng)
    assert abs((estimated.size / (estimated[-1] - 50.0)) / 2.0 - 1) < 0.05
    with pytest.raises(ValueError, match="rate_wps"):
        PredictedFutures().arrivals(np.array([]), 0.0, 3, rng)
    with pytest.raises(ValueError, match="rate_wps"):
        PredictedFutures(rate_wps=0.0)
