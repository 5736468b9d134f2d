"""KV-policy study (docs/cache.md, "Study"): placement policies x KV policies on one preset at
loads given as fractions of the cluster's measured capacity, several seeds.

    nice -n 10 python research/kv_study.py --workload tool-heavy --loads 0.5,0.8 --seeds 3 \\
        --workflows 1000 --out results/kv_study

Writes rows.csv (one row per run: the ``simulate --json`` metrics, appended as each run
ends, so an interrupted study keeps what it measured) and prints a markdown table of means
over seeds (± the standard deviation) and, per load and placement policy, the paired ratio
of agent-aware's hotspot miss rate to LRU's. ``--first-seed`` adds seeds to an earlier
study; ``--render`` reads one or more rows.csv and prints one table with seed-paired ratios and
their 95% Student-t half-widths against ``--reference`` (placement:kv), and the hotspot
ratios with theirs:

    python research/kv_study.py --render results/kv05/*/rows.csv --reference eft:lru
"""

from __future__ import annotations

import argparse
import csv
import statistics
from pathlib import Path
from typing import Any

from scalesched.runs.setup import Scenario, prepare, run
from scalesched.stats import mean_ci_text, mean_sd

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


def read_rows(paths: list[Path]) -> list[dict[str, Any]]:
    """The rows of several rows.csv files, loads and seeds parsed back to numbers."""
    rows: list[dict[str, Any]] = []
    for path in paths:
        with path.open() as fh:
            for row in csv.DictReader(fh):
                rows.append({**row, "load": float(row["load"]), "seed": int(row["seed"])})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cluster", default="hetero-16")
    parser.add_argument("--workload", default="tool-heavy")
    parser.add_argument("--loads", default="0.5,0.8")
    parser.add_argument("--seeds", type=int, default=3, help="how many seeds")
    parser.add_argument("--first-seed", type=int, default=0, help="the first seed")
    parser.add_argument("--workflows", type=int, default=1000)
    parser.add_argument("--policies", default="eft,cache_aware,least_loaded")
    parser.add_argument("--kv", default="off,lru,ttl,agent-aware")
    parser.add_argument("--out", type=Path, default=Path("results/kv_study"))
    parser.add_argument("--render", type=Path, nargs="+", help="rows.csv files to tabulate")
    parser.add_argument("--reference", default="eft:lru", help="placement:kv of the ratios")
    args = parser.parse_args()
    if args.render:
        rows = read_rows(args.render)
        print(paired_table(rows, tuple(args.reference.split(":"))))
        print(hotspot_ratios(rows, "hotspot_miss_rate"))
        print(hotspot_ratios(rows, "hotspot_stay_miss_rate"))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for load in (float(x) for x in args.loads.split(",")):
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            setup = prepare(
                args.cluster,
                Scenario(workload=args.workload, workflows=args.workflows, load=load, seed=seed),
            )
            for policy in args.policies.split(","):
                for kv in args.kv.split(","):
                    m = run(setup, policy, kv_policy=None if kv == "off" else kv).metrics
                    row = {"load": load, "seed": seed, "policy": policy, "kv": kv, **m}
                    rows.append(row)
                    write_rows(args.out / "rows.csv", rows)
                    print(
                        f"load {load} seed {seed} {policy:>12} {kv:>11}: "
                        f"mean {m['avg_response_time_s']:.2f} s, steady {m['steady_state']}",
                        flush=True,
                    )
    print(table(rows))
    print(hotspot_ratios(rows, "hotspot_miss_rate"))
    print(hotspot_ratios(rows, "hotspot_stay_miss_rate"))


def _ms(values: list[float]) -> str:
    if not values:
        return "-"
    mean, sd = mean_sd(values)
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
        steady = sum(str(r["steady_state"]) == "True" for r in rs)
        lines.append(
            f"| {load} | {policy} | {kv} | " + " | ".join(cells) + f" | {steady}/{len(rs)} |"
        )
    return "\n".join(lines)


PAIRED = ("avg_response_time_s", "p95_response_time_s", "ttft_p95_s")
LEVELS = ("prefix_hit_rate", "reentry_moved_rate", "hotspot_miss_rate", "hotspot_stay_miss_rate")


def _ci(ratios: list[float]) -> str:
    return mean_ci_text(ratios)


def _mean(rows: list[dict[str, Any]], key: str) -> str:
    values = [float(r[key]) for r in rows if r.get(key) not in (None, "")]
    return f"{statistics.fmean(values):.3g}" if values else "-"


def paired_table(rows: list[dict[str, Any]], reference: tuple[str, ...]) -> str:
    """Per (load, placement, kv): mean response and TTFT p95 (means over seeds); mean, p95
    response and TTFT p95 over the reference's on the same seed (mean over seeds ± the 95%
    Student-t half-width); the cache columns' means; how many runs were steady."""
    by = {(r["load"], r["policy"], r["kv"], r["seed"]): r for r in rows}
    ref = ":".join(reference)
    lines = [
        f"| load | placement | kv | mean response s | mean / {ref} | p95 / {ref} | TTFT p95 s "
        f"| TTFT p95 / {ref} | prefix hit | re-entry moved | hotspot miss "
        "| hotspot miss, stayed | steady |",
        "|" + "---|" * 13,
    ]
    cells_in_order = dict.fromkeys((r["load"], r["policy"], r["kv"]) for r in rows)
    for load, policy, kv in sorted(cells_in_order, key=lambda cell: cell[0]):  # stable: by load
        runs = [r for r in rows if (r["load"], r["policy"], r["kv"]) == (load, policy, kv)]
        pairs = [
            (r, by[(load, *reference, r["seed"])])
            for r in runs
            if (load, *reference, r["seed"]) in by
        ]
        ratios = {
            k: _ci([float(a[k]) / float(b[k]) for a, b in pairs if float(b[k]) > 0]) for k in PAIRED
        }
        steady = sum(str(r["steady_state"]) == "True" for r in runs)
        cells = [
            _mean(runs, "avg_response_time_s"),
            ratios["avg_response_time_s"],
            ratios["p95_response_time_s"],
            _mean(runs, "ttft_p95_s"),
            ratios["ttft_p95_s"],
            *(_mean(runs, k) for k in LEVELS),
            f"{steady}/{len(runs)}",
        ]
        lines.append(f"| {load} | `{policy}` | {kv} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def hotspot_ratios(rows: list[dict[str, Any]], key: str) -> str:
    """Agent-aware's ``key`` over LRU's, paired by seed, per (load, policy)."""
    by = {(r["load"], r["policy"], r["kv"], r["seed"]): r for r in rows}
    lines = [
        f"| load | placement | agent-aware / lru {key} (per seed) | mean ± 95% |",
        "|---|---|---|---|",
    ]
    for load, policy in sorted({(r["load"], r["policy"]) for r in rows}):
        ratios = []
        for seed in sorted({r["seed"] for r in rows}):
            a, b = by.get((load, policy, "agent-aware", seed)), by.get((load, policy, "lru", seed))
            if a and b and float(b[key]) > 0:
                ratios.append(float(a[key]) / float(b[key]))
        if not ratios:
            continue  # a placement run with one KV policy only
        shown = ", ".join(f"{x:.2f}" for x in ratios)
        lines.append(f"| {load} | {policy} | {shown} | {_ci(ratios)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
