"""Pick the best training seed of each variant and ship it in the package.

    python scripts/ship_policies.py runs/     # expects runs/<config>-s<seed>/best.pt

"Best" is the validation score recorded in best.pt (mean ratio to eft at N = 16, 32, 48 on
the validation seeds 1000-1002, which the evaluation never uses). The shipped file keeps the
weights, the network and training configs, the seed and the validation score; the optimizer
state is dropped. The training curve goes beside it as <name>.train.csv, and a summary of
every seed to docs/training-seeds.csv.
"""

from __future__ import annotations

import argparse
import csv
import shutil
from pathlib import Path

from scalesched.train.checkpoint import load_checkpoint, save_checkpoint

VARIANTS = {
    "scale-n16": "scale",
    "scale-nosrr-n16": "scale-nosrr",
    "scale-ssm-n16": "scale-ssm",
    "scale-ssm-srr-n16": "scale-ssm-srr",
    "mlp16-n16": "mlp-16",
}
DEST = Path(__file__).resolve().parents[1] / "src" / "scalesched" / "policies" / "trained"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("runs", type=Path)
    args = parser.parse_args()
    summary = []
    for config, name in VARIANTS.items():
        candidates = []
        for run in sorted(args.runs.glob(f"{config}-s*")):
            best = run / "best.pt"
            if not best.is_file():
                continue
            data = load_checkpoint(best)
            score = float(data.get("metadata", {}).get("val_ratio_to_eft", float("inf")))
            seed = int(data["config"]["seed"])
            rows = list(csv.DictReader((run / "train.csv").open()))
            summary.append({"variant": name, "seed": seed, "val_ratio_to_eft": score,
                            "best_update": data.get("metadata", {}).get("update", ""),
                            "steps": rows[-1]["global_step"] if rows else ""})
            candidates.append((score, seed, run, data))
        if not candidates:
            print(f"{name}: no runs found")
            continue
        score, seed, run, data = min(candidates, key=lambda c: (c[0], c[1]))
        data.pop("optimizer", None)
        data.pop("torch_rng", None)
        data.pop("format", None)
        data["metadata"] = {**data.get("metadata", {}), "name": name, "seed": seed,
                            "source_run": run.name}
        save_checkpoint(DEST / f"{name}.pt", data)
        shutil.copy(run / "train.csv", DEST / f"{name}.train.csv")
        print(f"{name}: seed {seed} (validation ratio to eft {score:.3f}) from {run}")
    out = Path(__file__).resolve().parents[1] / "docs" / "training-seeds.csv"
    with out.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["variant", "seed", "val_ratio_to_eft",
                                                "best_update", "steps"])
        writer.writeheader()
        writer.writerows(summary)


if __name__ == "__main__":
    main()
