"""Policies on a dagger config's validation runs (docs/robust-training.md): each policy's mean
response over the steady window divided by the yardstick's on the same run (with ``expert:
best``, each validation setting's best heuristic), run by run and on average, exactly as
``scalesched train`` validates its own network, so a trained checkpoint, a margin or a
heuristic is compared with the iterations of a training run on the same footing.

    python research/selection_ratios.py --config configs/train/dagger-robust-n16.yaml \
        scale-dagger scale-dagger:margin=0.1 runs/robust/best.pt:margin=0.1 tail
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from scalesched.runs.setup import run
from scalesched.train.dagger import Validation, load_config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="a dagger config (its validation runs)")
    parser.add_argument("policies", nargs="+", help="policy names, options or checkpoint paths")
    args = parser.parse_args()
    torch.set_num_threads(1)
    validation = Validation(load_config(args.config))
    runs = validation.runs()
    print("yardsticks:", ", ".join(validation.yardsticks), flush=True)
    for policy in args.policies:
        ratios = [
            float(run(setup, policy).metrics["avg_response_time_s"]) / base for setup, base in runs
        ]
        each = " ".join(f"{r:.3f}" for r in ratios)
        print(f"{policy}: {float(np.mean(ratios)):.4f} ({each})", flush=True)


if __name__ == "__main__":
    main()
