from __future__ import annotations

import numpy as np
import pytest
from sim_builders import llm, tool, toy_jobs, workflow

from scalesched.cluster import engine_perf, get_cluster
from scalesched.cluster.model import ClusterSpec, ServerSpec
from scalesched.cluster.tables import MODEL_INDEX, ClusterTables
from scalesched.decision.features import Decision
from scalesched.decision.scheduler import BaseScheduler
from scalesched.errors import InputError
from scalesched.policies import get_policy
from scalesched.sim.engine import SchedulingError, Simulation
from scalesched.sim.run import simulate
from scalesched.workload.instance import Job


def gpu_server(name: str, gpu: str = "A100-80G", gpus: int = 1, cores: int = 4) -> ServerSpec:
    return ServerSpec(name, "custom", gpu, gpus, cores, 1.0, 100.0, 8.0)


def cpu_server(name: str, cores: int = 2, speed: float = 1.0) -> ServerSpec:
    return ServerSpec(name, "custom", None, 0, cores, speed, 25.0, 0.0)


class Fixed(BaseScheduler):
    """Places task i of every workflow on ``servers[i]``."""

    name = "fixed"

    def __init__(self, servers: list[int]) -> None:
        self.servers = servers
        self.i = 0

    def select(self, decision: Decision) -> int:
        s = self.servers[self.i % len(self.servers)]
        self.i += 1
        return s


def test_single_llm_request_takes_load_prefill_and_decode() -> None:
    cluster = ClusterSpec("one", (gpu_server("g0"),))
    job = Job(0, 0.0, workflow([llm("a", prompt=700, out=150)], {}))
    result = simulate(cluster, [job], get_policy("eft"))
    eng = engine_perf("llama-2-7b", "A100-80G", 1)
    ctx = 700 + 150 // 2
    step = eng.decode_step_s(1, ctx)
    expected = eng.load_s(8.0) + eng.prefill_s(700) + 150 * step
    assert result.response_times[0] == pytest.approx(expected, rel=1e-9)
    assert result.metrics["model_loads"] == 1
    # The lower bound leaves out only the load.
    assert result.lower_bounds[0] == pytest.approx(expected - eng.load_s(8.0), rel=1e-9)


def test_tool_runs_cpu_then_external_latency_and_queues_for_cores() -> None:
    cluster = ClusterSpec("cpu", (cpu_server("c0", cores=1, speed=2.0),))
    jobs = [Job(i, 0.0, workflow([tool("t", cpu=1.0, ext=0.25)], {}, f"w{i}")) for i in range(3)]
    result = simulate(cluster, jobs, get_policy("eft"))
    # One core at speed 2: CPU phases end at 0.5, 1.0, 1.5; each then waits 0.25 s.
    assert sorted(result.response_times) == pytest.approx([0.75, 1.25, 1.75])


def test_transfer_between_servers_costs_latency_plus_bytes_over_bandwidth() -> None:
    cluster = ClusterSpec("two", (cpu_server("a"), cpu_server("b")), network_latency_s=0.001)
    wf = workflow([tool("x", cpu=1.0), tool("y", cpu=1.0)], {(0, 1): 25e9 / 8})
    same = simulate(cluster, [Job(0, 0.0, wf)], Fixed([0, 0]))
    apart = simulate(cluster, [Job(0, 0.0, wf)], Fixed([0, 1]))
    assert same.response_times[0] == pytest.approx(2.0)
    assert apart.response_times[0] == pytest.approx(2.0 + 0.001 + 1.0)
    assert apart.metrics["bytes_moved"] == pytest.approx(25e9 / 8)


def test_continuous_batching_shares_decode_steps() -> None:
    cluster = ClusterSpec("one", (gpu_server("g0"),))
    jobs = [Job(i, 0.0, workflow([llm("a", prompt=100, out=400)], {}, f"w{i}")) for i in range(8)]
    result = simulate(cluster, jobs, get_policy("eft"))
    eng = engine_perf("llama-2-7b", "A100-80G", 1)
    load = float(ClusterTables(cluster).load_s[0, MODEL_INDEX["llama-2-7b"]])
    alone = load + eng.prefill_s(100) + 400 * eng.decode_step_s(1, 300)
    together = load + eng.prefill_s(100) + 400 * eng.decode_step_s(8, 8 * 300)
    # All eight load once, prefill at once and share every decode step of a batch of 8.
    assert result.response_times == pytest.approx([together] * 8, rel=1e-9)
    # So each is slower than alone by the batch's decode-step ratio (about 8%), which is
    # far sooner than eight in a row.
    decode_alone = alone - load - eng.prefill_s(100)
    assert (together - alone) / decode_alone == pytest.approx(
        eng.decode_step_s(8, 2400) / eng.decode_step_s(1, 300) - 1, rel=1e-9
    )
    assert together - alone > 0.05 * decode_alone
    assert together < load + 8 * decode_alone / 4


def test_lru_eviction_reloads_models_on_a_small_server() -> None:
    # One 80 GB GPU holds 34b (67.5 GB) or 7b, not both: alternating forces reloads.
    cluster = ClusterSpec("one", (gpu_server("g0"),))
    tasks = [llm(f"t{i}", "codellama-34b" if i % 2 else "llama-2-7b", 200, 20) for i in range(4)]
    chain = workflow(tasks, {(i, i + 1): 0.0 for i in range(3)})
    result = simulate(cluster, [Job(0, 0.0, chain)], get_policy("eft"))
    assert result.metrics["model_loads"] == 4


def test_kv_memory_bounds_concurrency() -> None:
    cluster = ClusterSpec("one", (gpu_server("g0", gpus=1),))
    eng = engine_perf("codellama-34b", "A100-80G", 1)
    per_request = 2000 + 2000
    fit = eng.kv_capacity_tokens // per_request
    assert fit >= 1
    jobs = [
        Job(i, 0.0, workflow([llm("a", "codellama-34b", 2000, 2000)], {}, f"w{i}"))
        for i in range(fit + 3)
    ]
    sim = Simulation(cluster, jobs, record_trace=True)
    sched = get_policy("eft")
    d = sim.next_decision()
    while d is not None:
        sim.apply(sched.select(d))
        d = sim.next_decision()
    starts = sorted(r.start for r in sim.trace)
    # Exactly `fit` requests are admitted at once; the rest wait for memory.
    assert sum(1 for s in starts if s == starts[0]) == fit


def test_masked_server_is_refused() -> None:
    cluster = ClusterSpec("mix", (cpu_server("c"), gpu_server("g")))
    job = Job(0, 0.0, workflow([llm("a")], {}))
    with pytest.raises(SchedulingError):
        simulate(cluster, [job], Fixed([0]))


def test_model_no_server_can_host_is_input_error() -> None:
    cluster = ClusterSpec("small", (gpu_server("g", gpu="L4-24G"),))
    job = Job(0, 0.0, workflow([llm("a", "llama-2-70b")], {}))
    with pytest.raises(InputError, match="llama-2-70b"):
        simulate(cluster, [job], get_policy("eft"))


def test_same_input_same_numbers() -> None:
    cluster = get_cluster("hetero-8")
    jobs = toy_jobs(150)
    a = simulate(cluster, jobs, get_policy("random"), seed=3).metrics
    b = simulate(cluster, jobs, get_policy("random"), seed=3).metrics
    a.pop("sim_wall_time_s")
    b.pop("sim_wall_time_s")
    assert a == b


def test_eft_beats_random_on_a_heterogeneous_cluster() -> None:
    cluster = get_cluster("hetero-16")
    jobs = toy_jobs(600, gap=0.1)
    eft = simulate(cluster, jobs, get_policy("eft")).metrics["avg_response_time_s"]
    rnd = simulate(cluster, jobs, get_policy("random")).metrics["avg_response_time_s"]
    assert isinstance(eft, float) and isinstance(rnd, float)
    assert eft < 0.7 * rnd


@pytest.mark.parametrize(
    "name", ["random", "round_robin", "least_loaded", "shortest_queue", "eft", "heft_online"]
)
def test_every_policy_completes_every_workflow(name: str) -> None:
    cluster = get_cluster("hetero-8")
    jobs = toy_jobs(60)
    result = simulate(cluster, jobs, get_policy(name), seed=1)
    assert result.metrics["workflows_completed"] == 60
    assert result.metrics["tasks_completed"] == 300
    assert np.all(result.response_times >= result.lower_bounds * (1 - 1e-9))


def test_capacity_is_cached_per_workload_spec_not_per_name(tmp_path: object) -> None:
    import json
    from pathlib import Path

    from scalesched.cluster.tables import ClusterTables
    from scalesched.runs.setup import Scenario, build_jobs

    def one_task_file(path: Path, runtime: float) -> str:
        path.write_text(
            json.dumps(
                {
                    "name": "same-name",
                    "workflow": {
                        "specification": {
                            "tasks": [{"name": "t", "id": "t", "parents": [], "children": []}],
                            "files": [],
                        },
                        "execution": {"tasks": [{"id": "t", "runtimeInSeconds": runtime}]},
                    },
                }
            )
        )
        return str(path)

    base = Path(str(tmp_path))
    short = one_task_file(base / "a.json", 1.0)
    long = one_task_file(base / "b.json", 10.0)
    tables = ClusterTables(get_cluster("hetero-4"))
    fast = build_jobs(tables, Scenario(workload=short, workflows=50, seed=0))
    slow = build_jobs(tables, Scenario(workload=long, workflows=50, seed=0))
    # Ten times the work per workflow: arrivals ten times sparser at the same load.
    assert slow[-1].arrival == pytest.approx(10 * fast[-1].arrival, rel=1e-6)
