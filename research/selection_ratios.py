"""Policies on a dagger config's validation runs (docs/robust-training.md): each policy's mean
response over the steady window divided by the yardstick's on the same run (with ``expert:
best``, each validation setting's best heuristic), run by run and on average, exactly as
``scalesched train`` validates its own network, so a trained checkpoint, a margin or a
heuristic is compared with the iterations of a training run on the same footing.

    python research/selection_ratios.py --config configs/train/dagger-robust-n16.yaml \
        scale-dagger scale-dagger:margin=0.1 runs/robust/best.pt:margin=0.1 tail

``--order-share`` also prints, per run, the share of placements admitted in workflow order
(a priority earlier than the decision: ``fcfs_workflow``'s, or an ordering head's choice).
``--workflows N`` runs the validation settings N workflows long instead of the config's
``validation_workflows`` (600 in the robust presets: short enough to rank placements, too
short to rank admission orders; docs/robust-training.md).
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from scalesched.decision.actions import Action, Place, as_action
from scalesched.decision.cycle import Watched
from scalesched.decision.features import Decision
from scalesched.policies import get_policy
from scalesched.runs.setup import run
from scalesched.train.dagger import Validation, load_config


class OrderShare:
    """Counts a policy's placements and those admitted in workflow order (a priority
    earlier than the decision), as ``Watched``'s watch."""

    def __init__(self) -> None:
        self.placed = self.in_workflow_order = 0

    def __call__(self, decision: Decision, answer: int | Action) -> None:
        place = as_action(answer)
        if isinstance(place, Place):
            self.placed += 1
            self.in_workflow_order += place.priority is not None and place.priority < decision.now

    @property
    def share(self) -> float:
        return self.in_workflow_order / max(self.placed, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="a dagger config (its validation runs)")
    parser.add_argument("policies", nargs="+", help="policy names, options or checkpoint paths")
    parser.add_argument(
        "--order-share", action="store_true", help="print each run's share in workflow order"
    )
    parser.add_argument(
        "--workflows", type=int, help="validation run length (default: the config's)"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    validation = Validation(load_config(args.config, validation_workflows=args.workflows))
    runs = validation.runs()
    print("yardsticks:", ", ".join(validation.yardsticks), flush=True)
    for policy in args.policies:
        ratios, shares = [], []
        for setup, base in runs:
            count = OrderShare()  # watched only when asked: a wrapped policy runs in Python
            acting = Watched(get_policy(policy), count) if args.order_share else policy
            ratios.append(float(run(setup, acting).metrics["avg_response_time_s"]) / base)
            shares.append(count.share)
        each = " ".join(f"{r:.3f}" for r in ratios)
        print(f"{policy}: {float(np.mean(ratios)):.4f} ({each})", flush=True)
        if args.order_share:
            print("  in workflow order: " + " ".join(f"{s:.3f}" for s in shares), flush=True)


if __name__ == "__main__":
    main()
