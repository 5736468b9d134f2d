"""The headroom map (docs/headroom-map.md): in each cell (workload x cluster x load) the best
heuristic's gap to the capacity-aware bound, and a learned policy's ratio to the best
heuristic, each from one `scalesched headroom --json` run per seed.

    python research/headroom_map.py --out results/headroom-map.jsonl [--seeds 5] [--jobs 2]
    python research/headroom_map.py --out results/headroom-map.jsonl --summarise
    python research/headroom_map.py --out results/oracle.jsonl --oracle --seeds 5,6,7 \
        --cells agentic-mix:hetero-16:0.9 --workflows 1500

Cells already in the output file are skipped, so an interrupted map resumes. The oracle
(``--oracle``: the clairvoyant rollout over each run's best heuristic) costs about 1 s of
CPU per workflow, so it is run on chosen ``--cells`` only; ``--summarise`` then adds the
oracle's seed-paired ratio to the best heuristic and to its own base, with 95% CIs.
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from scalesched.eval.stats import mean_ci_text, paired_ratio_ci
from scalesched.policies import BEST_HEURISTIC_CANDIDATES, best_heuristic

WORKLOADS = ("agentic-mix", "tool-heavy", "coordinator", "best-of-n", "self-consistency")
LOADS = (0.5, 0.7, 0.9)
SKEWED = """name: skewed-a100
servers:
  - type: h100-80g-x4
    count: 1
  - type: a100-80g-x4
    count: 5
  - type: cpu-64c
    count: 2
"""
LEARNED = "scale-dagger"


def clusters(folder: Path) -> dict[str, str]:
    """Name -> what ``--cluster`` takes: two presets and the skewed mix, written out."""
    skewed = folder / "skewed.yaml"
    skewed.write_text(SKEWED)
    return {"hetero-16": "hetero-16", "homogeneous-16": "homogeneous-16", "skewed": str(skewed)}


def run_cell(
    cluster: str, where: str, workload: str, load: float, seed: int, args: argparse.Namespace
) -> dict:
    cmd = [sys.executable, "-m", "scalesched", "headroom", "--cluster", where]
    cmd += ["--workload", workload, "--load", str(load), "--workflows", str(args.workflows)]
    cmd += ["--seed", str(seed), "--json", "--no-progress"]
    cmd += ["--oracle", "rollout_oracle"] if args.oracle else ["--no-oracle"]
    for policy in (*BEST_HEURISTIC_CANDIDATES, LEARNED):
        cmd += ["--policy", policy]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    cell = {"cluster": cluster, "workload": workload, "load": load, "seed": seed}
    if done.returncode != 0:
        return {**cell, "error": done.stderr.strip().splitlines()[-1:]}
    return {**cell, "result": json.loads(done.stdout)}


def summarise(path: Path) -> None:
    print(
        "| workload | cluster | load | best heuristic | its gap to the bound | "
        f"{LEARNED} / best | steady |"
    )
    print("|---|---|---|---|---|---|---|")
    for line in path.read_text().splitlines():
        cell = json.loads(line)
        if "error" in cell:
            print(
                f"| {cell['workload']} | {cell['cluster']} | {cell['load']} | error: "
                f"{' '.join(cell['error'])} | | | |"
            )
            continue
        r = cell["result"]
        best = r["best_heuristic"]
        rows = r["policies"]
        mark = " **>= 10%**" if best and rows[best]["gap"] >= 0.10 else ""
        learned = rows.get(LEARNED, {})
        ratio = learned["mean_s"] / rows[best]["mean_s"] if best and learned else float("nan")
        steady = "yes" if best and rows[best]["steady"] and learned.get("steady") else "no"
        gap = f"{rows[best]['gap']:.1%}{mark}" if best else "-"
        print(
            f"| {cell['workload']} | {cell['cluster']} | {cell['load']} | {best} | {gap} | "
            f"{ratio:.3f} | {steady} |"
        )


def summarise_oracle(path: Path) -> None:
    """Per cell with oracle rows: the oracle's seed-paired ratio to the cell's best
    heuristic (one choice per cell: the lowest mean over the seeds) and to the heuristic
    it rolled out over (each seed's best), with 95% CIs over the seeds."""
    cells: dict[tuple[str, str, float], list[dict]] = {}
    for line in path.read_text().splitlines():
        c = json.loads(line)
        if "error" not in c and c["result"]["oracle"]:
            cells.setdefault((c["workload"], c["cluster"], c["load"]), []).append(c)
    if not cells:
        return
    print()
    print(
        "| workload | cluster | load | seeds | best heuristic | oracle / best | "
        "oracle / its base | best's gap to the bound | all steady |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for (workload, cluster, load), runs in cells.items():
        by_seed = {c["seed"]: c["result"] for c in runs}
        means: dict[str, list[float]] = {}
        for r in by_seed.values():
            for name, row in r["policies"].items():
                if not row["oracle"]:
                    means.setdefault(name, []).append(row["mean_s"])
        best = best_heuristic(means)
        assert best is not None
        oracle = {s: r["oracle"]["rollout_oracle"]["mean_s"] for s, r in by_seed.items()}
        of_best = {s: r["policies"][best]["mean_s"] for s, r in by_seed.items()}
        of_base = {
            s: r["policies"][r["oracle"]["rollout_oracle"]["base"]]["mean_s"]
            for s, r in by_seed.items()
        }
        gap = [r["policies"][best]["gap"] for r in by_seed.values()]
        steady = all(row["steady"] for r in by_seed.values() for row in r["policies"].values())
        print(
            f"| {workload} | {cluster} | {load} | {len(by_seed)} | {best} | "
            f"{_ratio(oracle, of_best)} | {_ratio(oracle, of_base)} | "
            f"{mean_ci_text(gap)} | {'yes' if steady else 'no'} |"
        )


def _ratio(numerator: dict[int, float], denominator: dict[int, float]) -> str:
    m, h = paired_ratio_ci(numerator, denominator)
    return f"{m:.3f} ± {h:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--workflows", type=int, default=1500)
    ap.add_argument("--seeds", default="5", help="comma-separated seeds (default 5)")
    ap.add_argument("--cells", default=None, help="workload:cluster:load,... (default: all)")
    ap.add_argument("--oracle", action="store_true", help="add the rollout oracle's rows")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--summarise", action="store_true")
    args = ap.parse_args()
    if args.summarise:
        summarise(args.out)
        summarise_oracle(args.out)
        return
    seeds = [int(x) for x in args.seeds.split(",")]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if args.out.exists():
        for line in args.out.read_text().splitlines():
            c = json.loads(line)
            done.add((c["cluster"], c["workload"], c["load"], c["seed"]))
    where = clusters(args.out.parent)
    chosen = None
    if args.cells:
        chosen = {(w, c, float(x)) for w, c, x in (t.split(":") for t in args.cells.split(","))}
    cells = [
        (c, w, load, seed)
        for w, c, load, seed in itertools.product(WORKLOADS, where, LOADS, seeds)
        if (c, w, load, seed) not in done and (chosen is None or (w, c, load) in chosen)
    ]
    with ThreadPoolExecutor(args.jobs) as pool, args.out.open("a") as out:
        for cell in pool.map(lambda x: run_cell(x[0], where[x[0]], x[1], x[2], x[3], args), cells):
            out.write(json.dumps(cell) + "\n")
            out.flush()
            print(
                cell["workload"],
                cell["cluster"],
                cell["load"],
                "error" if "error" in cell else "ok",
                flush=True,
            )


if __name__ == "__main__":
    main()
