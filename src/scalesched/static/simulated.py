"""eft, SCALE or any other simulator policy on the static problem, on the same ground as
HEFT and CPoP.

The problem is mapped into the simulator: one CPU-only server per network node with one
core of ``core_speed`` = the node's speed, no latency, and a single job arriving at t = 0
whose tasks are ``tool`` tasks with ``cpu_work`` = cost and whose edges carry the data
sizes. The simulator models a link a-b as ``min(NIC_a, NIC_b)``; each node's NIC is the
fastest of its links, which reproduces every bandwidth exactly when the network's
bandwidths factor as ``min(x_a, x_b)`` (e.g. one bandwidth for all links) and otherwise
over-estimates the slower links (``Schedule.info["bandwidth_exact"]`` says which).

The simulator's placement (each task's node and the order each node runs its tasks in) is
then re-timed on the exact network: every task starts when its node has finished the
previous one and the data of every parent has arrived (parent end + size / bandwidth),
and runs ``cost / speed``. That is the makespan reported, comparable with HEFT's; the
simulator's own is kept in ``Schedule.info["sim_makespan"]`` (the simulator starts a
transfer when the child is placed, i.e. when its last parent finishes, not when each
parent finishes).
"""

from __future__ import annotations

import math

from scalesched.cluster.model import ClusterSpec, ServerSpec
from scalesched.decision.scheduler import Scheduler
from scalesched.static.problem import StaticProblem
from scalesched.static.schedule import Schedule, ScheduledTask
from scalesched.workload.instance import Job, TaskInstance, WorkflowInstance

EXACT_REL_TOL = 1e-12


def nic_rates(prob: StaticProblem) -> tuple[list[float], bool]:
    """Per node the NIC rate (bytes/s) the simulator gets, and whether ``min`` of two
    nodes' rates equals every link's bandwidth."""
    n = prob.n_nodes
    if n == 1:
        return [1.0], True
    bw = prob.bandwidth
    rate = [max(bw[a][b] for b in range(n) if b != a) for a in range(n)]
    exact = all(
        math.isclose(min(rate[a], rate[b]), bw[a][b], rel_tol=EXACT_REL_TOL)
        for a in range(n)
        for b in range(a + 1, n)
    )
    return rate, exact


def simulator_problem(prob: StaticProblem) -> tuple[ClusterSpec, Job, bool]:
    """The cluster and the single job that stand for ``prob`` in the simulator."""
    rate, exact = nic_rates(prob)
    servers = tuple(
        ServerSpec(
            name=str(node),
            type="static-node",
            gpu_type=None,
            gpus=0,
            cpu_cores=1,
            core_speed=prob.speed[p],
            nic_gbps=rate[p] * 8 / 1e9,
            load_gbs=0.0,
        )
        for p, node in enumerate(prob.nodes)
    )
    cluster = ClusterSpec(name="static-network", servers=servers, network_latency_s=0.0)
    order = list(prob.topo)
    new = {i: k for k, i in enumerate(order)}
    tasks = tuple(
        TaskInstance(id=str(k), kind="tool", tool="static", cpu_work=prob.cost[i])
        for k, i in enumerate(order)
    )
    parents = tuple(tuple(new[u] for u, _ in prob.parents[i]) for i in order)
    children = tuple(tuple(new[v] for v, _ in prob.children[i]) for i in order)
    edge_bytes = {(new[u], new[i]): size for i in order for u, size in prob.parents[i] if size > 0}
    wf = WorkflowInstance(
        name="static",
        pattern="static",
        tasks=tasks,
        parents=parents,
        children=children,
        edge_bytes=edge_bytes,
    )
    return cluster, Job(workflow_id=0, arrival=0.0, workflow=wf), exact


def retime(prob: StaticProblem, node_of: list[int], sequence: list[list[int]]) -> list[float]:
    """Start times of a placement on the exact network: each node runs ``sequence[p]`` in
    order, each task as soon as its node is free and its inputs have arrived."""
    n = prob.n_tasks
    start = [math.nan] * n
    finish = [math.nan] * n
    nxt = [0] * prob.n_nodes
    free = [0.0] * prob.n_nodes
    missing = [len(p) for p in prob.parents]
    # Kahn's algorithm over precedence edges plus each node's sequence.
    head_ready = [False] * n
    for seq in sequence:
        if seq:
            head_ready[seq[0]] = True
    stack = [i for i in range(n) if missing[i] == 0 and head_ready[i]]
    done = 0
    while stack:
        i = stack.pop()
        p = node_of[i]
        ready = free[p]
        for u, size in prob.parents[i]:
            arrive = finish[u] + prob.transfer_time(size, node_of[u], p)
            if arrive > ready:
                ready = arrive
        start[i] = ready
        finish[i] = ready + prob.exec_time(i, p)
        free[p] = finish[i]
        done += 1
        nxt[p] += 1
        if nxt[p] < len(sequence[p]):
            j = sequence[p][nxt[p]]
            head_ready[j] = True
            if missing[j] == 0:
                stack.append(j)
        for v, _ in prob.children[i]:
            missing[v] -= 1
            if missing[v] == 0 and head_ready[v]:
                stack.append(v)
    if done != n:
        raise RuntimeError("the node sequences contradict the task dependencies")
    return start


def simulated_schedule(prob: StaticProblem, scheduler: Scheduler, *, seed: int = 0) -> Schedule:
    """Run ``scheduler`` in the simulator on ``prob`` and re-time its placement exactly."""
    from scalesched.sim.run import simulate

    cluster, job, exact = simulator_problem(prob)
    result = simulate(cluster, [job], scheduler, seed=seed, record_trace=True)
    order = list(prob.topo)
    node_of = [-1] * prob.n_tasks
    sim_start = [0.0] * prob.n_tasks
    for rec in result.trace:
        i = order[int(rec.task)]
        node_of[i] = rec.server
        sim_start[i] = rec.start
    if min(node_of, default=0) < 0:
        raise RuntimeError("the simulator did not run every task")
    sequence: list[list[int]] = [[] for _ in range(prob.n_nodes)]
    for i in sorted(range(prob.n_tasks), key=lambda i: (sim_start[i], prob.topo_pos[i])):
        sequence[node_of[i]].append(i)
    start = retime(prob, node_of, sequence)
    tasks = (
        ScheduledTask(
            prob.nodes[node_of[i]],
            prob.tasks[i],
            start[i],
            start[i] + prob.exec_time(i, node_of[i]),
        )
        for i in range(prob.n_tasks)
    )
    return Schedule.from_tasks(
        prob.nodes,
        tasks,
        policy=scheduler.name,
        info={
            "sim_makespan": float(result.metrics["makespan_s"]),
            "bandwidth_exact": exact,
        },
    )
