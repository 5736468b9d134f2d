"""Property tests: the simulator's invariants over random workflows, clusters and policies."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sim_builders import workflow

from scalesched.cluster.model import ClusterSpec, ServerSpec
from scalesched.cluster.tables import MODEL_INDEX
from scalesched.kernel.records import TaskRecord
from scalesched.policies import HEURISTICS, get_policy
from scalesched.sim.engine import Simulation
from scalesched.sim.run import summarise
from scalesched.workload.instance import Job, TaskInstance

SERVERS = [
    ServerSpec("h100x4", "h100-80g-x4", "H100-80G", 4, 8, 1.0, 100.0, 8.0),
    ServerSpec("a100x1", "a100-80g-x1", "A100-80G", 1, 4, 1.0, 100.0, 8.0),
    ServerSpec("l4x2", "l4-24g-x2", "L4-24G", 2, 2, 1.0, 100.0, 8.0),
    ServerSpec("cpu", "cpu-32c", None, 0, 2, 1.5, 25.0, 0.0),
]
MODELS = ["phi-2", "llama-2-7b", "codellama-34b", "llama-2-70b"]


@st.composite
def tasks(draw: st.DrawFn, i: int) -> TaskInstance:
    if draw(st.booleans()):
        out = draw(st.integers(1, 600))
        return TaskInstance(
            f"t{i}",
            "llm",
            model=draw(st.sampled_from(MODELS)),
            prompt_tokens=draw(st.integers(1, 3000)),
            output_tokens=out,
            output_tokens_est=draw(st.integers(1, 600)),
        )
    ext = draw(st.sampled_from([0.0, 0.3, 1.7]))
    return TaskInstance(
        f"t{i}",
        "tool",
        tool="x",
        cpu_work=draw(st.sampled_from([0.0, 0.2, 2.5])),
        ext_latency=ext,
        ext_latency_est=ext,
    )


@st.composite
def workflows(draw: st.DrawFn, name: str) -> object:
    n = draw(st.integers(1, 9))
    ts = [draw(tasks(i)) for i in range(n)]
    edges = {}
    for c in range(1, n):
        for p in range(c):
            if draw(st.integers(0, 3)) == 0:
                edges[(p, c)] = float(draw(st.sampled_from([0, 1e3, 1e8])))
    # Some tasks are revealed at run time by one of their parents.
    for c in range(n):
        ps = [p for (p, cc) in edges if cc == c]
        if ps and draw(st.booleans()):
            t = ts[c]
            ts[c] = TaskInstance(
                **{**{f: getattr(t, f) for f in t.__slots__}, "revealed_by": ps[0]}
            )
    return workflow(ts, edges, name)


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[ClusterSpec, list[Job], str, int]:
    picks = draw(st.lists(st.integers(0, len(SERVERS) - 1), min_size=1, max_size=6))
    servers = tuple(
        ServerSpec(
            f"{SERVERS[k].name}-{i}",
            *[
                getattr(SERVERS[k], f)
                for f in (
                    "type",
                    "gpu_type",
                    "gpus",
                    "cpu_cores",
                    "core_speed",
                    "nic_gbps",
                    "load_gbs",
                )
            ],
        )
        for i, k in enumerate([0, *picks])  # server 0 can host every model
    )
    n_jobs = draw(st.integers(1, 8))
    arrivals = sorted(draw(st.lists(st.floats(0, 20), min_size=n_jobs, max_size=n_jobs)))
    jobs = [Job(i, a, draw(workflows(f"w{i}"))) for i, a in enumerate(arrivals)]
    return (
        ClusterSpec("random", servers),
        jobs,
        draw(st.sampled_from(sorted(HEURISTICS))),
        draw(st.integers(0, 2**16)),
    )


def assert_each_task_once_after_its_parents(
    sim: Simulation, jobs: list[Job]
) -> dict[tuple[int, str], TaskRecord]:
    """Every task ran exactly once, never before its parents finished (and their data
    arrived); returns the trace by (workflow, task)."""
    total = sum(len(j.workflow.tasks) for j in jobs)
    keys = [(r.workflow, r.task) for r in sim.trace]
    assert len(keys) == len(set(keys)) == total
    by_key = {(r.workflow, r.task): r for r in sim.trace}
    for job in jobs:
        wf = job.workflow
        for i, task in enumerate(wf.tasks):
            rec = by_key[(job.workflow_id, task.id)]
            assert job.arrival <= rec.ready <= rec.landed <= rec.start <= rec.end
            for p in wf.parents[i]:
                assert by_key[(job.workflow_id, wf.tasks[p].id)].end <= rec.ready
    return by_key


def overlaps(intervals: list[tuple[float, float, float]]) -> float:
    """Largest total weight of intervals [start, end) open at one instant."""
    points = sorted(
        [(s, 1, w) for s, e, w in intervals if e > s]
        + [(e, 0, -w) for s, e, w in intervals if e > s]
    )
    best = level = 0.0
    for _, _, w in points:
        level += w
        best = max(best, level)
    return best


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_simulator_invariants(case: tuple[ClusterSpec, list[Job], str, int]) -> None:
    cluster, jobs, policy_name, seed = case
    sim = Simulation(
        cluster, jobs, record_trace=True, ready_order=get_policy(policy_name).ready_order
    )
    policy = get_policy(policy_name)
    policy.reset(seed)
    clock = [sim.now]
    d = sim.next_decision()
    while d is not None:
        # Schedulers see estimates only, never a task's true output length.
        assert not hasattr(d.task, "output_tokens")
        sim.apply(policy.select(d))
        d = sim.next_decision()
        clock.append(sim.now)
    assert clock == sorted(clock), "the clock went back"
    result = summarise(sim, policy=policy_name, wall_s=0.0)

    # Every arrived workflow completes; every task runs exactly once.
    assert result.metrics["workflows_completed"] == len(jobs)
    by_key = assert_each_task_once_after_its_parents(sim, jobs)

    # A server never exceeds its cores, its engines' batch cap or their KV memory.
    tables = sim.tables
    cpu: dict[int, list[tuple[float, float, float]]] = defaultdict(list)
    llm: dict[tuple[int, int], list[tuple[float, float, float]]] = defaultdict(list)
    count: dict[tuple[int, int], list[tuple[float, float, float]]] = defaultdict(list)
    for job in jobs:
        for task in job.workflow.tasks:
            rec = by_key[(job.workflow_id, task.id)]
            if task.kind == "tool" and task.cpu_work > 0:
                speed = cluster.servers[rec.server].core_speed
                cpu[rec.server].append((rec.start, rec.start + task.cpu_work / speed, 1.0))
            elif task.kind == "llm":
                m = MODEL_INDEX[task.model or ""]
                assert tables.feasible[rec.server, m]
                need = float(task.prompt_tokens + task.output_tokens)
                llm[(rec.server, m)].append((rec.start, rec.end, need))
                count[(rec.server, m)].append((rec.start, rec.end, 1.0))
    for s, iv in cpu.items():
        assert overlaps(iv) <= cluster.servers[s].cpu_cores + 1e-9
    for (s, m), iv in llm.items():
        k = tables.engine_class[s, m]
        assert overlaps(count[(s, m)]) <= tables.max_batch[k]
        if overlaps(count[(s, m)]) > 1:
            assert overlaps(iv) <= tables.kv_capacity[k] + max(w for _, _, w in iv)

    # No response time is below its contention-free lower bound.
    assert (result.response_times >= result.lower_bounds * (1 - 1e-9) - 1e-12).all()
