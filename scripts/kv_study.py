"""KV-policy study (docs/cache.md, "Study"): placement policies x KV policies on one preset at
loads given as fractions of the cluster's measured capacity, several seeds.

    nice -n 10 python scripts/kv_study.py --workload tool-heavy --loads 0.5,0.8 --seeds 3 \\
        --workflows 1000 --out results/kv_study

Writes rows.csv (one row per run: the ``simulate --json`` metrics) and prints a markdown
table of means over seeds (± the standard deviation) and, per load and placement policy,
the paired ratio of agent-aware's hotspot miss rate to LRU's.
"""

from __future__ import annotations

import argparse
import csv
import statistics
from pathlib import Path
from typing import Any

from scalesched.eval.setup import Scenario, prepare, run

KEYS = (
    "avg_response_time_s",
    "p95_response_time_s",
    "ttft_mean_s",
    "ttft_p95_s",
    "prefix_hit_rate",
    "reentry_miss_rate",
    "reentry_moved_rate",
    "hotspot_miss_rate",
    "hotspot_stay_miss_rate",
)


def write_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    """One CSV row per run; the columns are the union of every row's keys, in first-seen order."""
    keys: list[str] = []
    for row in rows:
        keys += [k for k in row if k not in keys]
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=keys, restval="")
        writer.writeheader()
        writer.writerows(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cluster", default="hetero-16")
    parser.add_argument("--workload", default="tool-heavy")
    parser.add_argument("--loads", default="0.5,0.8")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--workflows", type=int, default=1000)
    parser.add_argument("--policies", default="eft,cache_aware,least_loaded")
    parser.add_argument("--kv", default="off,lru,ttl,agent-aware")
    parser.add_argument("--out", type=Path, default=Path("results/kv_study"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    for load in (float(x) for x in args.loads.split(",")):
        for seed in range(args.seeds):
            setup = prepare(
                args.cluster,
                Scenario(workload=args.workload, workflows=args.workflows, load=load, seed=seed),
            )
            for policy in args.policies.split(","):
                for kv in args.kv.split(","):
                    m = run(setup, policy, kv_policy=None if kv == "off" else kv).metrics
                    row = {"load": load, "seed": seed, "policy": policy, "kv": kv, **m}
                    rows.append(row)
                    print(
                        f"load {load} seed {seed} {policy:>12} {kv:>11}: "
                        f"mean {m['avg_response_time_s']:.2f} s, steady {m['steady_state']}",
                        flush=True,
                    )
    write_rows(args.out / "rows.csv", rows)
    print(table(rows))
    print(hotspot_ratios(rows, "hotspot_miss_rate"))
    print(hotspot_ratios(rows, "hotspot_stay_miss_rate"))


def _ms(values: list[float]) -> str:
    if not values:
        return "-"
    mean = statistics.fmean(values)
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{mean:.3g} ± {sd:.2g}"


def table(rows: list[dict[str, Any]]) -> str:
    """Means over seeds per (load, policy, kv)."""
    groups: dict[tuple[float, str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["load"], r["policy"], r["kv"]), []).append(r)
    head = "| load | placement | kv | " + " | ".join(KEYS) + " | steady |"
    lines = [head, "|" + "---|" * (len(KEYS) + 4)]
    for (load, policy, kv), rs in groups.items():
        cells = [_ms([float(r[k]) for r in rs if k in r]) for k in KEYS]
        steady = sum(bool(r["steady_state"]) for r in rs)
        lines.append(
            f"| {load} | {policy} | {kv} | " + " | ".join(cells) + f" | {steady}/{len(rs)} |"
        )
    return "\n".join(lines)


def hotspot_ratios(rows: list[dict[str, Any]], key: str) -> str:
    """Agent-aware's ``key`` over LRU's, paired by seed, per (load, policy)."""
    by = {(r["load"], r["policy"], r["kv"], r["seed"]): r for r in rows}
    lines = [
        f"| load | placement | agent-aware / lru {key} (per seed) | mean |",
        "|---|---|---|---|",
    ]
    for load, policy in sorted({(r["load"], r["policy"]) for r in rows}):
        ratios = []
        for seed in sorted({r["seed"] for r in rows}):
            a, b = by.get((load, policy, "agent-aware", seed)), by.get((load, policy, "lru", seed))
            if a and b and float(b[key]) > 0:
                ratios.append(float(a[key]) / float(b[key]))
        shown = ", ".join(f"{x:.2f}" for x in ratios)
        lines.append(f"| {load} | {policy} | {shown} | {_ms(ratios)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
