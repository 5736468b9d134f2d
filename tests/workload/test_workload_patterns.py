"""Preset patterns and the public source API."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from scalesched.errors import InputError
from scalesched.workload.agent_patterns import AGENT_PATTERNS
from scalesched.workload.instance import Job, WorkflowInstance
from scalesched.workload.patterns import MIX_WEIGHTS, PATTERNS
from scalesched.workload.source import get_workload, list_workloads, sample_jobs, workflow_rng

Check = Callable[[WorkflowInstance], None]

# (min tasks, max tasks, models that must appear in some draw)
EXPECTED = {
    "react": (5, 15, {"phi-2", "llama-2-70b", "llama-2-7b"}),
    "plan-execute": (7, 19, {"phi-2", "llama-2-70b", "llama-2-7b"}),
    "map-reduce": (7, 20, {"phi-2", "llama-2-70b", "llama-2-7b"}),
    "debate": (5, 22, {"phi-2", "llama-2-70b", "llama-2-7b", "codellama-34b"}),
    "codegen": (5, 13, {"phi-2", "llama-2-70b", "llama-2-7b", "codellama-34b"}),
    "deep-research": (10, 24, {"phi-2", "llama-2-70b", "llama-2-7b"}),
}
SIX = tuple(EXPECTED)


def draws(name: str, n: int, seed0: int = 0) -> list[WorkflowInstance]:
    src = get_workload(name)
    return [src.sample(np.random.default_rng(seed0 + s)) for s in range(n)]


@pytest.mark.parametrize("name", SIX)
def test_pattern_realises_valid_varied_dags(name: str, check: Check) -> None:
    lo, hi, models = EXPECTED[name]
    ws = draws(name, 150)
    sizes = set()
    seen_models: set[str] = set()
    revealed = 0
    for w in ws:
        check(w)
        assert w.pattern == name
        assert lo <= len(w) <= hi, (name, len(w))
        sizes.add(len(w))
        seen_models |= {t.model for t in w.tasks if t.model}
        revealed += sum(t.revealed_by is not None for t in w.tasks)
        for t in w.tasks:
            if t.kind == "tool":
                assert t.cpu_work <= 5.0 + 1e-9 and t.ext_latency <= 2.0 + 1e-9
        for nb in w.edge_bytes.values():
            assert 50 <= nb <= 32e6
    assert seen_models == models
    assert revealed > 0
    assert min(sizes) <= lo + 2 and max(sizes) >= hi - 4  # the dynamic rules do vary
    assert len(sizes) >= 4


@pytest.mark.parametrize("name", [*SIX, "agentic-mix"])
def test_pattern_is_deterministic_per_seed(name: str) -> None:
    src = get_workload(name)
    a = [src.sample(np.random.default_rng(s)) for s in range(5)]
    b = [src.sample(np.random.default_rng(s)) for s in range(5)]
    assert a == b
    assert len({(len(w), w.pattern) for w in a}) > 1 or len({w.tasks for w in a}) > 1


def test_pattern_specific_structure() -> None:
    for w in draws("react", 30):
        ids = [t.id for t in w.tasks]
        assert ids[:3] == ["route", "think0", "act"] and ids[-1] == "answer"
        assert w.tasks[ids.index("think")].model == "llama-2-70b"
    for w in draws("plan-execute", 30):
        calls = [t for t in w.tasks if t.id.startswith("call#")]
        assert 2 <= len(calls) <= 8
        assert {t.tool for t in calls} <= {"web_search", "db_query", "retrieval", "code_exec"}
        joins = [i for i, t in enumerate(w.tasks) if t.id == "join"]
        assert len(w.parents[joins[0]]) == len(calls)
    followups = 0
    for w in draws("deep-research", 60):
        id_set = {t.id for t in w.tasks}
        if "fsearch0" in id_set:
            followups += 1
            assert {"fread0", "fsearch1", "fread1"} <= id_set
    assert 10 < followups < 40
    for w in draws("codegen", 30):
        tests = [t for t in w.tasks if t.id.startswith("test")]
        assert all(t.tool == "code_exec" and t.ext_latency == 0.0 for t in tests)
        assert all(t.model == "codellama-34b" for t in w.tasks if t.id.startswith("code"))


def test_router_is_short_coder_is_long() -> None:
    route, code = [], []
    for w in draws("codegen", 200):
        for t in w.tasks:
            if t.id == "route":
                route.append(t.output_tokens)
                assert t.output_tokens_est == 5
            elif t.id.startswith("code"):
                code.append(t.output_tokens)
    assert max(route) <= 16 and np.median(code) > 100


def test_agentic_mix_weights() -> None:
    src = get_workload("agentic-mix")
    n = 2000
    counts: dict[str, int] = {}
    for s in range(n):
        p = src.sample(np.random.default_rng(s)).pattern
        counts[p] = counts.get(p, 0) + 1
    assert set(counts) == set(MIX_WEIGHTS)
    for name, wgt in MIX_WEIGHTS.items():
        assert abs(counts[name] / n - wgt) < 0.035, (name, counts[name] / n)


def test_list_and_get_workload() -> None:
    names = [n for n, _ in list_workloads()]
    assert [*SIX, "agentic-mix"] == list(PATTERNS)
    assert names == [*PATTERNS, *AGENT_PATTERNS]  # the KV presets (agent_patterns.py) follow
    assert all(desc for _, desc in list_workloads())
    assert get_workload("debate").name == "debate"
    with pytest.raises(InputError) as ei:
        get_workload("reactt")
    assert ei.value.source == "--workload" and "react" in ei.value.message
    with pytest.raises(InputError) as ei:
        get_workload("no/such/file.json")
    assert ei.value.source == "no/such/file.json"


def test_sample_jobs_is_keyed_by_seed_and_index(check: Check) -> None:
    src = get_workload("agentic-mix")
    jobs = sample_jobs(src, [0.0, 0.5, 0.5, 2.0], seed=11)
    assert [j.workflow_id for j in jobs] == [0, 1, 2, 3]
    assert [j.arrival for j in jobs] == [0.0, 0.5, 0.5, 2.0]
    for i, j in enumerate(jobs):
        assert isinstance(j, Job)
        assert j.workflow.name == f"{j.workflow.pattern}-{i}"
        check(j.workflow)
    # workflow i depends only on (seed, i): not on the list length or the arrival times
    longer = sample_jobs(src, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], seed=11)
    assert [j.workflow for j in longer[:4]] == [j.workflow for j in jobs]
    assert jobs[2].workflow == sample_jobs(src, [0.0] * 3, seed=11)[2].workflow
    other = sample_jobs(src, [0.0, 0.5, 0.5, 2.0], seed=12)
    assert [j.workflow for j in other] != [j.workflow for j in jobs]
    w = src.sample(workflow_rng(11, 3))
    assert w.tasks == jobs[3].workflow.tasks


def test_sample_jobs_validates_inputs() -> None:
    src = get_workload("react")
    with pytest.raises(InputError, match="sorted"):
        sample_jobs(src, [1.0, 0.5], seed=0)
    with pytest.raises(InputError, match="seed"):
        sample_jobs(src, [1.0], seed=-1)
