"""The Ray runtime: scheduling overhead per task, and placement quality against Ray's own
default scheduling, on one emulated heterogeneous local cluster (figures in
docs/runtime.md).

    python benchmarks/bench_runtime.py [--cluster hetero-8] [--workflows 40]
        [--time-scale 0.05] [--checkpoint runs/x/best.pt] [--overhead-tasks 1000]

1. Overhead: ``--overhead-tasks`` no-op Ray tasks submitted (a) with Ray's default
   scheduling and (b) each placed by eft on the runtime's view (decision + hard node
   affinity). Reported: submit microseconds per task and end-to-end tasks per second.
   The decision cost is also read off the real runs below (``decision_s / decisions``).
2. Placement: the same jobs (seed 0) run with eft, the SCALE policy (shipped ``scale`` or
   ``--checkpoint``) and Ray's default placement. Ray's default needs Ray to place every
   task, so all three run as Ray tasks (``vehicle="task"``: a task holds the node's
   resources and has the node's agent emulate it); eft and SCALE are also run on the
   default agent-call vehicle. Reported: makespan, mean response time, failed workflows.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from scalesched.cluster import get_cluster
from scalesched.cluster.tables import ClusterTables
from scalesched.decision.features import TaskRequest, make_decision
from scalesched.policies import get_policy
from scalesched.runs.setup import Scenario, build_jobs
from scalesched.runtime import RuntimeConfig, run_jobs
from scalesched.runtime.cluster import local_cluster, map_servers
from scalesched.runtime.view import RuntimeView


def _noop() -> int:
    return 0


def overhead(spec: Any, tables: ClusterTables, n: int) -> dict[str, float]:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = map_servers(spec, ray.nodes())
    noop = ray.remote(num_cpus=1, max_retries=0)(_noop)
    ray.get([noop.remote() for _ in range(64)])  # warm the worker pools
    ray.get(
        [
            noop.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(nd, soft=False)
            ).remote()
            for nd in nodes
            for _ in range(8)
        ]
    )
    out: dict[str, float] = {}
    for label in ("ray_default", "eft_hard_affinity"):
        view = RuntimeView(tables, time_scale=1.0)
        eft = get_policy("eft")
        request = TaskRequest("tool", -1, 0, 0, 0.1, 0.0, (), (), 0.1, 0.0)
        t0 = time.perf_counter()
        refs = []
        decide = 0.0
        for _ in range(n):
            if label == "ray_default":
                refs.append(noop.remote())
                continue
            d0 = time.perf_counter()
            s = eft.select(make_decision(tables, view, request))
            # A 0.1 s tool booked on s (no jobs here: the arrays directly).
            view.est_work[s] += 0.1
            view.n_assigned[s] += 1
            view.cpu_backlog[s] += 0.1
            view.tools_in_flight[s] += 1
            decide += time.perf_counter() - d0
            strategy = NodeAffinitySchedulingStrategy(nodes[s], soft=False)
            refs.append(noop.options(scheduling_strategy=strategy).remote())
        submit = time.perf_counter() - t0
        ray.get(refs)
        total = time.perf_counter() - t0
        out[f"{label}_submit_us_per_task"] = submit / n * 1e6
        out[f"{label}_decision_us_per_task"] = decide / n * 1e6
        out[f"{label}_tasks_per_s"] = n / total
    return out


def placement(
    spec: Any, tables: ClusterTables, jobs: list[Any], scale: float, ckpt: str | None
) -> list[dict[str, Any]]:
    rows = []
    policies: list[tuple[str, str | None]] = [("eft", "eft")]
    if ckpt:
        policies.append(("scale", ckpt))
    policies.append(("ray-default", None))
    for vehicle in ("task", "actor"):
        for label, name in policies:
            if name is None and vehicle == "actor":
                continue
            cfg = RuntimeConfig(
                time_scale=scale,
                vehicle=vehicle,  # type: ignore[arg-type]
                placement="ray" if name is None else "policy",
            )
            sched = get_policy(name) if name is not None else None
            r = run_jobs(spec, jobs, sched, cfg, tables=tables)
            m = r.metrics
            n_tasks = max(1, int(m["tasks_completed"]))
            rows.append(
                {
                    "policy": label,
                    "vehicle": vehicle,
                    "makespan_s": round(float(m["makespan_s"]), 1),
                    "avg_response_time_s": round(float(m["avg_response_time_s"]), 1),
                    "p95_response_time_s": round(float(m["p95_response_time_s"]), 1),
                    "workflows_failed": m["workflows_failed"],
                    "decision_us_per_task": round(r.decision_s / n_tasks * 1e6, 1),
                    "dispatch_us_per_task": round(r.dispatch_s / n_tasks * 1e6, 1),
                    "wall_s": round(float(m["sim_wall_time_s"]), 1),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cluster", default="hetero-8")
    ap.add_argument("--workflows", type=int, default=40)
    ap.add_argument("--time-scale", type=float, default=0.05)
    ap.add_argument("--checkpoint", default=None)
    ap.add_argument("--overhead-tasks", type=int, default=1000)
    args = ap.parse_args()
    from scalesched.policies.trained import shipped_policies

    ckpt = args.checkpoint or (
        str(shipped_policies()["scale"]) if "scale" in shipped_policies() else None
    )
    spec = get_cluster(args.cluster)
    tables = ClusterTables(spec)
    jobs = build_jobs(tables, Scenario(workflows=args.workflows, seed=0))
    t0 = time.perf_counter()
    # Keep idle workers: Ray tasks of the "task" vehicle then start on warm processes.
    keep = {"idle_worker_killing_time_threshold_ms": 3_600_000, "num_workers_soft_limit": 1000}
    with local_cluster(spec, system_config=keep):
        print(f"cluster {spec.name}: {len(spec)} nodes up in {time.perf_counter() - t0:.1f} s")
        print(json.dumps(overhead(spec, tables, args.overhead_tasks)), flush=True)
        warm = RuntimeConfig(time_scale=args.time_scale, vehicle="task", placement="ray")
        run_jobs(spec, jobs, None, warm, tables=tables)  # warm-up, not reported
        placement(spec, tables, jobs, args.time_scale, ckpt)


if __name__ == "__main__":
    main()
