"""tail's output lengths computed by the compiled core (``sim/_core/token_head.hpp``)
against the numpy predictor they replace in whole runs.

The C++ head does not promise numpy's doubles (BLAS orders its sums its own way), only the
integer a run reads: its value must lie within a few ulps of numpy's, each workflow's
lengths must equal ``workflow_lengths`` wherever the head answers, and a run where it
declines (a value too close to a rounding boundary: forced here with a huge tolerance) must
ask Python and still trace as the Python engine does.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from test_compiled_core import same_metrics, trace_rows

from scalesched.cluster import get_cluster
from scalesched.cluster.tables import ClusterTables
from scalesched.kernel.requests import task_request
from scalesched.policies import get_policy
from scalesched.policies.tail import TailScheduler
from scalesched.predict.features import TASK_INPUTS
from scalesched.predict.lengths import token_quantiles
from scalesched.predict.model import QUANTILES, Head, QuantilePredictor, default_predictor
from scalesched.runs.setup import Scenario, build_jobs, prepare, run
from scalesched.sim import compiled_run, core

pytestmark = pytest.mark.skipif(
    not core.compiled_available(), reason="the compiled core is not built in this install"
)

WORKLOADS = ("agentic-mix", "tool-heavy", "coordinator", "test-time-scaling", "agent-mix")


def a_random_predictor(seed: int, widths: tuple[int, ...]) -> QuantilePredictor:
    """The shipped predictor with its tokens head swapped for random layers of ``widths``."""
    rng = np.random.default_rng(seed)
    sizes = (TASK_INPUTS, *widths, len(QUANTILES))
    head = Head(
        tuple(rng.normal(scale=0.3, size=(a, b)) for a, b in zip(sizes, sizes[1:], strict=False)),
        tuple(rng.normal(scale=0.1, size=b) for b in sizes[1:]),
        rng.normal(size=TASK_INPUTS),
        rng.uniform(0.5, 2.0, TASK_INPUTS),
    )
    return dataclasses.replace(default_predictor(), tokens=head)


@pytest.mark.parametrize(
    ("workload", "scheduler"),
    [(w, TailScheduler()) for w in WORKLOADS]
    + [
        ("agentic-mix", TailScheduler(level=0.5)),
        ("agentic-mix", TailScheduler(level=0.05, predictor=a_random_predictor(1, (8,)))),
        ("tool-heavy", TailScheduler(level=0.99, predictor=a_random_predictor(2, (16, 5, 12)))),
    ],
)
def test_the_lengths_are_numpys(workload: str, scheduler: TailScheduler) -> None:
    """Every LLM call's value within 1e-13 (relative) of numpy's, and every workflow's
    lengths those of ``workflow_lengths`` (none declined at the shipped tolerance)."""
    tables = ClusterTables(get_cluster("hetero-16"))
    jobs = build_jobs(tables, Scenario(workload=workload, workflows=80, rate=2.0, seed=5))
    spec = scheduler.token_head()
    assert spec is not None and scheduler.token_head() is spec  # one per OutputLengths
    head = compiled_run._token_head(spec)
    assert compiled_run._token_head(spec) is head  # built once
    level = QUANTILES.index(scheduler.level)  # type: ignore[arg-type]
    for job in jobs:
        wf = job.workflow
        assert head.workflow_lengths(wf) == scheduler.workflow_lengths(wf)
        assert head.workflow_lengths(wf) == scheduler.workflow_lengths(wf)  # remembered
        values = head.workflow_values(wf)
        for i, task in enumerate(wf.tasks):
            if task.kind != "llm":
                assert np.isnan(values[i])
                continue
            request = task_request(wf, i, [-1] * len(wf.parents[i]), 0.0, 0.0)
            want = token_quantiles(scheduler.predictor, request)[0, level]
            assert abs(values[i] - want) <= 1e-13 * want


def test_the_predicted_mean_stays_in_python() -> None:
    assert get_policy("pred_mean").token_head() is None  # type: ignore[attr-defined]


@pytest.mark.parametrize("tolerance", [0.0, 0.6])
@pytest.mark.parametrize("policy", ["tail", "plas"])
def test_a_run_traces_as_python_whether_or_not_the_head_declines(
    monkeypatch: pytest.MonkeyPatch, tolerance: float, policy: str
) -> None:
    """Tolerance 0: the head answers every call; 0.6 (more than any distance to a
    boundary): it declines every workflow and Python is asked. Both trace as the Python
    engine, and a run without the head too."""
    monkeypatch.setattr(compiled_run, "TOKEN_TOLERANCE", tolerance)
    setup = prepare("hetero-8", Scenario(workflows=60, rate=1.5, seed=11), stream=False)
    asked: list[int] = []
    original = TailScheduler.workflow_lengths

    def counted(self: Any, wf: Any) -> list[int]:
        asked.append(1)
        return original(self, wf)

    monkeypatch.setattr(TailScheduler, "workflow_lengths", counted)
    results = {}
    for name in ("python", "compiled"):
        monkeypatch.setenv(core.CORE_ENV, name)
        results[name] = run(setup, policy, record_trace=True)
    assert trace_rows(results["python"]) == trace_rows(results["compiled"])
    same_metrics(results["python"].metrics, results["compiled"].metrics)
    assert (len(asked) > 0) == (tolerance > 0.5)
