"""EnvSched against uniform sampling: learning speed from the training logs.

    for seed in 0 1 2; do for s in envsched uniform; do
      scalesched train --config configs/train/scale-$s-n16.yaml --steps 100000 --seed $seed \\
          --out runs/envsched-cmp/$s-s$seed --no-progress
    done; done
    python research/envsched_compare.py runs/envsched-cmp [--json]

Any two arms trained side by side compare the same way, e.g. the critic comparison of
docs/training.md: ``python research/envsched_compare.py runs/critic --arms own,shared``.

Both configs validate at N = 16 only (hetero-16, agentic-mix, load 0.7, 600 workflows with
100 of warm-up, seeds 1000-1002) against the best of eft, least_loaded and soft_eft, so
``val_ratio`` <= 1 means the policy has reached the best heuristic's steady-state mean
response. Per run this reports the environment steps to the first validation at that
level (``inf`` when never reached), the best and the last validation ratio, and the mean
ratio over all validations (the area under the learning curve: lower is faster learning).
Per sampler it gives the mean over seeds and, for the paired difference (envsched - uniform,
same seed), a 95% t interval. The final ratio at other N comes from ``scalesched eval`` of
the runs' best.pt files (docs/training.md gives the command).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
from pathlib import Path
from typing import Any

from scalesched.stats import mean_ci

SAMPLERS = ("envsched", "uniform")
METRICS = ("steps_to_best_heuristic", "best_val_ratio", "last_val_ratio", "mean_val_ratio")


def curve(run: Path) -> list[tuple[int, float]]:
    """(global step, validation ratio to the best baseline heuristic) per validation."""
    points = []
    with (run / "train.csv").open() as fh:
        for row in csv.DictReader(fh):
            if row.get("val_ratio"):
                points.append((int(row["global_step"]), float(row["val_ratio"])))
    return points


def run_summary(points: list[tuple[int, float]], level: float = 1.0) -> dict[str, float]:
    ratios = [r for _, r in points]
    reached = [step for step, r in points if r <= level]
    return {
        "steps_to_best_heuristic": float(reached[0]) if reached else math.inf,
        "best_val_ratio": min(ratios),
        "last_val_ratio": ratios[-1],
        "mean_val_ratio": sum(ratios) / len(ratios),
        "validations": float(len(ratios)),
        "last_step": float(points[-1][0]),
    }


def compare(root: Path, arms: tuple[str, str] = SAMPLERS) -> dict[str, Any]:
    """Per-run summaries of ``<arm>-s<seed>/`` folders and the seed-paired first - second."""
    first, second = arms
    runs: dict[str, dict[int, dict[str, float]]] = {a: {} for a in arms}
    curves: dict[str, list[float]] = {}
    pattern = "|".join(re.escape(a) for a in arms)
    for path in sorted(root.iterdir()):
        match = re.fullmatch(rf"({pattern})-s(\d+)", path.name)
        if match and (path / "train.csv").is_file():
            points = curve(path)
            if points:
                runs[match.group(1)][int(match.group(2))] = run_summary(points)
                curves[path.name] = [r for _, r in points]
    seeds = sorted(set(runs[first]) & set(runs[second]))
    paired: dict[str, dict[str, float]] = {}
    for metric in METRICS:
        diffs = [runs[first][s][metric] - runs[second][s][metric] for s in seeds]
        finite = [d for d in diffs if math.isfinite(d)]
        mean, ci = mean_ci(finite) if len(finite) == len(diffs) and diffs else (math.nan, math.nan)
        paired[metric] = {"mean_diff": mean, "ci95": ci}
    means = {
        sampler: {
            metric: sum(r[metric] for r in by_seed.values()) / len(by_seed) for metric in METRICS
        }
        for sampler, by_seed in runs.items()
        if by_seed
    }
    return {
        "arms": list(arms),
        "runs": runs,
        "curves": curves,
        "paired_seeds": seeds,
        "mean": means,
        "paired_difference": paired,
    }


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "| arm | seed | steps to best heuristic | best val ratio | last | mean (AUC) |",
        "|---|---|---|---|---|---|",
    ]
    for sampler, by_seed in result["runs"].items():
        for seed, r in sorted(by_seed.items()):
            steps = (
                "not reached"
                if math.isinf(r["steps_to_best_heuristic"])
                else (f"{r['steps_to_best_heuristic']:,.0f}")
            )
            lines.append(
                f"| {sampler} | {seed} | {steps} | {r['best_val_ratio']:.3f} | "
                f"{r['last_val_ratio']:.3f} | {r['mean_val_ratio']:.3f} |"
            )
    lines += ["", "| run | validation ratio at each validation |", "|---|---|"]
    lines += [
        f"| {name} | {' '.join(f'{r:.3f}' for r in rs)} |" for name, rs in result["curves"].items()
    ]
    lines.append("")
    first, second = result["arms"]
    for metric, d in result["paired_difference"].items():
        lines.append(
            f"- {metric}: {first} - {second} = {d['mean_diff']:.4g} +/- {d['ci95']:.3g} "
            f"(95% CI, seeds {result['paired_seeds']})"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("root", type=Path, help="folder holding <arm>-s<seed>/ run folders")
    parser.add_argument(
        "--arms",
        default=",".join(SAMPLERS),
        help="the two run-name prefixes to compare, FIRST,SECOND (paired difference is "
        "first - second; default envsched,uniform)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    arms = tuple(a.strip() for a in args.arms.split(","))
    if len(arms) != 2 or not all(arms):
        parser.error("--arms takes exactly two names, FIRST,SECOND")
    result = compare(args.root, (arms[0], arms[1]))
    if args.json:
        print(json.dumps(result, default=lambda x: None if not math.isfinite(x) else x))
    else:
        print(markdown(result))


if __name__ == "__main__":
    main()
