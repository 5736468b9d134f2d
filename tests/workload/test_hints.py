"""Difficulty hints: observable, noisy, on their own random stream."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy.stats import spearmanr

from scalesched.workload import template
from scalesched.workload.source import get_workload, sample_jobs, workflow_rng

TRUTH = ("prompt_tokens", "output_tokens", "cpu_work", "ext_latency", "tool", "id")


def test_hints_leave_every_other_draw_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    """Realising with a different hint stream changes the hints and nothing else."""
    source = get_workload("agentic-mix")
    before = [source.sample(workflow_rng(7, i)) for i in range(30)]
    monkeypatch.setattr(template, "hint_rng", lambda rng: np.random.default_rng(999))
    after = [source.sample(workflow_rng(7, i)) for i in range(30)]
    changed = 0
    for a, b in zip(before, after, strict=True):
        assert a.parents == b.parents and a.edge_bytes == b.edge_bytes
        for ta, tb in zip(a.tasks, b.tasks, strict=True):
            assert [getattr(ta, f) for f in TRUTH] == [getattr(tb, f) for f in TRUTH]
            changed += ta.difficulty_hint != tb.difficulty_hint
    assert changed > 100


def test_hints_are_seeded() -> None:
    source = get_workload("agentic-mix")
    a = source.sample(workflow_rng(3, 5))
    b = source.sample(workflow_rng(3, 5))
    assert [t.difficulty_hint for t in a.tasks] == [t.difficulty_hint for t in b.tasks]


def test_hint_relation_to_true_tokens_is_strong_but_noisy() -> None:
    """Within a role, Spearman of hint and true output tokens is about 0.8 (docs/tail.md)."""
    jobs = sample_jobs(get_workload("agentic-mix"), [0.0] * 300, 11)
    llm = [t for j in jobs for t in j.workflow.tasks if t.kind == "llm"]
    assert all(t.role is not None for t in llm)
    worker = [t for t in llm if t.role == "summariser"]
    rho = spearmanr([t.difficulty_hint for t in worker], [t.output_tokens for t in worker])[0]
    assert 0.65 < rho < 0.92


def test_hint_is_not_the_truth() -> None:
    jobs = sample_jobs(get_workload("agentic-mix"), [0.0] * 50, 2)
    llm = [t for j in jobs for t in j.workflow.tasks if t.kind == "llm"]
    exact = [np.log(t.output_tokens / t.output_tokens_est) for t in llm]
    err = np.array([t.difficulty_hint for t in llm]) - np.array(exact)
    assert 0.4 < float(np.std(err)) < 0.8


def test_decision_view_carries_role_pattern_and_hint() -> None:
    from scalesched.kernel.requests import task_request

    wf = get_workload("agentic-mix").sample(workflow_rng(0, 0))
    i = next(k for k, t in enumerate(wf.tasks) if t.kind == "llm")
    req = task_request(wf, i, [], 0.0, 0.0)
    assert req.role == wf.tasks[i].role and req.pattern == wf.pattern
    assert req.difficulty_hint == wf.tasks[i].difficulty_hint
    assert not hasattr(req, "output_tokens")
    assert "output_tokens" not in {f.name for f in dataclasses.fields(req)}
