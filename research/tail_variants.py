"""Three variants of `tail` beside `tail` and `eft`, with models loaded on demand, where `tail`
starts many more model loads than `eft` on clusters short of GPUs (docs/schedulers.md, "How
to pick").

    python research/tail_variants.py --cluster configs/clusters/l4-lab.yaml --rate 0.4792 \
        --workflows 4000 --seeds 90,91,92

`tail` scores a server by the cost model's finish at the call's predicted p90 output length
plus the delay the call adds to the requests already in that engine's batch, also at the
p90. A server where the model is absent has no batch to delay, so a long p90 makes loading a
fresh engine look cheaper than joining a busy one. ``tail_imposed`` keeps the p90 finish and
weighs the imposed delay at the role's typical length (the estimate `eft` uses);
``tail_eftloads`` places as `tail` but sends a call to a server without its model only where
`eft`'s pick lacks it too (`loads=eft` of a bounded policy, as a heuristic);
``tail_spared`` leaves out a server where the call's model load would wait for busy engines
to fall idle (absent, and its free and idle GPUs cannot hold the engine: a wait the cost
model counts as the server's mean remaining work per task) while another server can take
the call. One line of JSON per run (mean and p99 response time, steady-state verdict, model
loads), then each policy's ratio of means to `eft`'s per seed.
"""

from __future__ import annotations

import argparse
import json
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from scalesched.decision.features import Decision
from scalesched.policies.eft import eft_choice
from scalesched.policies.tail import TailScheduler

POLICIES = ("eft", "tail", "tail_imposed", "tail_eftloads", "tail_spared")


class TailImposedTypical(TailScheduler):
    """``tail``'s p90 finish plus the imposed delay at the typical output length."""

    name = "tail_imposed"

    @property
    def compiled_policy(self) -> str | None:
        return None  # the compiled core's whole runs mirror plain `tail` only

    def scores(self, decision: Decision) -> np.ndarray:
        if decision.task.kind != "llm":
            return super().scores(decision)
        at_p90 = decision.at_output_tokens(self.output_tokens(decision))
        return np.where(decision.mask, at_p90.finish_s + decision.imposed_s, np.inf)


class TailEftLoads(TailScheduler):
    """``tail``'s placement; no model load while ``eft``'s pick holds the call's model."""

    name = "tail_eftloads"

    @property
    def compiled_policy(self) -> str | None:
        return None

    def select(self, decision: Decision) -> int:
        scores = self.scores(decision)
        if decision.task.kind == "llm" and not decision.model_absent[eft_choice(decision)]:
            scores = np.where(decision.model_absent, np.inf, scores)
        return int(np.argmin(scores))


class TailSpared(TailScheduler):
    """``tail`` without the servers where the call's model load waits for busy engines,
    unless no other server has a finite score."""

    name = "tail_spared"

    @property
    def compiled_policy(self) -> str | None:
        return None

    def scores(self, decision: Decision) -> np.ndarray:
        scores = super().scores(decision)
        if decision.task.kind != "llm":
            return scores
        view, tp = decision.view, decision.tables.tp[:, decision.task.model]
        waits = decision.model_absent & (view.free_gpus + view.idle_gpus < tp)
        spared = np.where(waits, np.inf, scores)
        return spared if np.isfinite(spared).any() else scores


VARIANTS = {
    "tail_imposed": TailImposedTypical,
    "tail_eftloads": TailEftLoads,
    "tail_spared": TailSpared,
}


def one_run(
    cluster: str, workload: str, rate: float, workflows: int, policy: str, seed: int
) -> dict:
    """One run with models loaded on demand; its summary."""
    from scalesched.runs.setup import Scenario, prepare, run

    scenario = Scenario(workload=workload, workflows=workflows, rate=rate, seed=seed)
    setup = prepare(cluster, scenario)
    m = run(setup, VARIANTS[policy]() if policy in VARIANTS else policy).metrics
    return {
        "policy": policy,
        "seed": seed,
        "mean_s": round(m["avg_response_time_s"], 1),
        "p99_s": round(m["p99_response_time_s"], 1),
        "steady": m["steady_state"],
        "model_loads": m["model_loads"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cluster", required=True, help="cluster preset or YAML file")
    ap.add_argument("--workload", default="agentic-mix", help="workload preset")
    ap.add_argument("--rate", type=float, required=True, help="arrival rate, workflows/s")
    ap.add_argument("--workflows", type=int, default=4000, help="workflows per run")
    ap.add_argument("--seeds", default="90,91,92", help="comma-separated run seeds")
    ap.add_argument("--jobs", type=int, default=2, help="runs at once")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    runs = [(p, s) for s in seeds for p in POLICIES]
    means: dict[tuple[str, int], float] = {}
    with ProcessPoolExecutor(args.jobs) as pool:
        futures = [
            pool.submit(one_run, args.cluster, args.workload, args.rate, args.workflows, p, s)
            for p, s in runs
        ]
        for f in futures:
            row = f.result()
            means[row["policy"], row["seed"]] = row["mean_s"]
            print(json.dumps(row), flush=True)
    for p in POLICIES:
        ratios = [round(means[p, s] / means["eft", s], 3) for s in seeds]
        print(f"{p}: {ratios} x eft")


if __name__ == "__main__":
    main()
