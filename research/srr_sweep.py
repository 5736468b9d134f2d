"""Sweep SRR's two weights (decorrelation x KL) at a reduced budget; pick on validation at
the training size only; report the attention feature's drift with N for every setting.

    python research/srr_sweep.py --config configs/train/scale-steady-n16.yaml \\
        --decorrelation 0.003,0.01,0.03 --kl 0.01,0.03,0.1 --steps 150000 --out runs/srr-sweep

Each setting trains one policy (same seed, same config but the two weights) into
OUT/d<w>-k<w>/; its score is best.pt's validation ratio to the best baseline heuristic,
validated at the training cluster's size only (strict zero-shot), so no other N
takes part in the choice. Afterwards, and only for the report, each best.pt runs on
hetero-N for every ``--drift-sizes`` N (seeds 2000+, disjoint from validation and
evaluation) and the attention feature's batch statistics are compared with those at the
training size: drift = the statistic at N minus at the training size. Also logged per
setting: the mean gradient norm of each loss term over training (from train.csv), so the
table shows whether both SRR terms carry a measurable share of the gradient. Writes
OUT/sweep.json and prints a Markdown table (or one JSON object with --json).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch

from scalesched.cluster import get_cluster
from scalesched.nn.checkpoint import load_checkpoint
from scalesched.nn.scheduler import load_scheduler
from scalesched.runs.setup import Scenario, prepare, run
from scalesched.train.ppo import PPOConfig, Trainer, load_config

DRIFT_SEED = 2000
STATS = ("mean", "var", "mean_abs_offdiag_corr")
GRAD_COLUMNS = (
    "grad_norm_policy",
    "grad_norm_value",
    "grad_norm_srr_decorrelation",
    "grad_norm_srr_kl",
)


def floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def feature_drift(
    checkpoint: Path, sizes: list[int], cfg: PPOConfig, workflows: int
) -> dict[int, dict[str, float]]:
    """Attention-feature statistics of a trained policy on hetero-N, per N."""
    scheduler = load_scheduler(checkpoint, record_features=True)
    for n in sizes:
        scenario = Scenario(
            workload=cfg.workload, workflows=workflows, load=0.7, seed=DRIFT_SEED + n
        )
        run(prepare(f"hetero-{n}", scenario), scheduler, warmup=0, cooldown=0)
    return scheduler.feature_stats()


def mean_grad_norms(train_csv: Path) -> dict[str, float]:
    rows = list(csv.DictReader(train_csv.open()))
    return {
        col: float(np.mean([float(r[col]) for r in rows if r.get(col)])) for col in GRAD_COLUMNS
    }


def run_setting(
    base: PPOConfig, w_dec: float, w_kl: float, out: Path, args: argparse.Namespace
) -> dict[str, Any]:
    name = f"d{w_dec:g}-k{w_kl:g}"
    n_train = len(get_cluster(base.cluster).servers)
    overrides: dict[str, Any] = {
        "name": f"{base.name}-{name}",
        "srr": True,
        "srr_decorrelation": w_dec,
        "srr_kl": w_kl,
        "total_steps": args.steps,
        "seed": args.seed,
        "validation_sizes": [n_train],
    }
    if args.validation_workflows is not None:
        overrides["validation_workflows"] = args.validation_workflows
        overrides["validation_warmup"] = min(base.validation_warmup, args.validation_workflows // 6)
    if args.validation_seeds is not None:
        overrides["validation_seeds"] = [int(s) for s in args.validation_seeds.split(",")]
    cfg = load_config(args.config, **overrides)
    run_dir = out / name
    Trainer(cfg, run_dir, resume=True).train()
    meta = load_checkpoint(run_dir / "best.pt").get("metadata", {})
    sizes = sorted({n_train, *args.drift_sizes})
    stats = feature_drift(run_dir / "best.pt", sizes, cfg, args.drift_workflows)
    ref = stats.get(n_train, {})
    drift = {
        n: {k: st[k] - ref[k] for k in STATS} for n, st in stats.items() if n != n_train and ref
    }
    return {
        "setting": name,
        "srr_decorrelation": w_dec,
        "srr_kl": w_kl,
        "val_ratio": float(meta.get("val_ratio", math.inf)),
        "best_update": meta.get("update"),
        "grad_norms": mean_grad_norms(run_dir / "train.csv"),
        "feature_stats": {str(n): st for n, st in stats.items()},
        "drift": {str(n): d for n, d in drift.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/train/scale-steady-n16.yaml")
    parser.add_argument("--decorrelation", type=floats, default=floats("0.003,0.01,0.03"))
    parser.add_argument("--kl", type=floats, default=floats("0.01,0.03,0.1"))
    parser.add_argument("--steps", type=int, default=150_000, help="training steps per setting")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/srr-sweep"))
    parser.add_argument(
        "--drift-sizes", type=lambda s: [int(x) for x in s.split(",")], default=[32, 48, 96]
    )
    parser.add_argument("--drift-workflows", type=int, default=200)
    parser.add_argument(
        "--validation-workflows", type=int, default=None, help="override (smoke runs)"
    )
    parser.add_argument("--validation-seeds", default=None, help="override, comma-separated")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    torch.set_num_threads(1)
    base = load_config(args.config)
    args.out.mkdir(parents=True, exist_ok=True)
    results = [run_setting(base, d, k, args.out, args) for d in args.decorrelation for k in args.kl]
    chosen = min(results, key=lambda r: r["val_ratio"])
    summary = {"config": args.config, "steps": args.steps, "chosen": chosen["setting"]}
    summary["results"] = results
    (args.out / "sweep.json").write_text(json.dumps(summary, indent=2))
    if args.json:
        print(json.dumps(summary))
        return
    sizes = sorted({int(n) for r in results for n in r["drift"]})
    head = " | ".join(f"var / corr drift N={n}" for n in sizes)
    print(f"| decorrelation | KL | val ratio (N=16) | grad norm policy / decorr / KL | {head} |")
    print("|---|---|---|---|" + "---|" * len(sizes))
    for r in results:
        g = r["grad_norms"]
        cells = " | ".join(
            f"{r['drift'][str(n)]['var']:+.3f} / {r['drift'][str(n)]['mean_abs_offdiag_corr']:+.3f}"
            if str(n) in r["drift"]
            else "-"
            for n in sizes
        )
        mark = " (chosen)" if r is chosen else ""
        print(
            f"| {r['srr_decorrelation']:g} | {r['srr_kl']:g} | {r['val_ratio']:.3f}{mark} | "
            f"{g['grad_norm_policy']:.3g} / {g['grad_norm_srr_decorrelation']:.3g} / "
            f"{g['grad_norm_srr_kl']:.3g} | {cells} |"
        )


if __name__ == "__main__":
    main()
