"""Repeated tool calls: marked on a stream of their own, never before their original."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from scalesched.errors import InputError
from scalesched.workload.repeats import RepeatSource, check_repeat_probability, mark_repeats
from scalesched.workload.source import get_workload, workflow_rng

COSTS = ("cpu_work", "ext_latency", "ext_latency_est", "difficulty_hint", "repeat_of")


def _sample(p: float, seed: int = 7, n: int = 40) -> list:
    source = get_workload("agentic-mix")
    wrapped = RepeatSource(source, p) if p else source
    return [wrapped.sample(workflow_rng(seed, i)) for i in range(n)]


def test_probability_zero_leaves_every_workflow_unchanged() -> None:
    plain = _sample(0.0)
    zero = [
        RepeatSource(get_workload("agentic-mix"), 0.0).sample(workflow_rng(7, i)) for i in range(40)
    ]
    assert zero == plain


def test_repeats_change_only_the_marked_tasks_and_follow_their_original() -> None:
    plain, marked = _sample(0.0), _sample(0.3)
    repeats = 0
    for a, b in zip(plain, marked, strict=True):
        assert a.parents == b.parents and a.edge_bytes == b.edge_bytes
        for i, (ta, tb) in enumerate(zip(a.tasks, b.tasks, strict=True)):
            same = {f.name for f in dataclasses.fields(ta)} - set(COSTS)
            assert all(getattr(ta, f) == getattr(tb, f) for f in same)
            if tb.repeat_of is None:
                assert ta == tb
                continue
            repeats += 1
            j = tb.repeat_of
            orig = b.tasks[j]
            assert j < i, "a repeat never precedes its original"
            assert tb.kind == orig.kind == "tool" and tb.tool == orig.tool
            assert orig.repeat_of is None  # originals only: no chains
            assert [getattr(tb, f) for f in COSTS[:-1]] == [getattr(orig, f) for f in COSTS[:-1]]
    assert repeats > 20


def test_repeat_rate_follows_the_probability() -> None:
    """Among tool tasks that have an earlier same-tool original, about P are repeats."""
    eligible = hits = 0
    for wf in _sample(0.3, seed=1, n=300):
        seen: dict[str, int] = {}
        for t in wf.tasks:
            if t.kind != "tool" or t.tool is None:
                continue
            if seen.get(t.tool):
                eligible += 1
                hits += t.repeat_of is not None
            if t.repeat_of is None:
                seen[t.tool] = seen.get(t.tool, 0) + 1
    assert eligible > 300
    assert hits / eligible == pytest.approx(0.3, abs=0.05)


def test_repeats_are_seeded() -> None:
    a, b, c = _sample(0.3, seed=3), _sample(0.3, seed=3), _sample(0.3, seed=4)
    marks = [[[t.repeat_of for t in w.tasks] for w in x] for x in (a, b, c)]
    assert marks[0] == marks[1] and marks[0] != marks[2]


def test_mark_repeats_at_zero_is_the_identity() -> None:
    wf = get_workload("agentic-mix").sample(workflow_rng(0, 0))
    assert mark_repeats(wf, 0.0, np.random.default_rng(0)) is wf


@pytest.mark.parametrize("p", [-0.1, 1.0, float("nan"), True])
def test_bad_probability_is_an_input_error(p: float) -> None:
    with pytest.raises(InputError, match="tool-repeat"):
        check_repeat_probability(p)
