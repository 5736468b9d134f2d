"""The headroom map (docs/headroom.md): in each cell (workload x cluster x load) the best
heuristic's gap to the capacity-aware bound, and a learned policy's ratio to the best
heuristic, each from one `scalesched headroom --json` run.

    python research/headroom_map.py --out results/headroom-map.jsonl [--seeds 5] [--jobs 2]
    python research/headroom_map.py --out results/headroom-map.jsonl --summarise

Cells already in the output file are skipped, so an interrupted map resumes. The oracle is
left out (``--no-oracle``): at about 9 CPU minutes per 400 workflows it does not fit a map
on a laptop; the gap to the bound is what any scheduler could at most still win.
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from scalesched.policies import BEST_HEURISTIC_CANDIDATES

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
    cluster: str, where: str, workload: str, load: float, args: argparse.Namespace
) -> dict:
    cmd = [sys.executable, "-m", "scalesched", "headroom", "--cluster", where]
    cmd += ["--workload", workload, "--load", str(load), "--workflows", str(args.workflows)]
    cmd += ["--seed", str(args.seed), "--no-oracle", "--json", "--no-progress"]
    for policy in (*BEST_HEURISTIC_CANDIDATES, LEARNED):
        cmd += ["--policy", policy]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    cell = {"cluster": cluster, "workload": workload, "load": load, "seed": args.seed}
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--workflows", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--summarise", action="store_true")
    args = ap.parse_args()
    if args.summarise:
        summarise(args.out)
        return
    args.out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if args.out.exists():
        for line in args.out.read_text().splitlines():
            c = json.loads(line)
            done.add((c["cluster"], c["workload"], c["load"], c["seed"]))
    where = clusters(args.out.parent)
    cells = [
        (c, w, load)
        for w, c, load in itertools.product(WORKLOADS, where, LOADS)
        if (c, w, load, args.seed) not in done
    ]
    with ThreadPoolExecutor(args.jobs) as pool, args.out.open("a") as out:
        for cell in pool.map(lambda x: run_cell(x[0], where[x[0]], x[1], x[2], args), cells):
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
