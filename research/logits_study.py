"""Logits-cache study (docs/cache.md, "Logits cache"): the re-sampling speed-up by pattern,
branch count and per-token agreement, and its effect on response time at steady state.

    nice -n 10 python research/logits_study.py isolated --out results/logits
    nice -n 10 python research/logits_study.py steady --loads 0.5,0.7,0.9 --seeds 5 \\
        --workflows 1500 --out results/logits

``isolated``: one workflow at a time (arrivals ``--gap`` seconds apart, so nothing queues),
each pattern realised with each agreement, every run twice on the same jobs:
``--logits-cache measure`` and ``on``. A group's *re-sampling time* runs from its first
branch's admission to its last branch's last token; the speed-up is the measured time over
the cached one, per group (paired: same workflow, same placement policy), summarised as a
geometric mean with a 95% interval by pattern and branch count.

``steady``: test-time-scaling at loads as fractions of the cluster's measured capacity,
seeds 0..n-1, default warm-up and cool-down, KV state on (LRU); the ratio of mean response
with the cache on to measured-only, paired by seed. ``--agreement`` re-draws the replay
marks of the same jobs with another agreement (the preset's is 0.9), from the generator
realisation would have used, so nothing else about the jobs changes.

Writes rows.csv beside a markdown table on stdout.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from kv_study import write_rows  # a sibling: one CSV layout for the cache studies

from scalesched.cluster import get_cluster
from scalesched.cluster.tables import ClusterTables
from scalesched.kernel.metrics import LogitsRecord
from scalesched.policies import get_policy
from scalesched.runs.setup import Scenario, prepare, run
from scalesched.sim.engine import Simulation
from scalesched.sim.run import drive_simulation
from scalesched.stats import half_width
from scalesched.workload.agent_patterns import best_of_n, self_consistency, tree_of_thought
from scalesched.workload.instance import Job
from scalesched.workload.sessions import mark_replays, replay_rng
from scalesched.workload.source import TemplateSource, sample_jobs, workflow_rng
from scalesched.workload.template import WorkflowTemplate

PATTERNS: dict[str, Callable[..., WorkflowTemplate]] = {
    "best-of-n": best_of_n,
    "self-consistency": self_consistency,
    "tree-of-thought": tree_of_thought,
}
SIZE_BINS = ((2, 4), (5, 8), (9, 12), (13, 20))


def group_times(rec: LogitsRecord) -> dict[tuple[int, int], tuple[int, float, int, int]]:
    """Per branch group: (branches, re-sampling seconds, tokens reused, output tokens)."""
    out: dict[tuple[int, int], list[float]] = {}
    for j, f, a, e, r, o in zip(
        rec.jobs.tolist(),
        rec.first.tolist(),
        rec.admitted_s.tolist(),
        rec.finished_s.tolist(),
        rec.reused_tokens.tolist(),
        rec.output_tokens.tolist(),
        strict=True,
    ):
        g = out.setdefault((j, f), [0, math.inf, -math.inf, 0, 0])
        g[0] += 1
        g[1], g[2] = min(g[1], a), max(g[2], e)
        g[3] += r
        g[4] += o
    return {k: (int(g[0]), g[2] - g[1], int(g[3]), int(g[4])) for k, g in out.items()}


def _isolated_run(
    jobs: list[Any], cluster: str, policy: str, mode: bool
) -> dict[tuple[int, int], tuple[int, float, int, int]]:
    spec = get_cluster(cluster)
    sim = Simulation(spec, jobs, tables=ClusterTables(spec), kv_policy="lru", logits_cache=mode)
    drive_simulation(sim, get_policy(policy), seed=0)
    zeros = sim.tables.zeros
    rec = sim.run_record(
        policy=policy, cluster=cluster, makespan_s=1.0, utilisation=(zeros, zeros), wall_s=0
    ).logits
    assert rec is not None
    return group_times(rec)


def isolated(args: argparse.Namespace) -> None:
    rows: list[dict[str, Any]] = []
    print("| pattern | agreement | placement | branches | groups | tokens reused | speed-up |")
    print("|---|---|---|---|---|---|---|")
    for name, build in PATTERNS.items():
        for a in (float(x) for x in args.agreements.split(",")):
            source = TemplateSource(name, build(agreement=a))
            jobs = sample_jobs(source, [i * args.gap for i in range(args.workflows)], args.seed)
            for policy in args.policies.split(","):
                off = _isolated_run(jobs, args.cluster, policy, False)
                on = _isolated_run(jobs, args.cluster, policy, True)
                for lo, hi in SIZE_BINS:
                    keys = [k for k, g in off.items() if lo <= g[0] <= hi]
                    if not keys:
                        continue
                    logs = np.array([math.log(off[k][1] / on[k][1]) for k in keys])
                    reused = sum(on[k][2] for k in keys) / sum(on[k][3] for k in keys)
                    half = half_width(logs)
                    speedup = math.exp(logs.mean())
                    row = {
                        "pattern": name,
                        "agreement": a,
                        "placement": policy,
                        "branches": f"{lo}-{hi}",
                        "groups": len(keys),
                        "reused_frac": reused,
                        "speedup": speedup,
                        "speedup_lo": math.exp(logs.mean() - half),
                        "speedup_hi": math.exp(logs.mean() + half),
                    }
                    rows.append(row)
                    print(
                        f"| {name} | {a} | {policy} | {lo}-{hi} | {len(keys)} | {reused:.1%} | "
                        f"{speedup:.3f} [{row['speedup_lo']:.3f}, {row['speedup_hi']:.3f}] |"
                    )
    args.out.mkdir(parents=True, exist_ok=True)
    write_rows(args.out / "isolated.csv", rows)


STEADY_KEYS = ("avg_response_time_s", "p95_response_time_s", "branch_service_mean_s")


def remark(jobs: list[Job], agreement: float, seed: int) -> list[Job]:
    """``jobs`` with their branches' replay marks drawn again with ``agreement``."""
    out = []
    for i, job in enumerate(jobs):
        tasks = job.workflow.tasks
        groups: dict[int, list[int]] = {}
        for k, t in enumerate(tasks):
            if t.resample_of is not None:
                groups.setdefault(t.resample_of, []).append(k)
        rng = replay_rng(workflow_rng(seed, i))  # the generator ``realize`` drew them with
        marked = mark_replays(tasks, [(agreement, g) for g in groups.values()], rng)
        out.append(
            dataclasses.replace(
                job, workflow=dataclasses.replace(job.workflow, tasks=tuple(marked))
            )
        )
    return out


def steady(args: argparse.Namespace) -> None:
    rows: list[dict[str, Any]] = []
    for load in (float(x) for x in args.loads.split(",")):
        for seed in range(args.seeds):
            scenario = Scenario(
                workload=args.workload, workflows=args.workflows, load=load, seed=seed
            )
            setup = prepare(args.cluster, scenario, stream=False)
            if args.agreement is not None:
                jobs = remark(list(setup.jobs), args.agreement, seed)
                setup = dataclasses.replace(setup, jobs=jobs)
            for policy in args.policies.split(","):
                for mode, label in ((False, "measure"), (True, "on")):
                    result = run(setup, policy, kv_policy="lru", logits_cache=mode)
                    m = result.metrics
                    row = {"load": load, "seed": seed, "policy": policy, "logits": label}
                    row["agreement"] = args.agreement if args.agreement is not None else 0.9
                    row.update({k: m[k] for k in m if isinstance(m[k], int | float | str)})
                    rows.append(row)
    args.out.mkdir(parents=True, exist_ok=True)
    tag = "" if args.agreement is None else f"-a{args.agreement}"
    write_rows(args.out / f"steady{tag}.csv", rows)
    print("| load | placement | mean response s (measure) | on / measure | p95 on / measure |")
    print("|---|---|---|---|---|")
    for load in sorted({r["load"] for r in rows}):
        for policy in args.policies.split(","):

            def of(label: str, key: str, load: float = load, policy: str = policy) -> np.ndarray:
                pick = [
                    r
                    for r in rows
                    if (r["load"], r["policy"], r["logits"]) == (load, policy, label)
                ]
                return np.array([float(r[key]) for r in sorted(pick, key=lambda r: r["seed"])])

            base = of("measure", "avg_response_time_s")
            ratio = of("on", "avg_response_time_s") / base
            p95 = of("on", "p95_response_time_s") / of("measure", "p95_response_time_s")
            steady_all = all(
                bool(r["steady_state"]) for r in rows if (r["load"], r["policy"]) == (load, policy)
            )
            note = "" if steady_all else " (not all runs steady)"
            print(
                f"| {load} | {policy} | {base.mean():.1f} | {ratio.mean():.3f} +/- "
                f"{half_width(ratio):.3f} | {p95.mean():.3f} +/- {half_width(p95):.3f}{note} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="part", required=True)
    iso = sub.add_parser("isolated", help="re-sampling speed-up, one workflow at a time")
    iso.add_argument("--cluster", default="hetero-16")
    iso.add_argument("--agreements", default="0.5,0.9,0.95,0.98,0.99")
    iso.add_argument("--policies", default="cache_aware,eft")
    iso.add_argument("--workflows", type=int, default=200)
    iso.add_argument("--gap", type=float, default=200.0, help="seconds between arrivals")
    iso.add_argument("--seed", type=int, default=0)
    iso.add_argument("--out", type=Path, default=Path("results/logits"))
    st = sub.add_parser("steady", help="response time at steady state, cache on vs measured")
    st.add_argument("--cluster", default="hetero-16")
    st.add_argument("--workload", default="test-time-scaling")
    st.add_argument("--loads", default="0.5,0.7,0.9")
    st.add_argument("--seeds", type=int, default=5)
    st.add_argument("--workflows", type=int, default=1500)
    st.add_argument("--policies", default="cache_aware,eft")
    st.add_argument("--agreement", type=float, default=None, help="re-draw replay marks")
    st.add_argument("--out", type=Path, default=Path("results/logits"))
    args = parser.parse_args()
    isolated(args) if args.part == "isolated" else steady(args)


if __name__ == "__main__":
    main()
