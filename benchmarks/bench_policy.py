"""Decision latency of the SCALE policy against eft, one decision at a time on one core;
the candidate acting paths side by side; batched scoring; PPO training throughput.

    taskset -c 0 nice -n 5 python benchmarks/bench_policy.py [--checkpoint runs/x/best.pt]

Latency covers what a scheduler pays per placement: building the decision's features from
the cluster state (shared by all) and choosing (eft: an argmin; SCALE: the network's logits
and a draw). eft, SCALE through PyTorch (``fast=False``) and SCALE through the numpy actor
(the default) are measured on the same decisions, each SCALE path interleaved with eft.

The candidates table times features -> logits alone, on the same decisions, for each way of
running the actor: eager PyTorch under ``inference_mode`` (what ``fast=False`` does),
TorchScript (trace, freeze, ``optimize_for_inference``), ``torch.compile`` (inductor, one
compile per N) and the numpy actor (``scalesched.nn.fast``), each with its largest logit
difference from eager.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from scalesched.cluster import get_cluster
from scalesched.cluster.tables import ClusterTables
from scalesched.decision.cycle import Watched, drive
from scalesched.decision.features import (
    SERVER_FEATURES,
    TASK_FEATURES,
    Decision,
    TaskRequest,
    make_decision,
)
from scalesched.nn import ScaleNet, build_network
from scalesched.nn.fast import FastScaleActor
from scalesched.nn.scheduler import BatchedNetworkScheduler, NetworkScheduler
from scalesched.policies import get_policy
from scalesched.sim.engine import Simulation
from scalesched.sim.run import simulate
from scalesched.sim.scenario import Scenario, build_jobs

RATE_PER_SERVER = 0.13
"""Workflows per second per server: about load 0.7 by hetero-48's measured capacity
(8.8 wf/s), extrapolated linearly, since larger presets have no measured capacity."""


def recorded_decisions(n: int, count: int = 300) -> tuple[ClusterTables, Simulation, list]:
    """The cluster's tables, a simulation left part-way, and ``count`` task requests eft
    placed on the way there (decisions are rebuilt from them on the final state)."""
    spec = get_cluster(f"hetero-{n}")
    tables = ClusterTables(spec)
    jobs = build_jobs(tables, Scenario(workflows=max(40, n // 2), rate=RATE_PER_SERVER * n, seed=0))
    eft = get_policy("eft")
    sim = Simulation(spec, jobs, tables=tables)
    requests: list[TaskRequest] = []
    recorder = Watched(eft, lambda d, _: requests.append(d.task))
    drive(sim, recorder, until=lambda: len(requests) >= count)
    return tables, sim, requests


def decision_latency(
    n: int, torch_path: NetworkScheduler, fast_path: NetworkScheduler, reps: int
) -> dict[str, float]:
    tables, sim, requests = recorded_decisions(n)
    eft = get_policy("eft")
    times: dict[str, list[float]] = {"eft": [], "torch": [], "fast": []}
    # Two passes, each interleaved with eft, so neither SCALE path runs right after the
    # other (the eager network's working set would evict the numpy actor's from cache).
    for name, scale in (("torch", torch_path), ("fast", fast_path)):
        for i in range(reps):
            req = requests[i % len(requests)]
            t0 = time.perf_counter()
            eft.select(make_decision(tables, sim, req))
            t1 = time.perf_counter()
            scale.select(make_decision(tables, sim, req))
            t2 = time.perf_counter()
            times["eft"].append(t1 - t0)
            times[name].append(t2 - t1)
    row: dict[str, float] = {"n": n}
    for name, ts in times.items():
        ms = np.array(ts) * 1e3
        row[f"{name}_p50_ms"] = float(np.percentile(ms, 50))
        row[f"{name}_p99_ms"] = float(np.percentile(ms, 99))
    return row


class _Actor(nn.Module):
    """The network's logits alone (no critic), as one module for tracing and compiling."""

    def __init__(self, net: ScaleNet) -> None:
        super().__init__()
        self.net = net

    def forward(self, task: Tensor, servers: Tensor, mask: Tensor, n: Tensor) -> Tensor:
        return self.net(task, servers, mask, n, need_value=False).logits


def _tensors(d: Decision) -> tuple[Tensor, ...]:
    return (
        torch.as_tensor(d.task_features, dtype=torch.float32)[None],
        torch.as_tensor(d.server_features, dtype=torch.float32)[None],
        torch.as_tensor(d.mask)[None],
        torch.tensor([d.n_servers]),
    )


def forward_candidates(n: int, net: ScaleNet, reps: int, compile_too: bool) -> list[str]:
    """Markdown rows: features -> logits p50/p99 per candidate at ``n`` servers."""
    tables, sim, requests = recorded_decisions(n, count=100)
    decisions = [make_decision(tables, sim, r) for r in requests]
    for d in decisions:
        d.server_features  # built once, outside the timing  # noqa: B018
    actor = _Actor(net).eval()

    def eager(d: Decision) -> np.ndarray:
        with torch.inference_mode():
            return actor(*_tensors(d))[0].numpy()

    candidates: dict[str, Callable[[Decision], np.ndarray]] = {"eager (inference_mode)": eager}
    with torch.inference_mode(False), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.optimize_for_inference(
            torch.jit.freeze(torch.jit.trace(actor, _tensors(decisions[0])).eval())
        )

    def script(d: Decision) -> np.ndarray:
        with torch.inference_mode():
            return traced(*_tensors(d))[0].numpy()

    candidates["TorchScript (trace + freeze)"] = script
    if compile_too:
        try:
            compiled = torch.compile(actor, dynamic=False)
            t0 = time.perf_counter()
            with torch.inference_mode():
                compiled(*_tensors(decisions[0]))
            print(f"  torch.compile at N={n}: {time.perf_counter() - t0:.1f} s to compile")

            def inductor(d: Decision) -> np.ndarray:
                with torch.inference_mode():
                    return compiled(*_tensors(d))[0].numpy()

            candidates["torch.compile (inductor)"] = inductor
        except Exception as exc:  # noqa: BLE001 - report, do not fail the benchmark
            print(f"  torch.compile failed at N={n}: {type(exc).__name__}: {exc}"[:300])
    fast = FastScaleActor(net)
    candidates["numpy actor (scalesched.nn.fast)"] = lambda d: fast.logits(
        d.task_features, d.server_features, d.mask
    )

    reference = [eager(d) for d in decisions]
    rows = []
    for name, fn in candidates.items():
        pairs = zip(decisions, reference, strict=True)
        diff = max(float(np.abs(fn(d) - ref)[d.mask].max()) for d, ref in pairs)
        for d in decisions[:20]:  # warm-up
            fn(d)
        ts = []
        for i in range(reps):
            d = decisions[i % len(decisions)]
            t0 = time.perf_counter()
            fn(d)
            ts.append(time.perf_counter() - t0)
        us = np.array(ts) * 1e6
        rows.append(
            f"| {n} | {name} | {np.percentile(us, 50):.1f} | {np.percentile(us, 99):.1f} "
            f"| {diff:.1e} |"
        )
    return rows


class _CountingBatched(BatchedNetworkScheduler):
    """Records the size of every batch it is given."""

    def __init__(self, net: ScaleNet) -> None:
        super().__init__(net)
        self.batch_sizes: list[int] = []

    def select_batch(self, decisions: list[Decision]) -> list[int]:
        self.batch_sizes.append(len(decisions))
        return super().select_batch(decisions)


def batched_runs(n: int, workflows: int, net: ScaleNet, seed: int) -> list[str]:
    """Markdown rows: one simulation per acting path (sampled policy, same seed)."""
    spec = get_cluster(f"hetero-{n}")
    tables = ClusterTables(spec)
    jobs = build_jobs(tables, Scenario(workflows=workflows, rate=RATE_PER_SERVER * n, seed=seed))
    paths: dict[str, NetworkScheduler] = {
        "PyTorch eager, one at a time": NetworkScheduler(net, fast=False),
        "numpy actor, one at a time": NetworkScheduler(net),
        "numpy actor, batched per instant": _CountingBatched(net),
    }
    rows = []
    for name, scheduler in paths.items():
        t0 = time.process_time()
        result = simulate(spec, jobs, scheduler, seed=seed, tables=tables)
        cpu = time.process_time() - t0
        m = result.metrics
        sizes = getattr(scheduler, "batch_sizes", [])
        shared = f"{sum(b for b in sizes if b > 1) / max(sum(sizes), 1):.0%}" if sizes else "-"
        rows.append(
            f"| {n} | {workflows} | {name} | {m['decisions']} | {shared} | {cpu:.2f} "
            f"| {float(m['avg_response_time_s']):.2f} |"
        )
    return rows


def training_throughput(steps: int) -> float:
    from tempfile import TemporaryDirectory

    from scalesched.train.ppo import Trainer, load_config

    cfg = load_config(  # the world its documented figure was measured in
        None, total_steps=steps, validate_every=0, validation_sizes=[], residency="dynamic"
    )
    with TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        state = Trainer(cfg, Path(tmp)).train()
        return state.global_step / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--checkpoint", default=None, help="a trained policy (default: untrained)")
    parser.add_argument("--sizes", default="16,48,256,1024", help="latency table sizes")
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument(
        "--candidate-sizes", default="48,1024", help="sizes of the candidates table ('' skips)"
    )
    parser.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    parser.add_argument(
        "--batch-runs", default="48:300", help="N:workflows runs of the batched table ('' skips)"
    )
    parser.add_argument("--train-steps", type=int, default=0, help="PPO steps (0 skips)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.checkpoint:
        from scalesched.nn.checkpoint import load_checkpoint
        from scalesched.nn.scheduler import network_from_checkpoint

        net = network_from_checkpoint(load_checkpoint(args.checkpoint), args.checkpoint)
    else:
        net = build_network("scale", TASK_FEATURES, SERVER_FEATURES)
    assert isinstance(net, ScaleNet)
    net.eval()
    print(f"{os.cpu_count()} cores, torch {torch.__version__}, numpy {np.__version__}, 1 thread")
    print(
        "\n| N | eft p50 ms | eft p99 ms | SCALE torch p50 ms | SCALE torch p99 ms "
        "| SCALE p50 ms | SCALE p99 ms | SCALE / eft (p50) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    torch_path, fast_path = NetworkScheduler(net, fast=False), NetworkScheduler(net)
    for n in (int(x) for x in args.sizes.split(",") if x):
        r = decision_latency(n, torch_path, fast_path, args.reps)
        print(
            f"| {n} | {r['eft_p50_ms']:.3f} | {r['eft_p99_ms']:.3f} | {r['torch_p50_ms']:.3f} "
            f"| {r['torch_p99_ms']:.3f} | {r['fast_p50_ms']:.3f} | {r['fast_p99_ms']:.3f} "
            f"| {r['fast_p50_ms'] / r['eft_p50_ms']:.1f}x |"
        )
    if args.candidate_sizes:
        print("\n| N | actor path | p50 µs | p99 µs | max logit diff vs eager |")
        print("|---|---|---|---|---|")
        for n in (int(x) for x in args.candidate_sizes.split(",")):
            for row in forward_candidates(n, net, args.reps, not args.no_compile):
                print(row)
    if args.batch_runs:
        print(
            "\n| N | workflows | acting path | decisions | decided in shared instants "
            "| CPU s | mean response s |"
        )
        print("|---|---|---|---|---|---|---|")
        for spec in args.batch_runs.split(","):
            n, workflows = (int(x) for x in spec.split(":"))
            for row in batched_runs(n, workflows, net, seed=0):
                print(row)
    if args.train_steps:
        rate = training_throughput(args.train_steps)
        print(
            f"\nPPO training throughput (hetero-16, 8 envs, updates included): "
            f"{rate:,.0f} env steps/s"
        )


if __name__ == "__main__":
    main()
