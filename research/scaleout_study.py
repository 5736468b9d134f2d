"""tail's scale-out signal against tail and eft, seed-paired (docs/tail.md, "Scale-out").

    python research/scaleout_study.py --cluster hetero-16 --load 0.8 --seeds 0,1,2,3,4 \\
        --policies eft,tail,tail_scaleout --out results/scaleout/h16-08.jsonl

A policy is a registered name, or ``tail_scaleout:slo=S:idle=T`` for the scale-out signal
with another SLO multiple or idle time. Runs one simulation at a time (the default window:
first 20% warm-up, last 10% cool-down), appends one JSON line per run to ``--out`` (runs
already there are not run again), then prints, per policy, the mean over seeds of mean /
p50 / p99 response and of the replica figures, and the seed-paired ratios to
``--reference`` with 95% Student-t half-widths. ``replica GPU share`` is
``replica_gpu_seconds`` over the GPU-seconds the cluster had during the run (its GPUs x
the makespan); ``calls on replicas`` is ``replica_calls`` (LLM calls that landed on one).

``--signal-stats SEED`` instead runs ``tail`` once on the setting and prints what the
scale-out signal would see at its LLM decisions: percentiles of the chosen server's
predicted p99 finish over the call's contention-free time at that length (the ratio the
SLO bounds), the share of calls above a few SLOs, and how often free GPUs could take a
replica of the call's model. ``--show-replicas SEED`` runs ``tail_scaleout`` once and
prints each replica it asked for: time, model, server, and the server the call went to.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from scalesched.decision import Place
from scalesched.decision.features import ENGINE_ABSENT, Decision
from scalesched.decision.scheduler import Scheduler
from scalesched.policies import get_policy
from scalesched.policies.tail import ScaleOutTailScheduler, TailScheduler
from scalesched.runs.setup import Scenario, prepare, run
from scalesched.stats import mean_ci_text

STATS = ("avg_response_time_s", "p50_response_time_s", "p99_response_time_s")


def make_policy(spec: str) -> Scheduler:
    """A registered policy, or ``tail_scaleout:slo=S:idle=T`` (either part optional)."""
    name, *opts = spec.split(":")
    if not opts:
        return get_policy(name)
    if name != "tail_scaleout":
        raise SystemExit(f"options are for tail_scaleout only, got {spec!r}")
    policy = ScaleOutTailScheduler()
    for opt in opts:
        key, _, value = opt.partition("=")
        if key == "slo":
            policy.slo = float(value)
        elif key == "idle":
            policy.idle_s = float(value)
        else:
            raise SystemExit(f"unknown option {key!r} in {spec!r} (slo, idle)")
    return policy


def one_run(args: argparse.Namespace, seed: int, spec: str) -> dict[str, Any]:
    scenario = scenario_of(args, seed)
    setup = prepare(args.cluster, scenario)
    result = run(setup, make_policy(spec), warmup=args.warmup)
    m = dict(result.metrics)
    gpus = float(setup.tables.gpus.sum())
    m.update(label=spec, seed=seed, setting=setting(args))
    m["replica_gpu_share"] = float(m.get("replica_gpu_seconds", 0.0)) / (
        gpus * float(m["makespan_s"])
    )
    return m


class SignalProbe(TailScheduler):
    """``tail`` that records, per LLM call, the ratio the scale-out signal compares to its
    SLO and whether free GPUs could take a replica (the signal's own arithmetic)."""

    def reset(self, seed: int) -> None:
        super().reset(seed)
        self.ratios: list[float] = []
        self.free: list[bool] = []

    def select(self, decision: Decision) -> int:
        best = int(np.argmin(self.scores(decision)))
        if decision.task.kind == "llm":
            view, tables, m = decision.view, decision.tables, decision.task.model
            p99, bound = self.p99_finish(decision)
            self.ratios.append(float(p99.finish_s[best]) / bound)
            free = decision.mask & (view.engine_state[:, m] == ENGINE_ABSENT)
            free &= view.free_gpus >= tables.tp[:, m]
            free[best] = False
            self.free.append(bool(free.any()))
        return best


def scenario_of(args: argparse.Namespace, seed: int) -> Scenario:
    """The run the diagnostics replay: the study's setting on one seed."""
    return Scenario(
        workload=args.workload,
        workflows=args.workflows,
        load=args.load,
        seed=seed,
        arrivals=args.arrivals,
    )


def signal_stats(args: argparse.Namespace, seed: int) -> None:
    scenario = scenario_of(args, seed)
    probe = SignalProbe()
    run(prepare(args.cluster, scenario), probe, warmup=args.warmup)
    r = np.array(probe.ratios)
    pct = ", ".join(f"p{q}: {np.percentile(r, q):.2f}" for q in (50, 90, 99, 99.9))
    above = ", ".join(f"> {x}: {(r > x).mean():.2%}" for x in (1.5, 2, 3, 5))
    print(f"{setting(args)}, seed {seed}, {r.size} LLM calls under tail (the whole run)")
    print(f"p99 finish / contention-free time at the p99 length: {pct}")
    print(f"share of calls with the ratio {above}")
    print(f"calls with free GPUs for a replica of their model elsewhere: {np.mean(probe.free):.1%}")


class ReplicaLog(ScaleOutTailScheduler):
    """``tail_scaleout`` that remembers each replica request."""

    def reset(self, seed: int) -> None:
        super().reset(seed)
        self.log: list[str] = []

    def select(self, decision: Decision) -> int | Place:
        answer = super().select(decision)
        if isinstance(answer, Place):
            names = decision.tables.names
            for load in answer.loads:
                self.log.append(
                    f"t={decision.now:.0f}s {load.model} on {names[load.server]} "
                    f"(the call went to {names[answer.server]})"
                )
        return answer


def show_replicas(args: argparse.Namespace, seed: int) -> None:
    scenario = scenario_of(args, seed)
    policy = ReplicaLog()
    run(prepare(args.cluster, scenario), policy, warmup=args.warmup)
    print(f"{setting(args)}, seed {seed}: {len(policy.log)} replica requests")
    print("\n".join(policy.log))


def setting(args: argparse.Namespace) -> str:
    """What a run's row is comparable on (besides policy and seed)."""
    return (
        f"{args.cluster}, {args.workload}, load {args.load}, {args.arrivals} arrivals, "
        f"{args.workflows} workflows, warm-up {'default' if args.warmup is None else args.warmup}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cluster", default="hetero-16")
    ap.add_argument("--load", type=float, default=0.8)
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--workflows", type=int, default=1500)
    ap.add_argument("--arrivals", default="poisson", help="poisson or bursty (MMPP)")
    ap.add_argument("--workload", default="agentic-mix")
    ap.add_argument("--warmup", type=int, default=None, help="default: eval's (20%%)")
    ap.add_argument("--policies", default="eft,tail,tail_scaleout")
    ap.add_argument("--reference", default="tail")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--signal-stats", type=int, metavar="SEED", help="see the docstring")
    ap.add_argument("--show-replicas", type=int, metavar="SEED", help="see the docstring")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.signal_stats is not None:
        signal_stats(args, args.signal_stats)
        return
    if args.show_replicas is not None:
        show_replicas(args, args.show_replicas)
        return
    if args.out is None:
        ap.error("--out is required")
    seeds = [int(s) for s in args.seeds.split(",")]
    specs = [p.strip() for p in args.policies.split(",") if p.strip()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    if args.out.exists():
        for line in args.out.read_text().splitlines():
            r = json.loads(line)
            if r["setting"] == setting(args):
                rows[(str(r["label"]), int(r["seed"]))] = r
    for spec in specs:
        for seed in seeds:
            if (spec, seed) in rows:
                continue
            r = one_run(args, seed, spec)
            rows[(spec, seed)] = r
            with args.out.open("a") as fh:
                fh.write(json.dumps(r) + "\n")
    not_steady = [k for k, r in rows.items() if k[1] in seeds and not r["steady_state"]]
    print(f"{setting(args)}, seeds {args.seeds}")
    if not_steady:
        print(f"not at steady state: {not_steady}")
    print(
        "| policy | mean | p50 | p99 | mean / ref | p50 / ref | p99 / ref "
        "| replica loads | calls on replicas | replica GPU-s | replica GPU share | model loads |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for spec in specs:
        mine = [rows[(spec, s)] for s in seeds]
        ref = [rows[(args.reference, s)] for s in seeds]
        level = [np.mean([float(r[k]) for r in mine]) for k in STATS]
        cells = [f"{v:.2f}" for v in level]
        for k in STATS:
            x = np.array([float(a[k]) / float(b[k]) for a, b in zip(mine, ref, strict=True)])
            cells.append(mean_ci_text(x))
        loads = [int(r.get("replica_loads", 0)) for r in mine]
        calls = np.mean([int(r.get("replica_calls", 0)) for r in mine])
        gpu_s = np.mean([float(r.get("replica_gpu_seconds", 0.0)) for r in mine])
        share = np.mean([float(r["replica_gpu_share"]) for r in mine])
        models = np.mean([int(r["model_loads"]) for r in mine])
        cells += [f"{min(loads)}-{max(loads)}", f"{calls:.0f}", f"{gpu_s:.0f}"]
        cells += [f"{share:.2%}", f"{models:.1f}"]
        print(f"| {spec} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
