"""Static list scheduling: one DAG on a fixed heterogeneous network.

No arrivals and no contention beyond the schedule itself. The API speaks SAGA's
conventions (``anrg-saga``): a task graph is a ``networkx.DiGraph`` whose node ``weight``
is a task's cost and edge ``weight`` a data size; a network is a ``networkx.Graph`` whose
node ``weight`` is a speed and edge ``weight`` a bandwidth; execution takes cost / speed,
a transfer size / bandwidth, free on one node.

>>> from scalesched.static import heft, cpop, lower_bound, static_schedule
>>> s = heft(task_graph, network)            # doctest: +SKIP
>>> s.makespan, s["node-a"]                  # doctest: +SKIP

``heft`` and ``cpop`` follow Topcuoglu, Hariri and Wu (2002); ``static_schedule`` also runs
eft, a trained SCALE checkpoint or any simulator policy on the same problem (see
:mod:`scalesched.static.simulated`), and ``lower_bound`` is the contention-free bound.
See docs/static.md.
"""

from __future__ import annotations

import networkx as nx

from scalesched.decision.scheduler import Scheduler
from scalesched.errors import InputError
from scalesched.static.io import load_network, load_task_graph, task_graph_from_workflow
from scalesched.static.listsched import (
    Convention,
    cpop,
    cpop_problem,
    heft,
    heft_problem,
    lower_bound,
    lower_bound_problem,
)
from scalesched.static.problem import StaticProblem, build_problem
from scalesched.static.schedule import Schedule, ScheduledTask, ScheduleError, validate_schedule

LIST_SCHEDULERS = ("heft", "cpop")


def static_schedule(
    task_graph: nx.DiGraph,
    network: nx.Graph,
    policy: str | Scheduler = "heft",
    *,
    seed: int = 0,
    convention: Convention = "published",
) -> Schedule:
    """Schedule ``task_graph`` on ``network`` with ``heft``, ``cpop``, or a simulator policy:
    a name (``eft``, any heuristic of ``scalesched policies``, a shipped trained policy), a
    checkpoint path, or a :class:`~scalesched.decision.scheduler.Scheduler` object. ``seed``
    seeds a policy's random choices; ``convention`` applies to heft and cpop."""
    prob = build_problem(task_graph, network)
    return schedule_problem(prob, policy, seed=seed, convention=convention)


def schedule_problem(
    prob: StaticProblem,
    policy: str | Scheduler = "heft",
    *,
    seed: int = 0,
    convention: Convention = "published",
) -> Schedule:
    """:func:`static_schedule` on an already built problem."""
    from scalesched.static.simulated import simulated_schedule

    if isinstance(policy, str):
        if policy == "heft":
            return heft_problem(prob, convention)
        if policy == "cpop":
            return cpop_problem(prob, convention)
        from scalesched.policies import get_policy, list_policies

        try:
            scheduler = get_policy(policy)
        except InputError as exc:
            if not exc.message.startswith("unknown policy"):
                raise
            known = ", ".join(["heft", "cpop", *(name for name, _ in list_policies())])
            raise InputError(
                "--policy",
                "policy",
                f"unknown policy {policy!r}; known: {known}, or a checkpoint path",
            ) from None
        label = policy
    else:
        scheduler, label = policy, policy.name
    if not scheduler.supports(prob.n_nodes):
        reason = str(scheduler.unsupported_reason(prob.n_nodes)).replace(scheduler.name, label, 1)
        raise InputError("--policy", "policy", f"{reason}; the network has {prob.n_nodes} nodes")
    return simulated_schedule(prob, scheduler, seed=seed)


__all__ = [
    "LIST_SCHEDULERS",
    "Schedule",
    "ScheduleError",
    "ScheduledTask",
    "StaticProblem",
    "build_problem",
    "cpop",
    "heft",
    "load_network",
    "load_task_graph",
    "lower_bound",
    "lower_bound_problem",
    "schedule_problem",
    "static_schedule",
    "task_graph_from_workflow",
    "validate_schedule",
]
