"""tao: joint admission and placement of the waiting LLM calls by the admission DP."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from scalesched.cluster.model import ClusterSpec, ServerSpec
from scalesched.cluster.tables import MODEL_INDEX, MODEL_NAMES, ClusterTables
from scalesched.decision.actions import Defer
from scalesched.decision.features import ENGINE_READY, TaskRequest, make_decision
from scalesched.policies import get_policy
from scalesched.policies.tao import TaoScheduler
from scalesched.runs.setup import Scenario, prepare, run

SERVER = ServerSpec("g", "custom", "A100-80G", 2, 4, 1.0, 100.0, 8.0)
TABLES = ClusterTables(ClusterSpec("two", (SERVER, SERVER)))
M = MODEL_INDEX["llama-2-70b"]
"""Requests of prompt 2500 + output 500: six fill an engine's 18,310 KV tokens."""


@dataclass
class _View:
    """A hand-set cluster state (the ``ClusterStateView`` protocol)."""

    now: float = 0.0
    batch: tuple[int, int] = (0, 0)
    est_work: np.ndarray = field(default_factory=lambda: np.zeros(2))
    n_assigned: np.ndarray = field(default_factory=lambda: np.zeros(2))
    busy_cores: np.ndarray = field(default_factory=lambda: np.zeros(2))
    cpu_backlog: np.ndarray = field(default_factory=lambda: np.zeros(2))
    tools_in_flight: np.ndarray = field(default_factory=lambda: np.zeros(2))
    free_gpus: np.ndarray = field(default_factory=lambda: np.zeros(2))
    idle_gpus: np.ndarray = field(default_factory=lambda: np.zeros(2))
    engine_state: np.ndarray = field(
        default_factory=lambda: np.full((2, len(MODEL_NAMES)), ENGINE_READY)
    )
    engine_ready_at: np.ndarray = field(default_factory=lambda: np.zeros((2, len(MODEL_NAMES))))
    engine_batch: np.ndarray = field(init=False)
    engine_ctx: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.engine_batch = np.zeros((2, len(MODEL_NAMES)))
        self.engine_batch[:, M] = self.batch
        self.engine_ctx = self.engine_batch * (2500 + 250)


def _call(name: str, context: str | None = None, app: str = "app") -> TaskRequest:
    return TaskRequest(
        kind="llm",
        model=M,
        prompt_tokens=2500,
        output_tokens_est=500,
        cpu_work=0.0,
        ext_latency_est=0.0,
        parent_servers=(),
        parent_bytes=(),
        rank=1.0,
        workflow_age=0.0,
        prefix_id=app,
        prefix_tokens=1000,
        call_key=(name, 0),
        context_key=(context, 0) if context else None,
    )


def test_admits_the_longest_waiting_call_where_room_is_and_defers_the_rest() -> None:
    tao = TaoScheduler()
    tao.reset(0)
    full = _View(now=0.0, batch=(6, 6))  # no room for a 3000-token request anywhere
    assert isinstance(tao.select_batch([make_decision(TABLES, full, _call("a"))])[0], Defer)
    # Five seconds later: room for exactly one more request on server 0, none on server 1.
    view = _View(now=5.0, batch=(5, 6))
    decisions = [make_decision(TABLES, view, _call(n)) for n in ("b", "a", "c")]
    answers = tao.select_batch(decisions)
    assert answers[1] == 0  # "a" has waited 5 s: it gets the one free place
    assert isinstance(answers[0], Defer) and isinstance(answers[2], Defer)
    assert tao.dp_solves == 1 and tao.deferrals == 3
    # A call that can no longer be deferred is placed all the same.
    last = make_decision(TABLES, view, _call("b"))
    last.can_defer = False
    assert tao.select_batch([last]) == [0]


def test_joint_placement_gives_the_cached_node_to_the_call_that_hits_it() -> None:
    tao = TaoScheduler()
    tao.reset(0)
    # "s" runs on server 1 (server 0 is full): its context is cached there afterwards.
    first = _View(now=0.0, batch=(6, 0))
    assert tao.select_batch([make_decision(TABLES, first, _call("s"))]) == [1]
    # Room for one request on each server, not for both calls on server 1.
    view = _View(now=20.0, batch=(5, 5))
    fresh = _call("f", app="other")  # another application: nothing of it cached anywhere
    turn = _call("t", context="s")  # continues the session of "s"
    answers = tao.select_batch([make_decision(TABLES, view, r) for r in (turn, fresh)])
    assert answers == [1, 0]  # the session's next turn gets its cache, the fresh call the rest
    assert tao.joint_admissions == 1
    # eft sees two equal servers for the fresh call and takes the first...
    assert get_policy("eft").select(make_decision(TABLES, view, fresh)) == 0
    # ...and the turn would go to its cache even with server 1 slightly busier.
    view.engine_ctx[1, M] *= 1.05
    assert tao.select_batch([make_decision(TABLES, view, turn)]) == [1]


def _metrics(workload: str, seed: int) -> dict[str, object]:
    setup = prepare("hetero-8", Scenario(workload=workload, workflows=30, rate=0.6, seed=seed))
    m = dict(run(setup, "tao", kv_policy="lru", warmup=0, cooldown=0).metrics)
    m.pop("sim_wall_time_s")
    return m


@pytest.mark.parametrize("workload", ["tool-heavy", "agentic-mix"])
def test_runs_end_to_end_and_repeats_itself_with_a_seed(workload: str) -> None:
    a = _metrics(workload, 3)
    assert a["workflows_completed"] == 30
    assert a == _metrics(workload, 3)
