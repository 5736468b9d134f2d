"""Pick the best checkpoint of each variant and ship it in the package.

    python scripts/derive/ship_policies.py runs/                       # by in-training validation
    python scripts/derive/ship_policies.py runs/ --select results/validation/results.csv

Candidates are runs/<config>-s<seed>/best.pt (and, with --select, last.pt too). Without
--select, "best" is the score recorded in best.pt during training: ``val_ratio``, the mean
response over steady-state validation runs at the TRAINING size only (600 workflows, 100 of
warm-up, seeds 1000-1002) divided by the best baseline heuristic's on the same seeds (strict
zero-shot, so no other N takes part in the choice). Checkpoints without that score
(trained before it existed, and validated at N = 32 and 48 too) are not candidates. With
--select, it is the ratio to eft measured by a `scalesched eval` of the candidates and eft on
validation seeds (never the evaluation's), which must then be run at the training size only.
The shipped file keeps the weights, the network
and training configs, the seed and the score; the optimizer state is dropped. The training
curve goes beside it as <name>.train.csv, and a summary of every candidate to
docs/training-seeds.csv (a variant without runs here keeps its file and its rows there).
"""

from __future__ import annotations

import argparse
import csv
import math
import shutil
from pathlib import Path

from scalesched.nn.checkpoint import load_checkpoint, save_checkpoint

VARIANTS = {
    # SCALE and its no-SRR pair: the steady-state configs with the eft prior.
    "scale-steady-prior-n16": "scale",
    "scale-steady-prior-nosrr-n16": "scale-nosrr",
    # The rest at steady state too, at a reduced budget of 40k steps: the
    # scalable-softmax pair and the fixed-size baseline, all with the eft prior.
    "scale-steady-prior-ssm-n16": "scale-ssm",
    "scale-steady-prior-ssm-srr-n16": "scale-ssm-srr",
    "mlp16-steady-n16": "mlp-16",
}
DEST = Path(__file__).resolve().parents[2] / "src" / "scalesched" / "policies" / "trained"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("runs", type=Path)
    parser.add_argument(
        "--select", type=Path, default=None, help="results.csv of an eval of the candidates and eft"
    )
    args = parser.parse_args()
    measured = _scores(args.select) if args.select else None
    out = Path(__file__).resolve().parents[2] / "docs" / "training-seeds.csv"
    previous = list(csv.DictReader(out.open())) if out.is_file() else []
    summary: list[dict[str, object]] = []
    for config, name in VARIANTS.items():
        candidates = []
        for run in sorted(args.runs.glob(f"{config}-s*")):
            for file in ("best.pt", "last.pt") if measured is not None else ("best.pt",):
                path = run / file
                if not path.is_file():
                    continue
                data = load_checkpoint(path)
                meta = data.get("metadata", {})
                if measured is not None:
                    score = measured.get(str(path), float("inf"))
                else:
                    score = float(meta.get("val_ratio", float("inf")))
                seed = int(data["config"]["seed"])
                rows = list(csv.DictReader((run / "train.csv").open()))
                update = meta.get("update", data.get("train_state", {}).get("update", ""))
                summary.append(
                    {
                        "variant": name,
                        "seed": seed,
                        "checkpoint": file,
                        "val_ratio": score,
                        "update": update,
                        "steps": rows[-1]["global_step"] if rows else "",
                    }
                )
                if math.isfinite(score):
                    candidates.append((score, seed, run, data))
        if not candidates:
            # Its runs are not here (runs/ is not kept): the shipped file stays, and so do its
            # rows in the seed summary, so that reshipping one variant does not erase another's.
            kept = [r for r in previous if r["variant"] == name]
            summary.extend(kept)
            print(f"{name}: no candidate here; shipped file and {len(kept)} summary rows kept")
            continue
        score, seed, run, data = min(candidates, key=lambda c: (c[0], c[1]))
        data.pop("optimizer", None)
        data.pop("torch_rng", None)
        data.pop("format", None)
        data["metadata"] = {
            **data.get("metadata", {}),
            "name": name,
            "seed": seed,
            "source_run": run.name,
        }
        save_checkpoint(DEST / f"{name}.pt", data)
        shutil.copy(run / "train.csv", DEST / f"{name}.train.csv")
        print(f"{name}: seed {seed} (validation ratio {score:.3f}) from {run}")
    with out.open("w", newline="") as fh:
        writer = csv.DictWriter(
            fh, fieldnames=["variant", "seed", "checkpoint", "val_ratio", "update", "steps"]
        )
        writer.writeheader()
        writer.writerows(summary)


def _scores(results: Path) -> dict[str, float]:
    """Candidate path -> mean over N of (its mean response time / eft's), same seeds."""
    rows = [r for r in csv.DictReader(results.open()) if r["status"] == "ok"]
    by: dict[tuple[str, int], list[float]] = {}
    for r in rows:
        by.setdefault((r["policy"], int(r["n_servers"])), []).append(
            float(r["avg_response_time_s"])
        )
    eft = {n: sum(v) / len(v) for (p, n), v in by.items() if p == "eft"}
    ratios: dict[str, list[float]] = {}
    for (p, n), v in by.items():
        if p != "eft":
            ratios.setdefault(p, []).append(sum(v) / len(v) / eft[n])
    return {p: sum(r) / len(r) for p, r in ratios.items()}


if __name__ == "__main__":
    main()
