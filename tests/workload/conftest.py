"""Shared checks for realised workflow instances."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from scalesched.workload.instance import WorkflowInstance
from scalesched.workload.template import known_models


def check_instance(w: WorkflowInstance) -> None:
    """Every structural invariant the simulator relies on."""
    n = len(w.tasks)
    assert n >= 1
    assert len(w.parents) == n and len(w.children) == n
    ids = [t.id for t in w.tasks]
    assert len(set(ids)) == n, "task ids must be unique"
    edges = set()
    for v, ps in enumerate(w.parents):
        assert len(set(ps)) == len(ps), "duplicate parent"
        for u in ps:
            assert 0 <= u < v, f"not topological: {ids[u]} -> {ids[v]}"
            assert v in w.children[u], "children must mirror parents"
            edges.add((u, v))
    assert sum(len(c) for c in w.children) == len(edges)
    for key, nb in w.edge_bytes.items():
        assert key in edges, f"payload on a non-edge {key}"
        assert math.isfinite(nb) and nb > 0
    ancestors: list[set[int]] = []
    for v in range(n):
        a: set[int] = set()
        for u in w.parents[v]:
            a.add(u)
            a |= ancestors[u]
        ancestors.append(a)
    models = known_models()
    for v, t in enumerate(w.tasks):
        if t.revealed_by is not None:
            assert t.revealed_by in ancestors[v], f"{t.id}: revealer is not an ancestor"
        assert t.cpu_work >= 0 and t.ext_latency >= 0 and t.ext_latency_est >= 0
        if t.kind == "llm":
            assert t.model in models
            assert isinstance(t.prompt_tokens, int) and t.prompt_tokens >= 0
            assert isinstance(t.output_tokens, int) and t.output_tokens >= 0
            assert isinstance(t.output_tokens_est, int) and t.output_tokens_est >= 0
        else:
            assert t.kind == "tool"
            assert isinstance(t.tool, str) and t.tool


@pytest.fixture
def check() -> Callable[[WorkflowInstance], None]:
    return check_instance
