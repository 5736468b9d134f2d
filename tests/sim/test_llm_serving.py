"""The simulation's LLM serving part (``sim.llm_serving``): the lazy decode events behind
the fluid token clock."""

from __future__ import annotations

from sim_builders import llm, toy_jobs, workflow

from scalesched.cluster import get_cluster
from scalesched.cluster.model import ClusterSpec, ServerSpec
from scalesched.cluster.tables import MODEL_NAMES
from scalesched.decision.cycle import Watched, drive
from scalesched.decision.features import Decision
from scalesched.policies import get_policy
from scalesched.sim.engine import Simulation
from scalesched.sim.events import DECODE
from scalesched.workload.instance import Job


def _check_live_events(sim: Simulation) -> int:
    """Every engine that decodes has exactly one live decode event in the heap, due no
    later than its head request's finish; returns how many engines were decoding."""
    decoding = 0
    for engines in sim._engines:
        for eng in engines.values():
            key = eng.server * len(MODEL_NAMES) + eng.model
            live = [e for e in sim._heap if e[2] == DECODE and e[3] == key and e[4] == eng.pending]
            if eng.n_decoding:
                decoding += 1
                assert len(live) == 1, (key, live)
                assert live[0][0] <= eng.due
            assert len(live) <= 1
    return decoding


def _run_checked(sim: Simulation) -> int:
    """Drive ``sim`` with eft, checking the live events at every decision; returns how
    many decoding engines the checks saw."""
    seen = [0]

    def check(_: Decision, __: object) -> None:
        seen[0] += _check_live_events(sim)

    policy = get_policy("eft")
    policy.reset(0)
    drive(sim, Watched(policy, check))
    assert sim.done
    assert all(not e.marks and not e.n_decoding for es in sim._engines for e in es.values())
    return seen[0]


def test_a_short_request_joining_a_long_one_is_timed_at_its_own_finish() -> None:
    """A newcomer that finishes before the batch's head moves the finish earlier: a new
    decode event must be pushed for it (waiting for the live one would finish it late)."""
    server = ServerSpec("g0", "custom", "A100-80G", 1, 4, 1.0, 100.0, 8.0)
    long_call = [Job(0, 0.0, workflow([llm("a", out=3000)], {}, "long"))]
    short_calls = [
        Job(i, 5.0 + i, workflow([llm("a", out=20)], {}, f"short-{i}")) for i in range(1, 6)
    ]
    sim = Simulation(ClusterSpec("one", (server,)), long_call + short_calls)
    assert _run_checked(sim) >= 5  # the long call decodes at every short call's decision
    assert sim.decode_retimes == 0  # each short call moved the finish earlier


def test_a_decoding_engine_always_has_one_live_decode_event() -> None:
    """Lazy re-timing must never lose a finish (no live event) nor time one late: checked
    at every decision of a busy run on a heterogeneous cluster."""
    sim = Simulation(get_cluster("hetero-16"), toy_jobs(60, gap=0.02))
    assert _run_checked(sim) > 0  # the check ran on decoding engines, not only idle ones
    assert sim.decode_retimes > 0  # the lazy path (re-timing a live event) was taken
