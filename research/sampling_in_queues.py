"""How a sampled trained policy's draws fare as queues grow: per LLM placement of a run, the
network's probability of its most likely server, how often the draw lands elsewhere, and
what that costs in the cost model's finish estimate, bucketed by the queue the call faces
(the least estimated wait over the servers that can run it).

    python research/sampling_in_queues.py --arrivals bursty --workflows 15000 --seed 1000

Why: under bursty arrivals the shipped ``scale-dagger`` trails ``tail`` when it samples and
not when it acts greedily (docs/headroom-map.md); this shows where the draws go wrong.
"""

from __future__ import annotations

import argparse

import numpy as np

from scalesched.decision.cycle import Watched
from scalesched.decision.features import Decision
from scalesched.nn.scheduler import NetworkScheduler
from scalesched.policies import get_policy
from scalesched.runs.setup import Scenario, prepare, run

EDGES = (0.0, 1.0, 5.0, 20.0, 60.0, np.inf)
"""Bucket edges of the least estimated wait, seconds."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--policy", default="scale-dagger", help="a trained policy (sampled)")
    ap.add_argument("--cluster", default="hetero-16")
    ap.add_argument("--workload", default="agentic-mix")
    ap.add_argument("--arrivals", default="bursty")
    ap.add_argument("--load", type=float, default=0.9)
    ap.add_argument("--workflows", type=int, default=15000)
    ap.add_argument("--seed", type=int, default=1000)
    args = ap.parse_args()
    policy = get_policy(args.policy)
    if not isinstance(policy, NetworkScheduler) or policy.actor is None or policy.greedy:
        raise SystemExit(f"{args.policy}: not a sampled SCALE policy")
    actor, dim = policy.actor, policy.server_dim
    rows: list[tuple[float, float, bool, float]] = []

    def watch(decision: Decision, answer: object) -> None:
        if decision.task.kind != "llm" or int(decision.mask.sum()) < 2:
            return
        logits = actor.logits(
            decision.task_features, decision.server_features[:, :dim], decision.mask
        )
        probs = np.exp(logits - logits.max())
        probs /= probs.sum()
        top = int(np.argmax(probs))
        chosen = int(answer)  # type: ignore[call-overload]
        excess = float(decision.finish_s[chosen] - decision.finish_s[top])
        rows.append(
            (float(decision.wait_s[decision.mask].min()), probs[top], chosen != top, excess)
        )

    scenario = Scenario(
        workload=args.workload,
        workflows=args.workflows,
        load=args.load,
        seed=args.seed,
        arrivals=args.arrivals,
    )
    metrics = run(prepare(args.cluster, scenario), Watched(policy, watch)).metrics
    mean = metrics["avg_response_time_s"]
    print(f"{args.policy}, {args.arrivals}, seed {args.seed}: mean {mean:.2f} s")
    table = np.array(rows)
    print(
        "| least wait (s) | placements | p(most likely) | drawn elsewhere "
        "| finish excess when elsewhere (s) |"
    )
    print("|---|---|---|---|---|")
    for lo, hi in zip(EDGES[:-1], EDGES[1:], strict=True):
        part = table[(table[:, 0] >= lo) & (table[:, 0] < hi)]
        if len(part) == 0:
            continue
        off = part[part[:, 2] == 1]
        excess = f"{off[:, 3].mean():.2f}" if len(off) else "-"
        print(
            f"| {lo:g}-{hi:g} | {len(part)} | {part[:, 1].mean():.3f} | "
            f"{part[:, 2].mean():.1%} | {excess} |"
        )


if __name__ == "__main__":
    main()
