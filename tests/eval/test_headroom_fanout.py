"""The fan-out probes: statistics read off a trace, a spread that really spreads, and a
clairvoyant split that really sends each fan-out's longest sample to the reserved engines."""

from __future__ import annotations

import pytest

from scalesched.eval.headroom.fanout import (
    ClairvoyantSplit,
    HintSplit,
    SiblingSpread,
    fan_outs,
    fanout_stats,
    probe_fanout,
    top_hint,
)
from scalesched.runs.setup import RunSetup, Scenario, prepare, run


@pytest.fixture(scope="module")
def setup() -> RunSetup:
    scenario = Scenario(workload="best-of-n", workflows=40, load=0.5, seed=4)
    return prepare("homogeneous-16", scenario, stream=False)


def test_fan_outs_are_the_samples(setup: RunSetup) -> None:
    for job in setup.jobs:
        groups = fan_outs(job.workflow)
        assert len(groups) == 1
        (group,) = groups
        assert 4 <= len(group) <= 16
        assert {job.workflow.tasks[i].model for i in group} == {"llama-2-7b"}


def test_sibling_spread_puts_one_sample_per_server(setup: RunSetup) -> None:
    result = run(setup, SiblingSpread(), record_trace=True, warmup=0, cooldown=0)
    stats = fanout_stats(list(setup.jobs), result.trace)
    assert stats.fan_outs == len(setup.jobs)
    assert stats.servers == pytest.approx(stats.samples)  # n <= 16 servers: all apart
    assert stats.siblings_with_last == 0.0
    eft = fanout_stats(list(setup.jobs), run(setup, "eft", record_trace=True).trace)
    assert 1.0 <= eft.servers <= eft.samples


def test_clairvoyant_split_reserves_engines_for_the_longest(setup: RunSetup) -> None:
    jobs = list(setup.jobs)
    probe = ClairvoyantSplit(jobs, "llama-2-7b", reserved=3)
    result = run(setup, probe, record_trace=True, warmup=0, cooldown=0)
    by_id = {job.workflow_id: job for job in jobs}
    longest_servers: set[int] = set()
    other_servers: set[int] = set()
    for r in result.trace:
        if r.model != "llama-2-7b":
            continue
        wf = by_id[r.workflow].workflow
        i = next(k for k, t in enumerate(wf.tasks) if t.id == r.task)
        (longest_servers if (wf.name, i) in probe.longest else other_servers).add(r.server)
    assert len(probe.longest) == len(jobs)
    assert longest_servers <= {0, 1, 2}
    assert not other_servers & {0, 1, 2}


def test_clairvoyant_split_refuses_bad_input(setup: RunSetup) -> None:
    jobs = list(setup.jobs)
    with pytest.raises(ValueError, match="reserved"):
        ClairvoyantSplit(jobs, "llama-2-7b", reserved=0)
    with pytest.raises(ValueError, match="unknown model"):
        ClairvoyantSplit(jobs, "no-such-model", reserved=2)
    with pytest.raises(ValueError, match="repeat"):
        ClairvoyantSplit(jobs + jobs[:1], "llama-2-7b", reserved=2)


def test_hint_split_sends_only_high_hint_samples_to_the_reserve(setup: RunSetup) -> None:
    jobs = list(setup.jobs)
    threshold = top_hint(jobs, "llama-2-7b", 0.2)
    result = run(setup, HintSplit("llama-2-7b", 2, threshold), record_trace=True)
    by_id = {job.workflow_id: job for job in jobs}
    high = 0
    for r in result.trace:
        if r.model != "llama-2-7b":
            continue
        task = next(t for t in by_id[r.workflow].workflow.tasks if t.id == r.task)
        is_high = task.context_of is not None and task.difficulty_hint > threshold
        high += is_high
        assert (r.server in (0, 1)) == is_high
    assert high > 0


def test_probe_rows(setup: RunSetup) -> None:
    rows = probe_fanout(setup, baseline="eft", reserved=4)
    names = ["eft", "sibling_spread", "clairvoyant_split", "hint_split"]
    assert [r.name for r in rows] == names
    for row in rows:
        assert row.mean_s > 0 and row.stats.fan_outs > 0
