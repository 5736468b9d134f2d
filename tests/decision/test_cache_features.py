"""The cache server features: what a router knows of the KV state, kept by the run ledger."""

from __future__ import annotations

import numpy as np
import pytest

from scalesched.cluster import get_cluster
from scalesched.cluster.tables import ClusterTables
from scalesched.decision.features import (
    BASE_SERVER_FEATURES,
    CACHED_SHARE_FEATURE,
    SERVER_FEATURES,
    SESSION_RESIDENT_FEATURE,
    TaskRequest,
)
from scalesched.kernel.routes import RouteMemory
from scalesched.nn.observation import observation
from scalesched.policies import get_policy
from scalesched.runs.setup import Scenario, build_jobs
from scalesched.sim.engine import Simulation


def request(**kw: object) -> TaskRequest:
    base: dict[str, object] = dict(
        kind="llm",
        model=0,
        prompt_tokens=2000,
        output_tokens_est=100,
        cpu_work=0.0,
        ext_latency_est=0.0,
        parent_servers=(),
        parent_bytes=(),
        rank=1.0,
        workflow_age=0.0,
        prefix_id="app",
        prefix_tokens=1000,
        call_key=("wf", 2),
        context_key=("wf", 0),
    )
    base.update(kw)
    return TaskRequest(**base)  # type: ignore[arg-type]


def memory(capacity: int = 10_000, n: int = 3) -> RouteMemory:
    tables = ClusterTables(get_cluster("hetero-4"))
    mem = RouteMemory(tables)
    mem._capacity = np.full((n, 4), capacity)  # a uniform, small cluster for the test
    return mem


def test_context_beats_the_app_prompt_and_residency_marks_the_session() -> None:
    mem = memory()
    mem.route(0, 0, "app", 1000, ("wf", 0), None, 1500)  # the session's first call
    mem.route(1, 0, "app", 1000, ("other", 0), None, 1300)  # another session, same app
    tokens, resident = mem.cached(request(), 3)
    assert tokens.tolist() == [1500, 1000, 0]
    assert resident.tolist() == [1, 0, 0]
    # capped at the prompt; nothing for a call without a prefix identity
    assert mem.cached(request(prompt_tokens=1200), 3)[0].tolist() == [1200, 1000, 0]
    assert mem.cached(request(prefix_id=None, context_key=None), 3)[0].sum() == 0


def test_memory_forgets_least_recent_beyond_capacity_and_dead_servers() -> None:
    mem = memory(capacity=3000)
    mem.route(0, 0, "app", 1000, ("wf", 0), None, 2000)  # app 1000 + own 1000
    mem.route(0, 0, "app", 1000, ("b", 0), None, 2500)  # own 1500: 3500 > 3000
    tokens, resident = mem.cached(request(), 3)
    assert resident[0] == 0 and tokens[0] == 1000  # ("wf", 0) forgotten, the app kept
    mem.forget_server(0)
    assert mem.cached(request(), 3)[0].sum() == 0
    assert not mem._where  # nothing left behind


def run_features(workload: str, kv: str | None, workflows: int = 40) -> list[tuple]:
    spec = get_cluster("hetero-16")
    tables = ClusterTables(spec)
    jobs = build_jobs(tables, Scenario(workload=workload, workflows=workflows, rate=1.4, seed=5))
    sim = Simulation(spec, jobs, tables=tables, kv_policy=kv)
    policy = get_policy("eft")
    policy.reset(0)
    seen = []
    placed: dict[object, int] = {}  # call_key -> server: where each session's call went
    d = sim.next_decision()
    while d is not None:
        server = policy.select(d)
        seen.append((d.task, d.server_features.copy(), placed.get(d.task.context_key)))
        if d.task.call_key is not None:
            placed[d.task.call_key] = server
        sim.apply(server)
        d = sim.next_decision()
    return seen


def test_features_in_a_run_follow_the_sessions() -> None:
    seen = run_features("tool-heavy", "lru")
    assert all(f.shape[1] == SERVER_FEATURES for _, f, _ in seen)
    cache = [f[:, CACHED_SHARE_FEATURE:] for _, f, _ in seen]
    assert all(((c >= 0) & (c <= 1)).all() for c in cache)
    tools = [f for t, f, _ in seen if t.kind == "tool"]
    assert tools and all(not f[:, CACHED_SHARE_FEATURE:].any() for f in tools)
    resident_rows = 0
    for task, f, ctx_server in seen:
        res = f[:, SESSION_RESIDENT_FEATURE]
        if task.context_key is None:
            assert not res.any()
            continue
        # residency only ever marks the server the session's previous call was sent to
        assert set(np.flatnonzero(res).tolist()) <= {ctx_server}
        resident_rows += int(res.any())
        if res.any():
            assert f[ctx_server, CACHED_SHARE_FEATURE] > task.prefix_tokens / task.prompt_tokens
    assert resident_rows > 0


def test_no_prefix_identities_no_cache_features() -> None:
    seen = run_features("agentic-mix", None, workflows=15)
    assert seen and all(not f[:, CACHED_SHARE_FEATURE:].any() for _, f, _ in seen)


def test_observation_keeps_the_first_columns_for_older_networks() -> None:
    spec = get_cluster("hetero-16")
    tables = ClusterTables(spec)
    jobs = build_jobs(tables, Scenario(workload="tool-heavy", workflows=5, rate=1.4, seed=1))
    sim = Simulation(spec, jobs, tables=tables, kv_policy="lru")
    d = sim.next_decision()
    assert d is not None
    full = observation(d, 20)["servers"]
    base = observation(d, 20, BASE_SERVER_FEATURES)["servers"]
    assert full.shape == (20, SERVER_FEATURES) and base.shape == (20, BASE_SERVER_FEATURES)
    assert np.array_equal(full[:, :BASE_SERVER_FEATURES], base)
    with pytest.raises(ValueError, match="server_dim"):
        observation(d, 20, 19)
