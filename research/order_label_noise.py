"""How noisy are ``order_rollout``'s labels? Two copies of the expert, seeded apart, answer
the same contested decisions of one run (the first acts); the share of calls where they
choose the same admission order bounds how well any network can match the labels
(docs/robust-training.md, "A label per state").

    python research/order_label_noise.py --cluster configs/clusters/edge-l4-cpu.yaml \
        --workload test-time-scaling --load 0.6 --workflows 600 --forks 2 8
"""

from __future__ import annotations

import argparse

from scalesched.decision.actions import Place
from scalesched.policies.order_rollout import OrderRolloutScheduler
from scalesched.runs.setup import Scenario, prepare
from scalesched.sim.engine import Simulation


def agreement(args: argparse.Namespace, forks: int) -> tuple[int, float]:
    """The contested decisions of the run and the share the two copies agree on."""
    scenario = Scenario(
        workload=args.workload,
        workflows=args.workflows,
        load=args.load,
        seed=args.seed,
        residency=args.residency,
    )
    setup = prepare(args.cluster, scenario, stream=False)
    sim = Simulation(setup.cluster, setup.jobs, tables=setup.tables)  # under the world's tables
    acting = OrderRolloutScheduler(base=args.base, forks=forks)
    other = OrderRolloutScheduler(base=args.base, forks=forks)
    acting.reset(1)
    other.reset(2)
    contested = same = 0
    decision = sim.next_decision()
    while decision is not None:
        answer = acting.select(decision)
        if isinstance(answer, Place) and acting.contested(decision, answer.server):
            theirs = other.select(decision)
            contested += 1
            same += isinstance(theirs, Place) and theirs.priority == answer.priority
        sim.apply(answer)
        decision = sim.next_decision()
    return contested, same / max(contested, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cluster", default="hetero-16")
    ap.add_argument("--workload", default="agentic-mix")
    ap.add_argument("--load", type=float, default=0.7, help="fraction of measured capacity")
    ap.add_argument("--residency", choices=("dynamic", "planned"), default="dynamic")
    ap.add_argument("--workflows", type=int, default=600)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--base", choices=("fcfs_workflow", "tail"), default="fcfs_workflow")
    ap.add_argument("--forks", type=int, nargs="+", default=[2], help="sampled futures per order")
    args = ap.parse_args()
    for forks in args.forks:
        contested, share = agreement(args, forks)
        print(f"forks {forks}: {contested} contested decisions, the two agree on {share:.3f}")


if __name__ == "__main__":
    main()
