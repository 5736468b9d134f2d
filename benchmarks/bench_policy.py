"""Decision latency of the SCALE policy against eft, one decision at a time on one core,
and PPO training throughput.

    taskset -c 0 python benchmarks/bench_policy.py [--checkpoint runs/x/best.pt]

Latency covers what a scheduler pays per placement: building the decision's features from
the cluster state (shared by both) and choosing (eft: an argmin; SCALE: the network's
forward pass and an argmax). Both are measured on the same decisions, interleaved.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import torch

from scalesched.cluster import get_cluster
from scalesched.decision.features import (
    SERVER_FEATURES,
    TASK_FEATURES,
    ClusterTables,
    make_decision,
)
from scalesched.eval.setup import Scenario, build_jobs
from scalesched.nn import build_network
from scalesched.nn.scheduler import NetworkScheduler, load_scheduler
from scalesched.policies import get_policy
from scalesched.sim.engine import Simulation


def decision_latency(n: int, scale: NetworkScheduler, reps: int) -> dict[str, float]:
    spec = get_cluster(f"hetero-{n}")
    tables = ClusterTables(spec)
    jobs = build_jobs(tables, Scenario(workflows=max(40, n // 2), seed=0))
    eft = get_policy("eft")
    sim = Simulation(spec, jobs, tables=tables)
    requests = []
    d = sim.next_decision()
    while d is not None and len(requests) < 300:
        requests.append(d.task)
        sim.apply(eft.select(d))
        d = sim.next_decision()
    t_eft, t_scale = [], []
    for i in range(reps):
        req = requests[i % len(requests)]
        t0 = time.perf_counter()
        eft.select(make_decision(tables, sim, req))
        t1 = time.perf_counter()
        scale.select(make_decision(tables, sim, req))
        t2 = time.perf_counter()
        t_eft.append(t1 - t0)
        t_scale.append(t2 - t1)
    e, s = np.array(t_eft) * 1e3, np.array(t_scale) * 1e3
    return {
        "n": n,
        "eft_p50_ms": float(np.percentile(e, 50)),
        "eft_p99_ms": float(np.percentile(e, 99)),
        "scale_p50_ms": float(np.percentile(s, 50)),
        "scale_p99_ms": float(np.percentile(s, 99)),
    }


def training_throughput(steps: int) -> float:
    from tempfile import TemporaryDirectory

    from scalesched.train.ppo import Trainer, load_config

    cfg = load_config(None, total_steps=steps, validate_every=0, validation_sizes=[])
    with TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        state = Trainer(cfg, Path(tmp)).train()
        return state.global_step / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--checkpoint", default=None, help="a trained policy (default: untrained)")
    parser.add_argument("--sizes", default="16,48,256,1024")
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--train-steps", type=int, default=8192)
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.checkpoint:
        scale = load_scheduler(args.checkpoint)
    else:
        scale = NetworkScheduler(build_network("scale", TASK_FEATURES, SERVER_FEATURES))
    print(f"{os.cpu_count()} cores, torch {torch.__version__}, 1 thread")
    print("| N | eft p50 ms | eft p99 ms | SCALE p50 ms | SCALE p99 ms | p50 ratio |")
    print("|---|---|---|---|---|---|")
    for n in (int(x) for x in args.sizes.split(",")):
        r = decision_latency(n, scale, args.reps)
        print(
            f"| {n} | {r['eft_p50_ms']:.3f} | {r['eft_p99_ms']:.3f} | {r['scale_p50_ms']:.3f} "
            f"| {r['scale_p99_ms']:.3f} | {r['scale_p50_ms'] / r['eft_p50_ms']:.1f}x |"
        )
    if args.train_steps:
        rate = training_throughput(args.train_steps)
        print(
            f"\nPPO training throughput (hetero-16, 8 envs, updates included): "
            f"{rate:,.0f} env steps/s"
        )


if __name__ == "__main__":
    main()
