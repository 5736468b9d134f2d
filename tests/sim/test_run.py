"""``drive_simulation``: a simulation the caller built gives the same result as
``simulate`` and leaves the engine readable afterwards."""

from __future__ import annotations

from sim_builders import toy_jobs

from scalesched.cluster import get_cluster
from scalesched.cluster.tables import ClusterTables
from scalesched.policies import get_policy
from scalesched.sim.engine import Simulation
from scalesched.sim.run import drive_simulation, simulate

VOLATILE = ("sim_wall_time_s",)
"""Wall-clock time: the one figure two identical runs do not share."""


def test_a_built_simulation_runs_like_simulate() -> None:
    spec = get_cluster("hetero-8")
    tables = ClusterTables(spec)
    jobs = toy_jobs(12)
    expected = simulate(spec, jobs, get_policy("eft"), seed=3, tables=tables)
    sim = Simulation(spec, jobs, tables=tables, ready_order=get_policy("eft").ready_order)
    got = drive_simulation(sim, get_policy("eft"), seed=3)
    strip = lambda m: {k: v for k, v in m.items() if k not in VOLATILE}  # noqa: E731
    assert strip(got.metrics) == strip(expected.metrics)
    assert (got.response_times == expected.response_times).all()
    assert sim.n_jobs == 12 and sim.now > 0  # the engine stays readable for the caller
