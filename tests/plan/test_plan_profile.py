"""The workload profile: calls per model and critical-path parts."""

from __future__ import annotations

import numpy as np
import pytest

from scalesched.errors import InputError
from scalesched.plan.profile import reference_engine, workload_profile


@pytest.fixture(scope="module")
def mix():
    return workload_profile("agentic-mix", samples=120, seed=5)


def test_models_and_calls(mix):
    assert mix.models == ("codellama-34b", "llama-2-70b", "llama-2-7b", "phi-2")
    for m in mix.models:
        c = mix.calls[m]
        assert c.prompt.size == c.output.size == round(c.calls_per_workflow * 120)
        assert c.busy_kv >= c.busy_context > 0
    # every react/plan-execute/... workflow starts with a phi-2 router or ends with a vote
    assert mix.calls["phi-2"].calls_per_workflow >= 1


def test_critical_path_parts(mix):
    assert mix.n_workflows == 120
    assert (mix.base_s >= 0).all() and (mix.prefill_ref_s >= 0).all()
    # the critical path holds at most the calls the workflows make
    total_calls = np.array([mix.calls[m].calls_per_workflow for m in mix.models]) * 120
    assert (mix.n_calls.sum(axis=0) <= total_calls + 1e-9).all()
    assert (mix.n_calls.sum(axis=1) >= 1).all()
    assert (mix.out_tokens >= mix.n_calls).all()  # at least one output token per call


def test_same_seed_same_profile():
    a = workload_profile("react", samples=30, seed=1)
    b = workload_profile("react", samples=30, seed=1)
    c = workload_profile("react", samples=30, seed=2)
    assert np.array_equal(a.out_tokens, b.out_tokens)
    assert not np.array_equal(a.out_tokens, c.out_tokens)


def test_reference_engine_and_errors():
    assert reference_engine("llama-2-70b").tp == 2 and reference_engine("phi-2").tp == 1
    with pytest.raises(InputError):
        workload_profile("no-such-workload")
    with pytest.raises(InputError, match="samples"):
        workload_profile("react", samples=0)
